"""The verdict rules: is a claim supported by the text its citations showed the agent?

For one claim, in order:

1. no citation -> ``uncited``;
2. a cited id that was not returned to this session (``unknown``, or ``not_in_session``:
   returned to another session) -> ``invalid_citation``;
3. no text of the cited blocks available (not kept, and the block has changed since or is
   gone) -> ``unsupported`` with that reason;
4. every quote must occur in a cited block (Claude's ``cited_text`` in *its* block), every
   fact (number with unit, version, code, identifier, name) in some cited block, and the
   claim's content words must be covered (stemmed) by the cited text at least
   ``min_coverage`` - or, with an embedder, the claim-to-block cosine reaches
   ``min_cosine`` while coverage is at least ``min_coverage_with_cosine``. Any miss ->
   ``unsupported``, each miss a reason; else ``supported``, with the best block and the
   span in it (the quote's, or the sentence window sharing the most units).

The rules are deterministic; an external judge may add a signal but never decides.
"""

from __future__ import annotations

import hashlib
import re
from bisect import bisect_left
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from lookup_knowledge.domain.answer_check.claims import Claim
from lookup_knowledge.domain.answer_check.facts import Fact, FactIndex, FactKind, extract_facts
from lookup_knowledge.domain.answer_check.text import Folded, find_folded, fold
from lookup_knowledge.domain.answer_check.words import (
    Stem,
    coverage,
    folded_content_words,
    stem_units,
)
from lookup_knowledge.domain.projection import ELLIPSIS

CHECKER_VERSION = "1"


class Verdict(StrEnum):
    SUPPORTED = "supported"
    UNSUPPORTED = "unsupported"
    UNCITED = "uncited"
    INVALID_CITATION = "invalid_citation"


# Most severe first: the overall verdict of an answer is its worst claim's.
SEVERITY = (Verdict.INVALID_CITATION, Verdict.UNSUPPORTED, Verdict.UNCITED, Verdict.SUPPORTED)


class CitationStatus(StrEnum):
    VALID = "valid"
    UNKNOWN = "unknown"
    NOT_IN_SESSION = "not_in_session"
    #: The id exists, but only in documents the session's principal may not see.
    FORBIDDEN = "forbidden"


@dataclass(frozen=True, slots=True)
class CitationVerdict:
    document_id: str
    status: CitationStatus
    other_sessions: tuple[str, ...] = ()  # where a not_in_session id was returned

    def describe(self) -> str:
        if self.status is CitationStatus.VALID:
            return f"{self.document_id}: returned in this session"
        if self.status is CitationStatus.NOT_IN_SESSION:
            return (
                f"{self.document_id}: not returned in this session "
                f"(returned in session {', '.join(self.other_sessions)})"
            )
        if self.status is CitationStatus.FORBIDDEN:
            return (
                f"{self.document_id}: not visible to this session's principal "
                "(forbidden by access control)"
            )
        return f"{self.document_id}: never returned (unknown id)"


@dataclass(frozen=True, slots=True)
class CheckThresholds:
    min_coverage: float = 0.5
    min_cosine: float = 0.8
    min_coverage_with_cosine: float = 0.3

    def __post_init__(self) -> None:
        for name in ("min_coverage", "min_cosine", "min_coverage_with_cosine"):
            value = getattr(self, name)
            if isinstance(value, bool) or not 0.0 <= value <= 1.0:
                raise ValueError(f"{name} must be between 0 and 1")


_SENTENCE_END = re.compile(r"[.!?](?=\s)|[。！？；\n]")


@dataclass(frozen=True, slots=True)
class PreparedEvidence:
    """One block's text as the agent saw it, analysed once per check."""

    document_id: str
    text: str
    folded: Folded
    units: frozenset[str]
    facts: tuple[Fact, ...]
    sentences: tuple[tuple[int, int, frozenset[str]], ...]

    @classmethod
    def of(cls, document_id: str, text: str, stem: Stem) -> PreparedEvidence:
        folded = fold(text)  # once: sentences take their folded slices through ``origin``
        spans: list[tuple[int, int]] = []
        start = 0
        for m in _SENTENCE_END.finditer(text):
            if text[start : m.end()].strip():
                spans.append((start, m.end()))
            start = m.end()
        if text[start:].strip():
            spans.append((start, len(text)))
        sentences = []
        for a, b in spans:
            fa, fb = bisect_left(folded.origin, a), bisect_left(folded.origin, b)
            words = folded_content_words(folded.text[fa:fb])
            sentences.append((a, b, stem_units(words, stem)))
        return cls(
            document_id=document_id,
            text=text,
            folded=folded,
            units=stem_units(folded_content_words(folded.text), stem),
            # a `code span` is one identifier, and the facts inside it count too
            facts=extract_facts(text, skip_first_word=False)
            + (extract_facts(text.replace("`", " "), skip_first_word=False) if "`" in text else ()),
            sentences=tuple(sentences),
        )

    def best_span(self, units: frozenset[str]) -> tuple[int, int]:
        """The sentence, or pair of adjacent sentences, sharing the most units."""
        best = (0, len(self.text))
        best_hits = -1
        for a, b, own in self.sentences:
            hits = len(units & own)
            if hits > best_hits:
                best, best_hits = (a, b), hits
        single = best_hits
        for (a, _, own), (_, b, own2) in zip(self.sentences, self.sentences[1:], strict=False):
            pair = len(units & (own | own2))
            if pair > max(best_hits, single + 1):  # a second sentence must earn its place
                best, best_hits = (a, b), pair
        a, b = best
        while a < b and self.text[a].isspace():
            a += 1
        while b > a and self.text[b - 1].isspace():
            b -= 1
        return a, b


@dataclass(frozen=True, slots=True)
class EvidenceText:
    """What the checker has of a cited block: its shown text, or why there is none."""

    document_id: str
    prepared: PreparedEvidence | None
    problem: str | None = None


@dataclass(frozen=True, slots=True)
class SupportSpan:
    document_id: str
    start: int
    end: int
    score: float


@dataclass(frozen=True, slots=True)
class QuoteMatch:
    text: str
    document_id: str | None  # None: found in no cited block
    start: int | None = None
    end: int | None = None


@dataclass(frozen=True, slots=True)
class ClaimVerdict:
    claim: Claim
    citations: tuple[CitationVerdict, ...]
    verdict: Verdict
    reasons: tuple[str, ...] = ()
    support: SupportSpan | None = None
    quotes: tuple[QuoteMatch, ...] = ()
    coverage: float | None = None
    cosine: float | None = None
    missing: tuple[str, ...] = field(default=())  # the facts not found, as written


def _describe_fact(fact: Fact) -> str:
    kind = {
        FactKind.NUMBER: "number",
        FactKind.VERSION: "version",
        FactKind.CODE: "code",
        FactKind.IDENTIFIER: "identifier",
        FactKind.ENTITY: "name",
    }[fact.kind]
    return f'{kind} "{fact.text}"'


def assess_claim(
    claim: Claim,
    citations: Mapping[str, CitationVerdict],
    evidence: Mapping[str, Sequence[EvidenceText]],
    stem: Stem,
    thresholds: CheckThresholds,
    cosine: Mapping[str, float] | None = None,
) -> ClaimVerdict:
    """The verdict on one claim (see the module docstring).

    ``citations``: the status of each id the claim cites; ``evidence``: what is known of
    each valid cited block (every version the session was shown); ``cosine``: the
    claim-to-block similarity by document_id, when an embedder is configured.
    """
    cited = tuple(citations[d] for d in claim.cited_ids)
    if not cited:
        return ClaimVerdict(claim, (), Verdict.UNCITED, ("factual sentence without a citation",))
    invalid = [c for c in cited if c.status is not CitationStatus.VALID]
    if invalid:
        return ClaimVerdict(
            claim, cited, Verdict.INVALID_CITATION, tuple(c.describe() for c in invalid)
        )
    usable: list[PreparedEvidence] = []
    problems: list[str] = []
    for c in cited:
        for item in evidence.get(c.document_id, ()):
            if item.prepared is not None:
                usable.append(item.prepared)
            elif item.problem:
                problems.append(f"{c.document_id}: {item.problem}")
    if not usable:
        why = problems or [f"{c.document_id}: no shown text available" for c in cited]
        return ClaimVerdict(claim, cited, Verdict.UNSUPPORTED, tuple(dict.fromkeys(why)))

    reasons: list[str] = []
    quote_matches: list[QuoteMatch] = []
    for quote in claim.quotes:
        targets = [p for p in usable if quote.document_id in (None, p.document_id)]
        match: QuoteMatch | None = None
        for prepared in targets:
            span = find_folded(quote.text, prepared.folded)
            if span is not None:
                match = QuoteMatch(quote.text, prepared.document_id, *span)
                break
        if match is None:
            place = f"block {quote.document_id}" if quote.document_id else "cited evidence"
            reasons.append(f'quote not found in the {place}: "{_short(quote.text)}"')
            match = QuoteMatch(quote.text, None)
        quote_matches.append(match)

    index = FactIndex.of_facts(
        [f for p in usable for f in p.facts], [p.folded.text for p in usable]
    )
    missing = [f for f in claim.facts if not index.contains(f)]
    reasons.extend(f"{_describe_fact(f)} is not in the cited evidence" for f in missing)

    units = stem_units(claim.content, stem)
    union = frozenset().union(*(p.units for p in usable))
    score = coverage(units, union)
    best = max(usable, key=lambda p: (coverage(units, p.units), -usable.index(p)))
    similarity = None
    if cosine:
        known = [cosine[p.document_id] for p in usable if p.document_id in cosine]
        similarity = max(known) if known else None
    enough = score >= thresholds.min_coverage or (
        similarity is not None
        and similarity >= thresholds.min_cosine
        and score >= thresholds.min_coverage_with_cosine
    )
    if not enough:
        detail = f"coverage {score:.2f} < {thresholds.min_coverage:.2f}"
        if similarity is not None:
            detail += f", cosine {similarity:.2f}"
        reasons.append(f"the cited evidence does not cover the claim's words ({detail})")
    shown_score = round(max(score, similarity or 0.0), 4)
    if reasons:
        return ClaimVerdict(
            claim,
            cited,
            Verdict.UNSUPPORTED,
            tuple(reasons + problems),
            quotes=tuple(quote_matches),
            coverage=score,
            cosine=similarity,
            missing=tuple(f.text for f in missing),
        )
    where: tuple[str, int, int] = (best.document_id, *best.best_span(units))
    for q in quote_matches:
        if q.document_id is not None and q.start is not None and q.end is not None:
            where = (q.document_id, q.start, q.end)
            break
    return ClaimVerdict(
        claim,
        cited,
        Verdict.SUPPORTED,
        (),
        support=SupportSpan(*where, shown_score),
        quotes=tuple(quote_matches),
        coverage=score,
        cosine=similarity,
    )


def _short(text: str, limit: int = 80) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def overall_verdict(verdicts: Sequence[ClaimVerdict]) -> Verdict:
    """The worst claim's verdict; ``supported`` when every claim is (or there is none)."""
    present = {v.verdict for v in verdicts}
    return next(v for v in SEVERITY if v in present or v is Verdict.SUPPORTED)


def content_hash(text: str) -> str:
    """The hash the audit store keeps of a shown block (sha256 of its UTF-8 text)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def shown_text_from(current: str, expected_hash: str) -> str | None:
    """The text the agent was shown, rebuilt from a block's current full text, or None.

    A block was shown whole, stripped, or cut to a budget with an ellipsis (see
    ``domain.projection``); the one candidate whose hash is ``expected_hash`` is the text
    shown. None means the block changed since it was shown.
    """
    if content_hash(current) == expected_hash:
        return current
    stripped = current.strip()
    if content_hash(stripped) == expected_hash:
        return stripped
    for cut in range(max(len(stripped) - 1, 0), -1, -1):
        candidate = stripped[:cut] + ELLIPSIS
        if content_hash(candidate) == expected_hash:
            return candidate
    return None
