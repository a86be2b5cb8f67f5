"""An answer as claims: sentences (English and Chinese punctuation), the document ids
each one cites, and what it quotes.

Citations are bracketed document ids by default (``[docA#chunk-2]``,
``[docA#chunk-2, docB#chunk-0]``, full-width ``【…】`` too); the pattern is configurable (its
first group, or the whole match, is a list of ids separated by ``,`` ``;`` ``，`` ``；``).
A bracket whose items contain spaces (``[see below]``) or that opens a Markdown link
(``[text](url)``) is not a citation. A citation right after a sentence's full stop
(``… 14 days. [refunds#chunk-0]``) belongs to that sentence.

A sentence is a claim when it cites something or states something checkable: a fact
(number, code, identifier, name), a quote, or at least ``MIN_CONTENT_WORDS`` content
words; questions, lines ending in ``:`` and code fences are not claims.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace

from lookup_knowledge.domain.answer_check.facts import Fact, extract_facts
from lookup_knowledge.domain.answer_check.sentences import full_stop_ends_sentence
from lookup_knowledge.domain.answer_check.words import content_words
from lookup_knowledge.domain.citation_marks import DEFAULT_CITATION_PATTERN

MIN_CONTENT_WORDS = 4
MAX_QUOTE_CHARS = 2000

_ID_SEPARATORS = re.compile(r"\s*[,;，；]\s*")
_QUOTES = re.compile(
    r'"(?P<a>[^"\n]{1,2000})"|“(?P<b>[^”\n]{1,2000})”|「(?P<c>[^」\n]{1,2000})」|『(?P<d>[^』\n]{1,2000})』'
)
_CLOSERS = "\"'”’」』)）]】*_`"
_HARD_STOPS = "。！？；!?"
_LINE_PREFIX = re.compile(r"\s*(?:#{1,6}\s+|>\s*)*(?:[-*+•]\s+|\d{1,3}[.)]\s+)?(?:\[[ xX]\]\s+)?")
_NOT_CLAIM_LINE = re.compile(r"^\s*(?:```|~~~|\|?\s*:?-{3,}|<!--)")


@dataclass(frozen=True, slots=True)
class Citation:
    document_id: str
    start: int  # span of the whole bracket in the answer
    end: int


@dataclass(frozen=True, slots=True)
class Quote:
    text: str
    start: int
    end: int
    document_id: str | None = None  # Claude's cited_text belongs to one cited block


@dataclass(frozen=True, slots=True)
class Claim:
    index: int
    text: str
    start: int
    end: int
    citations: tuple[Citation, ...]
    quotes: tuple[Quote, ...]
    facts: tuple[Fact, ...]
    content: tuple[str, ...]  # content words (unstemmed) of the text without citations

    @property
    def cited_ids(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(c.document_id for c in self.citations))


class CitationSyntax:
    """Finds citations with a pattern (see the module docstring)."""

    def __init__(self, pattern: str = DEFAULT_CITATION_PATTERN) -> None:
        try:
            self._pattern = re.compile(pattern)
        except re.error as error:
            raise ValueError(f"invalid citation pattern {pattern!r}: {error}") from None
        self.pattern = pattern

    def find(self, text: str) -> list[tuple[int, int, tuple[str, ...]]]:
        """(start, end, ids) of every citation bracket in ``text``."""
        found: list[tuple[int, int, tuple[str, ...]]] = []
        for m in self._pattern.finditer(text):
            inner = m.group(1) if self._pattern.groups else m.group(0)
            if inner is None:
                continue
            items = tuple(i for i in _ID_SEPARATORS.split(inner.strip()) if i)
            if items and all(not any(c.isspace() for c in i) for i in items):
                found.append((m.start(), m.end(), items))
        return found


def _sentence_spans(
    text: str, start: int, end: int, citations: Sequence[tuple[int, int, tuple[str, ...]]]
) -> Iterator[tuple[int, int]]:
    """Sentences of ``text[start:end]`` (one line), citations after a stop attached."""
    inside = [(a, b) for a, b, _ in citations if start <= a and b <= end]

    def citation_at(i: int) -> int | None:
        for a, b in inside:
            if a == i:
                return b
        return None

    def in_citation(i: int) -> bool:
        return any(a <= i < b for a, b in inside)

    begin = start
    i = start
    while i < end:
        ch = text[i]
        stop = False
        if not in_citation(i):
            if ch in _HARD_STOPS:
                stop = True
            elif ch == ".":
                stop = full_stop_ends_sentence(text, i, end)
        if not stop:
            i += 1
            continue
        j = i + 1
        while j < end and (text[j] in _HARD_STOPS or text[j] in ".!?" or text[j] in _CLOSERS):
            j += 1
        # citations that follow the stop belong to this sentence
        k = j
        while True:
            while k < end and text[k] in " \t":
                k += 1
            after = citation_at(k)
            if after is None:
                break
            k = j = after
            while j < end and text[j] in ".。,，;；":
                j += 1
            k = j
        yield begin, j
        begin = i = j
    if begin < end:
        yield begin, end


def _strip_span(text: str, a: int, b: int) -> tuple[int, int]:
    while a < b and text[a].isspace():
        a += 1
    while b > a and text[b - 1].isspace():
        b -= 1
    return a, b


def _without(text: str, start: int, spans: Sequence[tuple[int, int]]) -> str:
    """``text`` (which starts at ``start``) with the given absolute spans blanked out."""
    chars = list(text)
    for a, b in spans:
        for i in range(max(a - start, 0), min(b - start, len(chars))):
            chars[i] = " "
    return "".join(chars)


def quotes_in(text: str, offset: int = 0) -> tuple[Quote, ...]:
    out: list[Quote] = []
    for m in _QUOTES.finditer(text):
        inner = next(g for g in m.groups() if g is not None)
        if inner.strip():
            out.append(Quote(inner, offset + m.start(), offset + m.end()))
    return tuple(out)


def _make_claim(
    index: int,
    answer: str,
    a: int,
    b: int,
    citations: Sequence[tuple[int, int, tuple[str, ...]]],
    extra_quotes: Sequence[Quote] = (),
    extra_citations: Sequence[Citation] = (),
) -> Claim:
    own = [(ca, cb, ids) for ca, cb, ids in citations if a <= ca < b]
    cites = [Citation(d, ca, cb) for ca, cb, ids in own for d in ids]
    bare = _without(answer[a:b], a, [(ca, cb) for ca, cb, _ in own])
    quotes = quotes_in(bare, a)
    return Claim(
        index=index,
        text=answer[a:b],
        start=a,
        end=b,
        citations=(*cites, *extra_citations),
        quotes=(*quotes, *extra_quotes),
        facts=extract_facts(bare),
        content=tuple(content_words(bare)),
    )


def is_checkable(claim: Claim) -> bool:
    """A sentence worth a verdict: it cites, quotes, states a fact or enough words."""
    if claim.citations or claim.quotes:
        return True
    stripped = claim.text.strip()
    if stripped.endswith(("?", "？", ":", "：")):
        return False
    return bool(claim.facts) or len(claim.content) >= MIN_CONTENT_WORDS


def _line_spans(answer: str, lo: int, hi: int) -> Iterator[tuple[int, int]]:
    at = lo
    fenced = False
    for line in answer[lo:hi].splitlines(keepends=True):
        start, end = at, at + len(line.rstrip("\r\n"))
        at += len(line)
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
            continue
        if fenced or _NOT_CLAIM_LINE.match(line) or not line.strip():
            continue
        prefix = _LINE_PREFIX.match(answer, start, end)
        yield (prefix.end() if prefix else start), end


def split_claims(answer: str, syntax: CitationSyntax | None = None) -> tuple[Claim, ...]:
    """The checkable claims of a plain-text (or Markdown) answer, in order."""
    syntax = syntax or CitationSyntax()
    return _claims_between(answer, 0, len(answer), syntax.find(answer), 0)


def _claims_between(
    answer: str,
    lo: int,
    hi: int,
    citations: Sequence[tuple[int, int, tuple[str, ...]]],
    first_index: int,
) -> tuple[Claim, ...]:
    claims: list[Claim] = []
    for line_start, line_end in _line_spans(answer, lo, hi):
        for a, b in _sentence_spans(answer, line_start, line_end, citations):
            a, b = _strip_span(answer, a, b)
            if a >= b:
                continue
            only_citations = not _without(answer[a:b], a, [(x, y) for x, y, _ in citations]).strip(
                " .。,，;；"
            )
            if only_citations and claims and claims[-1].end <= a:
                # a citation standing alone after a sentence: it belongs to that sentence
                previous = claims.pop()
                claim = _make_claim(previous.index, answer, previous.start, b, citations)
            else:
                claim = _make_claim(first_index + len(claims), answer, a, b, citations)
            claims.append(claim)
    kept = [c for c in claims if is_checkable(c)]
    return tuple(replace(c, index=first_index + i) for i, c in enumerate(kept))


# ------------------------------------------------------------------ Claude content blocks


def _field(block: object, name: str) -> object:
    if isinstance(block, Mapping):
        return block.get(name)
    return getattr(block, name, None)


def claims_from_claude(
    content: Sequence[object], syntax: CitationSyntax | None = None
) -> tuple[str, tuple[Claim, ...]]:
    """(answer text, claims) of a Claude response's content blocks.

    Text blocks are concatenated into the answer. A text block with
    ``search_result_location`` citations is one claim citing each ``source`` (our
    document_id), with each ``cited_text`` as a quote that must occur in that block; the
    other text is split into sentences like a plain answer (and may use bracketed ids).
    Blocks of other types (tool use, thinking) are skipped. Accepts dicts or objects with
    the same attributes (the SDK's models).
    """
    parts: list[str] = []
    cited: list[tuple[int, int, list[Citation], list[Quote]]] = []
    at = 0
    for block in content:
        if _field(block, "type") != "text":
            continue
        text = _field(block, "text")
        if not isinstance(text, str):
            continue
        locations = _field(block, "citations") or []
        cites: list[Citation] = []
        quotes: list[Quote] = []
        if isinstance(locations, Sequence):
            for location in locations:
                if _field(location, "type") != "search_result_location":
                    continue
                source = _field(location, "source")
                if not isinstance(source, str) or not source:
                    continue
                cites.append(Citation(source, at, at + len(text)))
                cited_text = _field(location, "cited_text")
                if isinstance(cited_text, str) and cited_text.strip():
                    quotes.append(Quote(cited_text[:MAX_QUOTE_CHARS], at, at + len(text), source))
        if cites:
            cited.append((at, at + len(text), cites, quotes))
        parts.append(text)
        at += len(text)
    answer = "".join(parts)
    syntax = syntax or CitationSyntax()
    brackets = syntax.find(answer)
    claims: list[Claim] = []
    cursor = 0
    for a, b, cites, quotes in cited:
        claims.extend(_claims_between(answer, cursor, a, brackets, len(claims)))
        lo, hi = _strip_span(answer, a, b)
        if lo >= hi:
            lo, hi = a, b
        claims.append(_make_claim(len(claims), answer, lo, hi, brackets, quotes, cites))
        cursor = b
    claims.extend(_claims_between(answer, cursor, len(answer), brackets, len(claims)))
    return answer, tuple(replace(c, index=i) for i, c in enumerate(claims))
