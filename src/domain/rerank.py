"""Rule-based, explainable rerank.

final score = relevance_weight * relevance
            + domain_match   (candidate category is one of the L0 domains)
            + entity_match   * share of L0 entities found in the candidate's text
            + keyword_match  * share of L0 keywords found in the candidate's text
            + source_type    (per-type bonus from configuration, e.g. runbook: 0.05)
            + hint_alignment (an L0 keyword or entity appears in the title/breadcrumb,
                              i.e. the chunk is *about* what was asked, not just
                              mentioning it)

Every non-zero contribution is returned as a ``RerankAdjustment`` and ends up in the
rerank trace with its weight. With ``enabled=False`` the final score is the relevance
alone (the seed behaviour), which the eval harness compares against.

Text matching is the L0 rule (``query_understanding.keyword_in``): case-insensitive, on
ASCII word boundaries for ASCII terms, as a substring for Chinese and other scripts.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from lookup_knowledge.domain.model import (
    EvidenceCandidate,
    QueryHints,
    RankedCandidate,
    RerankAdjustment,
)
from lookup_knowledge.domain.query_understanding import keyword_in

_NO_SOURCE_WEIGHTS: Mapping[str, float] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class RerankWeights:
    enabled: bool = True
    relevance: float = 1.0
    domain_match: float = 0.10
    entity_match: float = 0.15
    keyword_match: float = 0.10
    hint_alignment: float = 0.05
    source_type: Mapping[str, float] = field(default_factory=lambda: _NO_SOURCE_WEIGHTS)

    def __post_init__(self) -> None:
        for name in (
            "relevance",
            "domain_match",
            "entity_match",
            "keyword_match",
            "hint_alignment",
        ):
            value = getattr(self, name)
            if not math.isfinite(value) or value < 0:
                raise ValueError(f"rerank weight {name} must be a finite number >= 0")
        for kind, value in self.source_type.items():
            if not math.isfinite(value):
                raise ValueError(f"rerank source-type weight {kind} must be finite")


def _found(needles: Sequence[str], haystack: str) -> list[str]:
    # The same matching as L0: ASCII terms on word boundaries (``pg`` is not in
    # ``upgrade``, ``10.0.0.1`` is not ``10.0.0.15``), other scripts as substrings.
    return [n for n in needles if n and keyword_in(n, haystack)]


def _text_of(candidate: EvidenceCandidate) -> str:
    parts = (candidate.title, candidate.breadcrumb, candidate.source, candidate.content or "")
    return "\n".join(parts)


def score_candidate(
    candidate: EvidenceCandidate, hints: QueryHints, weights: RerankWeights
) -> RankedCandidate:
    base = RerankAdjustment(
        rule="relevance",
        weight=weights.relevance if weights.enabled else 1.0,
        contribution=(weights.relevance if weights.enabled else 1.0) * candidate.relevance,
        detail=f"{candidate.score_kind.value} score {candidate.raw_score:.6g}",
    )
    if not weights.enabled:
        return RankedCandidate(candidate, base.contribution, (base,))
    adjustments = [base]
    if weights.domain_match and candidate.category and candidate.category in hints.domains:
        adjustments.append(
            RerankAdjustment(
                "domain_match",
                weights.domain_match,
                weights.domain_match,
                f"category {candidate.category}",
            )
        )
    text = _text_of(candidate)
    if weights.entity_match and hints.entities:
        found = _found(hints.entities, text)
        if found:
            share = len(found) / len(hints.entities)
            adjustments.append(
                RerankAdjustment(
                    "entity_match",
                    weights.entity_match,
                    weights.entity_match * share,
                    ", ".join(found),
                )
            )
    if weights.keyword_match and hints.matched_keywords:
        found = _found(hints.matched_keywords, text)
        if found:
            share = len(found) / len(hints.matched_keywords)
            adjustments.append(
                RerankAdjustment(
                    "keyword_match",
                    weights.keyword_match,
                    weights.keyword_match * share,
                    ", ".join(found),
                )
            )
    if candidate.source_type:
        bonus = weights.source_type.get(candidate.source_type, 0.0)
        if bonus:
            adjustments.append(RerankAdjustment("source_type", bonus, bonus, candidate.source_type))
    if weights.hint_alignment:
        heading = f"{candidate.title}\n{candidate.breadcrumb}"
        aligned = _found((*hints.entities, *hints.matched_keywords), heading)
        if aligned:
            adjustments.append(
                RerankAdjustment(
                    "hint_alignment",
                    weights.hint_alignment,
                    weights.hint_alignment,
                    "heading mentions " + ", ".join(aligned),
                )
            )
    final = sum(a.contribution for a in adjustments)
    return RankedCandidate(candidate, final, tuple(adjustments))


def rerank(
    candidates: Sequence[EvidenceCandidate], hints: QueryHints, weights: RerankWeights
) -> list[RankedCandidate]:
    """Score every candidate; the caller sorts (so it can trace before/after ranks)."""
    return [score_candidate(c, hints, weights) for c in candidates]
