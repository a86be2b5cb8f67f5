"""The verdict rules: is a claim supported by the text its citations showed the agent?

For one claim, in order:

1. no citation -> ``uncited``;
2. a cited id that was not returned to this session (``unknown``, or ``not_in_session``:
   returned to another session) -> ``invalid_citation``;
3. no text of the cited blocks available (not kept, and the block has changed since or is
   gone) -> ``unsupported`` with that reason;
4. the claim is aligned, in each cited block, to the sentence or run of adjacent sentences
   sharing most of its stemmed words (``PreparedEvidence.align``; offsets reported). A
   negation or direction the claim flips against that span (``polarity``), or a "more
   than" where it says "less than", -> ``contradicted``, the reason naming both words;
5. every quote must occur in a cited block (Claude's ``cited_text`` in *its* block), every
   number in an aligned span (not one found elsewhere while the span gives another value,
   nor one the span gives for another word), every version, code, identifier and name in
   some cited block; a rare claim word the span replaces in place by another is a miss;
   the claim's content words must be covered (stemmed) by the cited text at least
   ``min_coverage`` - or, with an embedder, the claim-to-block cosine reaches
   ``min_cosine`` while coverage is at least ``min_coverage_with_cosine``. Any miss ->
   ``unsupported``, each miss a reason; else ``supported``, with the aligned span (or the
   quote's).

The rules are deterministic; a judge's opinion is applied by the use case (signal or veto).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from lookup_knowledge.domain.answer_check.claims import Claim
from lookup_knowledge.domain.answer_check.evidence import (
    EvidenceText,
    PreparedEvidence,
)
from lookup_knowledge.domain.answer_check.facts import (
    Fact,
    FactIndex,
    FactKind,
    unit_base,
)
from lookup_knowledge.domain.answer_check.polarity import contradiction, is_directional
from lookup_knowledge.domain.answer_check.text import find_folded, fold_text
from lookup_knowledge.domain.answer_check.words import (
    STOP_WORDS,
    Stem,
    coverage,
    folded_content_words,
    is_rare_word,
    is_technical_term,
    stem_units,
    swapped_words,
)

CHECKER_VERSION = "2"


class Verdict(StrEnum):
    SUPPORTED = "supported"
    UNSUPPORTED = "unsupported"
    UNCITED = "uncited"
    INVALID_CITATION = "invalid_citation"
    #: The aligned span says the opposite: a negation or a direction the claim flips.
    CONTRADICTED = "contradicted"


# Most severe first: the overall verdict of an answer is its worst claim's.
SEVERITY = (
    Verdict.INVALID_CITATION,
    Verdict.CONTRADICTED,
    Verdict.UNSUPPORTED,
    Verdict.UNCITED,
    Verdict.SUPPORTED,
)


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
    #: The span of the cited text the claim was aligned to (every check ran against it).
    span: SupportSpan | None = None
    span_text: str = ""  # its text, what a judge is given


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
    usable, problems = _usable_evidence(cited, evidence)
    if not usable:
        why = problems or [f"{c.document_id}: no shown text available" for c in cited]
        return ClaimVerdict(claim, cited, Verdict.UNSUPPORTED, tuple(dict.fromkeys(why)))
    return _assess_text(claim, cited, usable, problems, stem, thresholds, cosine)


def _usable_evidence(
    cited: Sequence[CitationVerdict], evidence: Mapping[str, Sequence[EvidenceText]]
) -> tuple[list[PreparedEvidence], list[str]]:
    """The cited blocks whose shown text is known, and why the others are not."""
    usable: list[PreparedEvidence] = []
    problems: list[str] = []
    for c in cited:
        for item in evidence.get(c.document_id, ()):
            if item.prepared is not None:
                usable.append(item.prepared)
            elif item.problem:
                problems.append(f"{c.document_id}: {item.problem}")
    return usable, problems


@dataclass(frozen=True, slots=True)
class _Alignment:
    """Every usable block aligned to the claim on its own, and the best of them."""

    aligned: list[tuple[PreparedEvidence, int, int, frozenset[str], int]]
    best: PreparedEvidence
    start: int
    end: int

    @property
    def text(self) -> str:
        return self.best.text[self.start : self.end]


def _align(units: frozenset[str], usable: Sequence[PreparedEvidence]) -> _Alignment:
    aligned = [(p, *p.align(units)) for p in usable]
    best, start, end, _, _ = max(aligned, key=lambda x: (x[4], -aligned.index(x)))
    return _Alignment(aligned, best, start, end)


def _assess_text(
    claim: Claim,
    cited: tuple[CitationVerdict, ...],
    usable: list[PreparedEvidence],
    problems: list[str],
    stem: Stem,
    thresholds: CheckThresholds,
    cosine: Mapping[str, float] | None,
) -> ClaimVerdict:
    """Steps 4 and 5 of the module docstring, on the cited blocks whose text is known."""
    quote_matches, reasons = _match_quotes(claim, usable)
    units = stem_units(claim.content, stem)
    alignment = _align(units, usable)
    missing, conflicts, fact_reasons = _fact_misses(claim, alignment, usable, stem)
    reasons.extend(fact_reasons)
    union = frozenset().union(*(p.units for p in usable))
    rare_missing, rare = _rare_word_misses(claim, alignment.text, union, stem)
    missing.extend(rare_missing)

    # Coverage is the one check read on the cited blocks, not the span: a claim may take
    # its subject from a heading and its value from a listing line (the span alone would
    # miss the former); what the span must hold is checked above.
    score = coverage(units, union)
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
    if score >= thresholds.min_coverage or not enough:
        reasons.extend(rare)  # not when the embedder's cosine carried a paraphrase
    else:
        missing = [f for f in missing if f.start or f.end]
    aligned_span = SupportSpan(
        alignment.best.document_id, alignment.start, alignment.end, round(score, 4)
    )
    opposite = contradiction(bare_text(claim), alignment.text, stem)
    if opposite is not None:
        conflicts.insert(0, opposite.describe())
    if conflicts or reasons:
        return ClaimVerdict(
            claim,
            cited,
            Verdict.CONTRADICTED if conflicts else Verdict.UNSUPPORTED,
            tuple(conflicts + reasons + problems),
            quotes=tuple(quote_matches),
            coverage=score,
            cosine=similarity,
            missing=tuple(f.text for f in missing),
            span=aligned_span,
            span_text=alignment.text,
        )
    located: tuple[str, int, int] = (alignment.best.document_id, alignment.start, alignment.end)
    for q in quote_matches:
        if q.document_id is not None and q.start is not None and q.end is not None:
            located = (q.document_id, q.start, q.end)
            break
    return ClaimVerdict(
        claim,
        cited,
        Verdict.SUPPORTED,
        (),
        support=SupportSpan(*located, round(max(score, similarity or 0.0), 4)),
        quotes=tuple(quote_matches),
        coverage=score,
        cosine=similarity,
        span=aligned_span,
        span_text=alignment.text,
    )


def _match_quotes(
    claim: Claim, usable: Sequence[PreparedEvidence]
) -> tuple[list[QuoteMatch], list[str]]:
    """Where each quote of the claim occurs (in *its* block when it names one), and a
    reason for each that occurs in no cited block."""
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
    return quote_matches, reasons


def _fact_misses(
    claim: Claim, alignment: _Alignment, usable: Sequence[PreparedEvidence], stem: Stem
) -> tuple[list[Fact], list[str], list[str]]:
    """(missing facts, conflicts, reasons): numbers must stand in an aligned span, every
    other fact in some cited block."""
    aligned = alignment.aligned
    # every cited block (or version of one) is aligned on its own; numbers count where
    # they stand in some block's aligned span
    span_facts = [f for p, a, b, _, _ in aligned for f in p.facts if a <= f.start and f.end <= b]
    span_index = FactIndex.of_facts(span_facts, [p.folded_slice(a, b) for p, a, b, _, _ in aligned])
    index = FactIndex.of_facts(
        [f for p in usable for f in p.facts], [p.folded.text for p in usable]
    )
    missing: list[Fact] = []
    conflicts: list[str] = []
    reasons: list[str] = []
    for fact in claim.facts:
        if fact.kind is FactKind.NUMBER:
            if span_index.contains(fact):
                conflict = _comparator_conflict(claim, fact, aligned)
                if conflict:
                    conflicts.append(conflict)
                swapped = _swapped_number(claim, fact, aligned, stem)
                if swapped:
                    missing.append(fact)
                    reasons.append(swapped)
                continue
            if index.contains(fact):
                if not _span_states_another(fact, span_facts):
                    continue  # e.g. a value on the next line of a config listing
                where = (
                    "is not in the aligned span (it gives another value; this one occurs elsewhere)"
                )
            else:
                where = "is not in the cited evidence"
            missing.append(fact)
            reasons.append(f"{_describe_fact(fact)} {where}")
        elif not index.contains(fact):
            missing.append(fact)
            reasons.append(f"{_describe_fact(fact)} is not in the cited evidence")
    return missing, conflicts, reasons


def _rare_word_misses(
    claim: Claim, span_text: str, union: frozenset[str], stem: Stem
) -> tuple[list[Fact], list[str]]:
    """A rare claim word the span replaces in place by another, and a technical name no
    cited block holds: each a missing "fact" and a reason (applied by the caller only
    when the words, not an embedder's cosine, carried the claim)."""
    in_facts = " ".join(fold_text(f.text) for f in claim.facts)
    attribution = {
        w.lower()
        for m in _ATTRIBUTION.finditer(claim.text)
        for g in m.groups()
        if g
        for w in g.split()
    }
    missing: list[Fact] = []
    rare: list[str] = []
    span_words = folded_content_words(fold_text(span_text))
    for word, said in swapped_words(claim.content, span_words, stem):
        if word in in_facts or word in attribution or not is_rare_word(word):
            continue
        if is_directional(word) or stem([word])[0] in union:
            continue
        missing.append(Fact(FactKind.ENTITY, word, word, 0, 0))
        rare.append(f'word "{word}" is not in the cited evidence (it says "{said}")')
    named = {r.split('"')[1] for r in rare}
    for word in dict.fromkeys(w for part in claim.content for w in part.split("-")):
        if word in named or word in attribution or not is_technical_term(word):
            continue
        if stem([word])[0] not in union and word not in in_facts:
            missing.append(Fact(FactKind.ENTITY, word, word, 0, 0))
            rare.append(f'name "{word}" is not in the cited evidence')
    return missing, rare


# "The runbook says", "according to the guide": who says it is not what is said.
_ATTRIBUTION = re.compile(
    r"(?:^|[,;:]\s*)(?:the |this |our |your )?([\w -]{1,40}?)\s+"
    r"(?:says|said|states|stated|notes|explains|reports|reported|mentions|writes|write|"
    r"shows|found|find)\b"
    r"|\baccording to (?:the |this |our |your )?([\w -]{1,40}?)(?=[,:]|$)",
    re.IGNORECASE,
)
_GREATER = re.compile(
    r"(?:>|≥|>=|\bmore than|\bgreater than|\bover|\babove|\bat least|\bexceed\w*|\bup from)\s*$",
    re.IGNORECASE,
)
_LESS = re.compile(
    r"(?:<|≤|<=|\bless than|\bfewer than|\bunder|\bbelow|\bat most|\bup to|\bdown from)\s*$",
    re.IGNORECASE,
)


def _comparator(text: str, at: int) -> str | None:
    before = text[max(0, at - 16) : at]
    if _GREATER.search(before):
        return "more than"
    if _LESS.search(before):
        return "less than"
    return None


def _comparator_conflict(
    claim: Claim,
    fact: Fact,
    aligned: Sequence[tuple[PreparedEvidence, int, int, frozenset[str], int]],
) -> str:
    """A claim's "more than 50" against the span's "less than 50" (or "50" exactly)."""
    mine = _comparator(claim.text, fact.start)  # a claim's facts: offsets in its text
    if mine is None:
        return ""
    theirs = [
        _comparator(p.text, f.start)
        for p, a, b, _, _ in aligned
        for f in p.facts
        if a <= f.start and f.end <= b and f.kind is FactKind.NUMBER and f.value == fact.value
    ]
    opposite = [t for t in theirs if t is not None and t != mine]
    if not opposite or mine in theirs:
        return ""  # a bound where the span states the value itself is a paraphrase
    said = opposite[0]
    return f'the claim says "{mine} {fact.text}" where the evidence says "{said} {fact.text}"'


_NEXT_WORD = re.compile(r"[^\W\d_][\w-]{2,}")


def _word_after(text: str, end: int, stem: Stem) -> str | None:
    """The stem of the first content word within 24 characters after ``end``."""
    for m in _NEXT_WORD.finditer(text[end : end + 24]):
        word = fold_text(m.group(0))
        if word not in STOP_WORDS:
            return stem([word])[0]
    return None


def _span_states_another(fact: Fact, span_facts: Sequence[Fact]) -> bool:
    """Whether the span states another quantity where the claim states ``fact``: a number
    of the same unit family (or both bare) with another value, or, for a claim number with
    a unit, any other number with a unit ("2.5 times higher" where the claim says "60 %")."""
    family = unit_base(1.0, fact.unit)[0]
    return any(
        f.kind is FactKind.NUMBER
        and f.value != fact.value
        and (unit_base(1.0, f.unit)[0] == family or (fact.unit is not None and f.unit is not None))
        for f in span_facts
    )


def _swapped_number(
    claim: Claim,
    fact: Fact,
    aligned: Sequence[tuple[PreparedEvidence, int, int, frozenset[str], int]],
    stem: Stem,
) -> str:
    """A number the span gives for something else: the claim's "60 % of controls" where
    the span says "30 % of controls ... 60 % of treated animals"."""
    word = _word_after(claim.text, fact.end, stem)
    if word is None:
        return ""
    for_word: list[Fact] = []
    for p, a, b, _, _ in aligned:
        for f in p.facts:
            number = f.kind is FactKind.NUMBER and a <= f.start and f.end <= b
            if number and _word_after(p.text, f.end, stem) == word:
                for_word.append(f)
    if not for_word or any(f.value == fact.value for f in for_word):
        return ""
    return (
        f'{_describe_fact(fact)} is not what the evidence gives for "{word}" '
        f'(it gives "{for_word[0].text}")'
    )


def bare_text(claim: Claim) -> str:
    """The claim's text with its citation brackets blanked out (same offsets)."""
    chars = list(claim.text)
    for c in claim.citations:
        for i in range(max(c.start - claim.start, 0), min(c.end - claim.start, len(chars))):
            chars[i] = " "
    return "".join(chars)


def _short(text: str, limit: int = 80) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def overall_verdict(verdicts: Sequence[ClaimVerdict]) -> Verdict:
    """The worst claim's verdict; ``supported`` when every claim is (or there is none)."""
    return worst_verdict([v.verdict for v in verdicts])


def worst_verdict(verdicts: Sequence[Verdict]) -> Verdict:
    """The most severe of these verdicts (``SEVERITY``); ``supported`` for none."""
    present = set(verdicts)
    return next(v for v in SEVERITY if v in present or v is Verdict.SUPPORTED)
