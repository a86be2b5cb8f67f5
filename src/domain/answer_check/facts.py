"""Checkable facts in a sentence: numbers with their units, versions, error codes,
identifiers and named entities, each with a normalised key.

A claim is only as good as its specifics: "the pool holds 20 connections" is wrong if the
evidence says 50, however many words the two sentences share. Every fact a claim states
must occur in the text it cites. Extraction runs in a fixed order and each match masks
its characters, so ``PG-53300`` is one error code (not a number 53300), ``10.20.0.53`` one
address and ``v2.3.1`` one version.

Normalisation: ``1,000`` = ``1000``; number words (``fifteen`` = 15, ``twenty-five``,
``two hundred``) and simple Chinese numerals (``十五分钟``) where unambiguous (``one`` only
before a unit; ``an hour`` = 1 h); units to one spelling (``seconds``/``sec``/``s``, ``分钟``/``minutes``/``min``)
and, within time and data size, to a base value, so ``60 seconds`` matches ``1 minute``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from enum import StrEnum

from lookup_knowledge.domain.answer_check.text import fold_text, word_set


class FactKind(StrEnum):
    NUMBER = "number"
    VERSION = "version"
    CODE = "code"
    IDENTIFIER = "identifier"
    ENTITY = "entity"


@dataclass(frozen=True, slots=True)
class Fact:
    kind: FactKind
    text: str  # as written
    key: str  # normalised: what is compared
    start: int
    end: int
    value: float | None = None  # numbers
    unit: str | None = None  # canonical unit of a number, if any


# unit spelling -> (canonical unit, family, factor to the family's base)
_TIME = "time"
_SIZE = "size"
_UNIT_TABLE: dict[str, tuple[str, str | None, float]] = {}


def _units(canonical: str, family: str | None, factor: float, *spellings: str) -> None:
    for spelling in (canonical, *spellings):
        _UNIT_TABLE[spelling] = (canonical, family, factor)


_units("ms", _TIME, 0.001, "msec", "millisecond", "milliseconds", "毫秒")
_units("s", _TIME, 1.0, "sec", "secs", "second", "seconds", "秒", "秒钟")
_units("min", _TIME, 60.0, "mins", "minute", "minutes", "分钟", "分")
_units("h", _TIME, 3600.0, "hr", "hrs", "hour", "hours", "小时", "个小时")
_units("d", _TIME, 86400.0, "day", "days", "天", "日")
_units("week", _TIME, 604800.0, "weeks", "wk", "wks", "周", "个星期", "星期")
_units("month", None, 1.0, "months", "个月", "月")
_units("year", None, 1.0, "years", "yr", "yrs", "年")
_units("b", _SIZE, 1.0, "byte", "bytes")
_units("kb", _SIZE, 1e3, "kilobyte", "kilobytes")
_units("mb", _SIZE, 1e6, "megabyte", "megabytes")
_units("gb", _SIZE, 1e9, "gigabyte", "gigabytes")
_units("tb", _SIZE, 1e12, "terabyte", "terabytes")
_units("kib", _SIZE, 1024.0)
_units("mib", _SIZE, 1024.0**2)
_units("gib", _SIZE, 1024.0**3)
_units("tib", _SIZE, 1024.0**4)
_units("%", None, 1.0, "percent", "per cent", "pct")
_units("x", None, 1.0, "×", "times")
for _plain in (
    "rps",
    "qps",
    "tps",
    "req/s",
    "requests",
    "connections",
    "conns",
    "replicas",
    "nodes",
    "retries",
    "attempts",
    "shards",
    "partitions",
    "workers",
    "threads",
    "pods",
    "hosts",
    "servers",
    "errors",
    "items",
    "rows",
    "characters",
    "chars",
    "tokens",
    "次",
    "个",
    "台",
    "条",
    "人",
    "元",
    "usd",
    "eur",
    "cny",
):
    _units(_plain, None, 1.0)

_UNIT_ALTERNATION = "|".join(
    re.escape(u) for u in sorted(_UNIT_TABLE, key=lambda s: (-len(s), s)) if u != "%"
)
_CJK = "\u3400-\u9fff\uf900-\ufaff"

_WORD_UNITS = {
    "zero": 0,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
    "thirteen": 13,
    "fourteen": 14,
    "fifteen": 15,
    "sixteen": 16,
    "seventeen": 17,
    "eighteen": 18,
    "nineteen": 19,
}
_WORD_TENS = {
    "twenty": 20,
    "thirty": 30,
    "forty": 40,
    "fifty": 50,
    "sixty": 60,
    "seventy": 70,
    "eighty": 80,
    "ninety": 90,
}
_WORD_NUMBER = re.compile(
    r"(?<![\w-])(?P<n>(?:"
    + "|".join(_WORD_TENS)
    + r")(?:[- ](?:"
    + "|".join(k for k in _WORD_UNITS if k != "zero")
    + r"))?|"
    + "|".join(sorted(_WORD_UNITS, key=len, reverse=True))
    + r")(?:\s+(?P<mult>hundred|thousand|million))?(?![\w-])",
    re.IGNORECASE | re.ASCII,
)
# "an hour", "a day": one of a time unit, as definite as "1 hour".
_ONE_UNIT = re.compile(
    r"(?<![\w-])an?\s+(?P<unit>second|minute|hour|day|week|month|year)(?![\w-])",
    re.IGNORECASE | re.ASCII,
)
_ZH_DIGITS = {"零": 0, "〇": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4}
_ZH_DIGITS |= {"五": 5, "六": 6, "七": 7, "八": 8, "九": 9}
_ZH_POWERS = {"十": 10, "百": 100, "千": 1000, "万": 10000}
_ZH_UNITS = "毫秒|秒钟|秒|分钟|个小时|小时|天|个星期|星期|周|个月|年|次|个|台|条|人|元"
_ZH_NUMBER = re.compile(r"(?P<n>[零〇一二两三四五六七八九十百千万]+)(?=(?:" + _ZH_UNITS + r"))")

_NUMBER = re.compile(
    r"(?<![\w.,])(?<![A-Za-z]-)(?P<n>\d{1,3}(?:,\d{3})+|\d+)(?P<frac>\.\d+)?"
    r"(?:(?P<sp>\s?)(?P<unit>%|(?:" + _UNIT_ALTERNATION + r"))(?![a-zA-Z]))?"
    r"(?![a-zA-Z0-9_]|\.\d|,\d{3})",
    re.IGNORECASE | re.ASCII,
)

_DOTTED = re.compile(r"(?<![\w.])[A-Za-z][\w-]*(?:\.[A-Za-z][\w-]*)+(?![\w-])(?<!\.)", re.ASCII)
# (kind, pattern), in extraction order: an earlier match masks its characters.
_PATTERNS: tuple[tuple[FactKind, re.Pattern[str]], ...] = (
    (FactKind.IDENTIFIER, re.compile(r"`([^`\n]+)`")),
    (FactKind.IDENTIFIER, re.compile(r"https?://[^\s)\]>\"'`]+")),
    (
        FactKind.IDENTIFIER,
        re.compile(r"(?<![\w/])(?:~|\.{1,2})?/[\w.@-]+(?:/[\w.@-]+)+/?", re.ASCII),
    ),
    (
        FactKind.IDENTIFIER,
        re.compile(
            r"(?<![\w.])\d{1,3}(?:\.\d{1,3}){3}(?:/\d{1,2})?(?::\d{1,5})?(?![\w.])", re.ASCII
        ),
    ),
    (
        FactKind.IDENTIFIER,
        re.compile(r"(?<!\w)\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2})?)?", re.ASCII),
    ),
    (FactKind.IDENTIFIER, re.compile(r"(?<![\w:])\d{1,2}:\d{2}(?::\d{2})?(?![\w:])", re.ASCII)),
    (FactKind.IDENTIFIER, re.compile(r"(?<![\w:])[A-Za-z_][\w-]*:\d+(?![\w:])", re.ASCII)),
    (
        FactKind.VERSION,
        re.compile(
            r"(?<![\w.])(?:[vV]\d+(?:\.\d+)*|\d+\.\d+\.\d+(?:\.\d+)?)(?:-[0-9A-Za-z.]+)?(?![\w.])",
            re.ASCII,
        ),
    ),
    (FactKind.CODE, re.compile(r"(?<![\w-])[A-Z][A-Z0-9]*-\d+[A-Z0-9]*(?![\w-])", re.ASCII)),
    (FactKind.CODE, re.compile(r"(?<!\w)[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+(?!\w)", re.ASCII)),
    (FactKind.IDENTIFIER, re.compile(r"(?<!\w)[a-z][a-z0-9]*(?:_[a-z0-9]+)+(?!\w)", re.ASCII)),
    (FactKind.IDENTIFIER, _DOTTED),
    (
        FactKind.IDENTIFIER,
        re.compile(r"(?<![\w-])[a-z]+(?:-[a-z0-9]+)*-\d+[a-z0-9]*(?![\w-])", re.ASCII),
    ),
)
# A hyphenated token whose head is a name: ``IL-1alpha``, ``HIV-1-producing`` (the name is
# ``HIV-1``), ``TNF-alpha``, ``CD4-positive``. Its name part runs to the last segment that
# has a digit or a capital letter; a token without one (``long-term``) is no name.
_HYPHEN_NAME = re.compile(r"(?<![\w-])[A-Za-z][A-Za-z0-9]*(?:-[A-Za-z0-9]+)+(?![\w-])", re.ASCII)
_ALNUM = re.compile(r"(?<![\w-])(?=[A-Za-z]*\d)(?=\d*[A-Za-z])[A-Za-z0-9]{2,}(?![\w-])", re.ASCII)
_ENTITY = re.compile(
    r"(?<![\w-])(?:[A-Z][A-Za-z0-9]*(?:-[A-Za-z][A-Za-z0-9]*)+|[A-Z][a-z]+[A-Z][\w]*|[a-z]+[A-Z][\w]*|[A-Z]{2,}[0-9]*s?|[A-Z][a-z]{2,})(?![\w-])",
    re.ASCII,
)
_SENTENCE_START = re.compile(r"(?:^|[.!?:;。！？；]\s*|\n\s*|[-*•]\s+|\d+[.)]\s+)$")
# Capitalised words that are not names wherever they stand.
_NOT_NAMES = word_set(
    "the this that these those there then than when what which where while who why how "
    "if in on at as an and or but for from with without after before during into onto "
    "it its is are was were be been being do does did done has have had not no yes "
    "all any each every some most many more less both either neither one none also "
    "only just very so such our your their his her we you they he she i a to of by "
    "use using set see note make check run keep avoid always never please"
)


def _dotted_ok(text: str) -> bool:
    # "e.g" / "i.e" / "U.S" are not identifiers; "postgresql.conf", "rag.retrieve-k" are.
    parts = text.split(".")
    return len(text) >= 4 and any(len(p) >= 2 for p in parts) and all(parts)


_GREEK = word_set("alpha beta gamma delta epsilon kappa lambda sigma theta omega")


def _hyphen_name(token: str) -> str | None:
    parts = token.split("-")
    last = -1
    for i, part in enumerate(parts):
        marked = any(c.isdigit() for c in part) or any(c.isupper() for c in part[1:])
        greek = last == i - 1 and part.lower() in _GREEK
        if marked or greek or (i == 0 and len(part) >= 2 and part.isupper()):
            last = i
    if last < 0:
        return None
    return "-".join(parts[: last + 1])


def _number_words(match: re.Match[str]) -> int:
    words = match.group("n").lower().replace("-", " ").split()
    value = 0
    for w in words:
        value += _WORD_TENS.get(w, 0) + _WORD_UNITS.get(w, 0)
    mult = (match.group("mult") or "").lower()
    return value * {"hundred": 100, "thousand": 1000, "million": 1_000_000}.get(mult, 1)


def zh_numeral(text: str) -> int | None:
    """``十五`` -> 15, ``二十`` -> 20, ``三百二十`` -> 320, ``两`` -> 2; None when malformed."""
    total, section, digit = 0, 0, None
    for ch in text:
        if ch in _ZH_DIGITS:
            if digit is not None:
                return None  # two digits in a row ("一二") is a list, not a number
            digit = _ZH_DIGITS[ch]
        elif ch in _ZH_POWERS:
            power = _ZH_POWERS[ch]
            if power == 10000:
                total = (total + section + (digit or 0)) * 10000
                section, digit = 0, None
                continue
            section += (1 if digit is None else digit) * power
            digit = None
        else:
            return None
    return total + section + (digit or 0)


def _unit(spelling: str | None) -> str | None:
    if not spelling:
        return None
    found = _UNIT_TABLE.get(spelling.lower()) or _UNIT_TABLE.get(spelling)
    return found[0] if found else None


def unit_base(value: float, unit: str | None) -> tuple[str | None, float]:
    """(family, value in the family's base unit); a unit without a family is its own."""
    if unit is None:
        return None, value
    canonical, family, factor = _UNIT_TABLE[unit]
    return (family or canonical), value * factor


def _number_key(value: float, unit: str | None) -> str:
    shown = f"{value:g}" if value != int(value) else str(int(value))
    return shown if unit is None else f"{shown} {unit}"


def _number_fact(text: str, start: int, end: int, value: float, unit: str | None) -> Fact:
    return Fact(FactKind.NUMBER, text, _number_key(value, unit), start, end, value, unit)


class _Taken:
    """Which characters of the text a fact already covers: each pass takes only spans
    no earlier (more specific) pass took."""

    def __init__(self, size: int) -> None:
        self._marks = bytearray(size)

    def free(self, a: int, b: int) -> bool:
        return not any(self._marks[a:b])

    def take(self, a: int, b: int) -> None:
        self._marks[a:b] = b"\x01" * (b - a)


def extract_facts(text: str, *, skip_first_word: bool = True) -> tuple[Fact, ...]:
    """The facts stated in ``text`` in order of appearance, one per normalised key.

    ``skip_first_word``: a capitalised word that starts a sentence is not taken for a
    name (``Restart the pool`` names nothing), one with inner capitals still is.
    """
    taken = _Taken(len(text))
    found = [
        *_pattern_facts(text, taken),
        *_hyphen_name_facts(text, taken),
        *_digit_number_facts(text, taken),
        *_word_number_facts(text, taken),
        *_one_unit_facts(text, taken),
        *_zh_number_facts(text, taken),
        *_word_facts(text, taken, skip_first_word),
    ]
    unique: dict[tuple[FactKind, str], Fact] = {}
    for fact in sorted(found, key=lambda f: f.start):
        unique.setdefault((fact.kind, fact.key), fact)
    return tuple(unique.values())


def _pattern_facts(text: str, taken: _Taken) -> list[Fact]:
    found: list[Fact] = []
    for kind, pattern in _PATTERNS:
        for m in pattern.finditer(text):
            a, b = m.span()
            if not taken.free(a, b):
                continue
            raw = m.group(1) if pattern.groups else m.group(0)
            if pattern is _DOTTED and not _dotted_ok(raw):
                continue
            key = fold_text(raw).rstrip("/")
            if kind is FactKind.VERSION:
                key = key.lstrip("v")
            taken.take(a, b)
            found.append(Fact(kind, m.group(0), key, a, b))
    return found


def _hyphen_name_facts(text: str, taken: _Taken) -> list[Fact]:
    found: list[Fact] = []
    for m in _HYPHEN_NAME.finditer(text):
        a, b = m.span()
        if not taken.free(a, b):
            continue
        name = _hyphen_name(m.group(0))
        if name is not None:
            taken.take(a, b)
            found.append(Fact(FactKind.ENTITY, name, fold_text(name), a, a + len(name)))
    return found


def _digit_number_facts(text: str, taken: _Taken) -> list[Fact]:
    found: list[Fact] = []
    for m in _NUMBER.finditer(text):
        a, b = m.span()
        if not taken.free(a, b):
            continue
        value = float(m.group("n").replace(",", "") + (m.group("frac") or ""))
        unit = _unit(m.group("unit"))
        if m.group("unit") and unit is None:
            b = m.start("sp")
        taken.take(a, b)
        found.append(_number_fact(text[a:b], a, b, value, unit))
    return found


def _word_number_facts(text: str, taken: _Taken) -> list[Fact]:
    found: list[Fact] = []
    for m in _WORD_NUMBER.finditer(text):
        a, b = m.span()
        if not taken.free(a, b):
            continue
        after = re.match(r"\s*(" + _UNIT_ALTERNATION + r"|%)(?![a-zA-Z])", text[b:], re.IGNORECASE)
        unit = _unit(after.group(1)) if after else None
        if m.group("n").lower() == "one" and unit is None:
            continue  # "one of the replicas", "no one": not a count
        end = b + after.end() if after else b
        taken.take(a, end)
        found.append(_number_fact(text[a:end], a, end, float(_number_words(m)), unit))
    return found


def _one_unit_facts(text: str, taken: _Taken) -> list[Fact]:
    found: list[Fact] = []
    for m in _ONE_UNIT.finditer(text):
        a, b = m.span()
        if taken.free(a, b):
            taken.take(a, b)
            found.append(_number_fact(m.group(0), a, b, 1.0, _unit(m.group("unit"))))
    return found


def _zh_number_facts(text: str, taken: _Taken) -> list[Fact]:
    found: list[Fact] = []
    for m in _ZH_NUMBER.finditer(text):
        a, b = m.span()
        number = zh_numeral(m.group("n"))
        if number is None or not taken.free(a, b):
            continue
        after = re.match(_ZH_UNITS, text[b:])
        unit = _unit(after.group(0)) if after else None
        end = b + (after.end() if after else 0)
        taken.take(a, end)
        found.append(_number_fact(text[a:end], a, end, float(number), unit))
    return found


def _word_facts(text: str, taken: _Taken, skip_first_word: bool) -> list[Fact]:
    """Identifiers (letters with digits) and names (capitalised words)."""
    found: list[Fact] = []
    for pattern, kind in ((_ALNUM, FactKind.IDENTIFIER), (_ENTITY, FactKind.ENTITY)):
        for m in pattern.finditer(text):
            a, b = m.span()
            if not taken.free(a, b):
                continue
            word = m.group(0)
            if kind is FactKind.ENTITY:
                simple = word[0].isupper() and word[1:].islower()
                if word.lower() in _NOT_NAMES:
                    continue
                if simple and skip_first_word and _SENTENCE_START.search(text[:a]):
                    continue
            taken.take(a, b)
            key = fold_text(word)
            if kind is FactKind.ENTITY and len(key) > 3 and key.endswith("s") and word.isupper():
                key = key[:-1]  # "SLOs" is the plural of "SLO"
            found.append(Fact(kind, word, key, a, b))
    return found


# ------------------------------------------------------------------ matching


@dataclass(frozen=True, slots=True)
class FactIndex:
    """The facts and folded text of the evidence a claim cites, for membership tests."""

    folded: str
    numbers: tuple[Fact, ...]
    keys: frozenset[str]

    @classmethod
    def of(cls, texts: Sequence[str]) -> FactIndex:
        facts = [
            f
            for t in texts
            for variant in {t, t.replace("`", " ")}
            for f in extract_facts(variant, skip_first_word=False)
        ]
        return cls(
            folded="\n".join(fold_text(t) for t in texts),
            numbers=tuple(f for f in facts if f.kind is FactKind.NUMBER),
            keys=frozenset(f.key for f in facts if f.kind is not FactKind.NUMBER),
        )

    @classmethod
    def of_facts(cls, facts: Sequence[Fact], folded_texts: Sequence[str]) -> FactIndex:
        """From facts already extracted (``skip_first_word=False``) and folded texts."""
        return cls(
            folded="\n".join(folded_texts),
            numbers=tuple(f for f in facts if f.kind is FactKind.NUMBER),
            keys=frozenset(f.key for f in facts if f.kind is not FactKind.NUMBER),
        )

    def contains(self, fact: Fact) -> bool:
        if fact.kind is FactKind.NUMBER:
            return self._has_number(fact)
        if fact.key in self.keys:
            return True
        # A name or identifier also counts where it stands inside a longer token
        # ("Monday" in "Mondays", "pgbouncer" in "pgbouncer.ini") - but not mid-word.
        return re.search(r"(?<!\w)" + re.escape(fact.key), self.folded, re.ASCII) is not None

    def _has_number(self, claim: Fact) -> bool:
        """Same value, and the same quantity where both name a unit. A bare number in
        the evidence stands for a claim's "5 days" only while the evidence states no
        other quantity of that kind (in a table of delays, row "5" is not 5 days)."""
        if any(k.unit is not None and _same_number(claim, k) for k in self.numbers):
            return True
        bare = any(k.unit is None and k.value == claim.value for k in self.numbers)
        if not bare or claim.unit is None:
            return bare
        family = unit_base(1.0, claim.unit)[0]
        return not any(
            k.unit is not None and unit_base(1.0, k.unit)[0] == family for k in self.numbers
        )


def _same_number(claim: Fact, known: Fact) -> bool:
    assert claim.value is not None
    assert known.value is not None
    if claim.unit is None or known.unit is None:
        return claim.value == known.value
    if claim.unit == known.unit:
        return claim.value == known.value
    family_a, base_a = unit_base(claim.value, claim.unit)
    family_b, base_b = unit_base(known.value, known.unit)
    return family_a == family_b and abs(base_a - base_b) <= 1e-9 * max(abs(base_a), 1.0)


def missing_facts(facts: Sequence[Fact], evidence: FactIndex) -> Iterator[Fact]:
    for fact in facts:
        if not evidence.contains(fact):
            yield fact
