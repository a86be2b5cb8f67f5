"""The PostProcessor: candidates in, the ranked and returned evidence out.

    rerank (explained bonuses) -> sort by final score -> dedup by evidenceKey
    -> per-document cap -> drop what is far below the best evidence -> return-n

Every candidate leaves with an outcome (``returned``, ``truncated``, ``capped``,
``far_below_best``, ``duplicate``, ``vanished``) and the counts of each step, for the traces.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from lookup_knowledge.application.lookup.config import LookupConfig
from lookup_knowledge.application.lookup.retriever import DroppedHit, Materialised, Retrieval
from lookup_knowledge.application.ports import Clock
from lookup_knowledge.domain.model import QueryHints, RankedCandidate
from lookup_knowledge.domain.postprocess import (
    cap_per_document,
    dedup_by_evidence_key,
    drop_far_below_best,
    sort_by_final_score,
    truncate,
)
from lookup_knowledge.domain.rerank import rerank

_NONE: Mapping[str, str] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class PostProcessed:
    """``ranked``: every candidate after rerank and sort; ``final``: what is returned."""

    ranked: tuple[RankedCandidate, ...] = ()
    final: tuple[RankedCandidate, ...] = ()
    outcomes: Mapping[str, str] = field(default_factory=lambda: _NONE)
    counts: Mapping[str, int] = field(default_factory=dict)
    vanished: tuple[str, ...] = ()
    duration_ms: float = 0.0
    dropped: tuple[DroppedHit, ...] = ()  # at materialisation, with the reason

    def with_materialised(self, materialised: Materialised) -> PostProcessed:
        """The returned evidence once its content is fetched: what vanished is dropped."""
        outcomes = dict(self.outcomes)
        for key in materialised.vanished:
            outcomes[key] = "vanished"
        for item in materialised.kept:
            outcomes[item.evidence_key] = "returned"
        return PostProcessed(
            ranked=self.ranked,
            final=materialised.kept,
            outcomes=MappingProxyType(outcomes),
            counts={**self.counts, "returned": len(materialised.kept)},
            vanished=materialised.vanished,
            duration_ms=self.duration_ms,
            dropped=materialised.dropped,
        )


class PostProcessor:
    def __init__(self, *, config: LookupConfig, clock: Clock) -> None:
        self._config = config
        self._clock = clock

    def process(self, retrieval: Retrieval, hints: QueryHints) -> PostProcessed:
        t = self._clock.monotonic()
        settings = self._config.retrieval
        ordered = sort_by_final_score(rerank(retrieval.candidates, hints, self._config.rerank))
        deduped = dedup_by_evidence_key(ordered)
        capped = cap_per_document(deduped.kept, settings.max_chunks_per_document)
        strong = drop_far_below_best(capped.kept, self._config.calibration.min_share_of_best)
        final = truncate(strong.kept, settings.return_n)
        outcomes: dict[str, str] = {}
        for item in ordered:
            outcomes.setdefault(item.evidence_key, "duplicate")
        for item in deduped.kept:
            outcomes[item.evidence_key] = "truncated"
        for item in capped.dropped:
            outcomes[item.evidence_key] = "capped"
        for item in strong.dropped:
            outcomes[item.evidence_key] = "far_below_best"
        for item in final:
            outcomes[item.evidence_key] = "returned"
        counts = {
            "candidates": retrieval.candidate_count,
            "belowMinRelevance": retrieval.below_min_relevance,
            "afterDedup": len(deduped.kept),
            "duplicatesMerged": sum(deduped.merged.values()),
            "afterCap": len(capped.kept),
            "cappedOut": len(capped.dropped),
            "farBelowBest": len(strong.dropped),
            "returned": len(final),
        }
        return PostProcessed(
            ranked=tuple(ordered),
            final=tuple(final),
            outcomes=MappingProxyType(outcomes),
            counts=counts,
            duration_ms=(self._clock.monotonic() - t) * 1000.0,
        )
