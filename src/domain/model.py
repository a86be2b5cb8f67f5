"""Value objects that flow through the lookup pipeline."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from types import MappingProxyType

from lookup_knowledge.domain.identity import EvidenceIdentity
from lookup_knowledge.domain.relevance import ScoreKind


class SearchMode(StrEnum):
    DENSE = "dense"
    SPARSE = "sparse"
    HYBRID = "hybrid"

    @property
    def needs_query_vector(self) -> bool:
        return self is not SearchMode.SPARSE


class Traffic(StrEnum):
    """Who made a lookup: real agents (production), the Eval harness or a Replay. Audit
    statistics and listings count production traffic unless asked for another."""

    PRODUCTION = "production"
    EVAL = "eval"
    REPLAY = "replay"


class InvocationStatus(StrEnum):
    OK = "ok"
    NO_EVIDENCE = "no_evidence"
    ERROR = "error"


_EMPTY: Mapping[str, object] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class QueryHints:
    """What the L0 query transformer understood. Hints only: never evidence."""

    query: str
    domains: tuple[str, ...] = ()
    matched_keywords: tuple[str, ...] = ()
    entities: tuple[str, ...] = ()
    filter_candidate: str | None = None

    def __post_init__(self) -> None:
        if self.filter_candidate is not None and self.filter_candidate not in self.domains:
            raise ValueError("filter_candidate must be one of the matched domains")

    def as_trace(self) -> dict[str, object]:
        return {
            "domains": list(self.domains),
            "matchedKeywords": list(self.matched_keywords),
            "entities": list(self.entities),
            "filterCandidate": self.filter_candidate,
        }


@dataclass(frozen=True, slots=True)
class EvidenceCandidate:
    """One search hit with its identity and a normalised relevance.

    ``content`` is None while the hit is not yet materialised (late materialisation:
    only the survivors of dedup, cap and truncation have their text fetched).
    """

    identity: EvidenceIdentity
    original_rank: int
    raw_score: float
    score_kind: ScoreKind
    relevance: float
    content: str | None = None
    source: str = ""
    title: str = ""
    breadcrumb: str = ""
    category: str = ""
    source_type: str = ""
    hit_reasons: tuple[str, ...] = ()
    # Absolute evidence strength in [0, 1] when it differs from the ranking relevance
    # (hybrid: the best normalised per-list score, while ``relevance`` is the fused one).
    strength: float | None = None
    metadata: Mapping[str, object] = field(
        default_factory=lambda: _EMPTY, compare=False, hash=False
    )
    # The row's primary key as the engine returned it (late materialisation fetches by
    # it: a row whose key differs from its evidence key is still found).
    row_id: str | None = None
    # The tenant of that row (its access metadata; "" for a row without one): which
    # tenant's copy of the evidence key it is, for the audit record.
    row_tenant: str = ""

    def __post_init__(self) -> None:
        if self.original_rank < 1:
            raise ValueError("original_rank is 1-based")
        if not (0.0 <= self.relevance <= 1.0) or math.isnan(self.relevance):
            raise ValueError("relevance must be in [0, 1]")
        if self.strength is not None and not 0.0 <= self.strength <= 1.0:
            raise ValueError("strength must be in [0, 1]")

    @property
    def evidence_strength(self) -> float:
        """What min-relevance, relevanceLevel and qualityScore judge: absolute, per hit."""
        return self.relevance if self.strength is None else self.strength

    @property
    def evidence_key(self) -> str:
        return self.identity.evidence_key

    @property
    def doc_id(self) -> str | None:
        return self.identity.doc_id

    @property
    def chunk_index(self) -> int | None:
        return self.identity.chunk_index

    def with_content(self, content: str) -> EvidenceCandidate:
        return replace(self, content=content)

    def with_hit_reasons(self, reasons: tuple[str, ...]) -> EvidenceCandidate:
        return replace(self, hit_reasons=reasons)


@dataclass(frozen=True, slots=True)
class RerankAdjustment:
    """One explained contribution to a final ranking score."""

    rule: str
    weight: float
    contribution: float
    detail: str = ""

    def as_trace(self) -> dict[str, object]:
        return {
            "rule": self.rule,
            "weight": self.weight,
            "contribution": round(self.contribution, 6),
            "detail": self.detail,
        }


@dataclass(frozen=True, slots=True)
class RankedCandidate:
    candidate: EvidenceCandidate
    final_score: float
    adjustments: tuple[RerankAdjustment, ...] = ()

    @property
    def evidence_key(self) -> str:
        return self.candidate.evidence_key

    @property
    def doc_id(self) -> str | None:
        return self.candidate.doc_id

    def with_candidate(self, candidate: EvidenceCandidate) -> RankedCandidate:
        return replace(self, candidate=candidate)
