"""The Retriever: L0 hints in, search passes out.

1. a pass filtered by the explicit category, else by the L0 filter candidate (when the
   transformer found exactly one domain);
2. when an L0-filtered pass yields no usable evidence (nothing at or above
   ``rag.min-relevance``), an unfiltered retry, with the reason recorded;
3. nothing usable either: no candidates (the lookup answers ``no_evidence``).

An explicit category is the host's filter: it is never dropped by a retry. Hits become
candidates here, with their identity, normalised relevance and absolute strength. With
late materialisation on, the survivors' content is fetched afterwards (``materialise``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from lookup_knowledge.application.lookup.config import LookupConfig
from lookup_knowledge.application.ports import (
    Clock,
    Embedder,
    KnowledgeSearchHit,
    KnowledgeSearchPort,
    KnowledgeSearchRequest,
)
from lookup_knowledge.domain.errors import ConfigurationError
from lookup_knowledge.domain.model import EvidenceCandidate, QueryHints, RankedCandidate, SearchMode
from lookup_knowledge.domain.relevance import normalise_relevance


@dataclass(frozen=True, slots=True)
class SearchPass:
    """One search the Retriever ran, as the retrieval trace shows it."""

    filter: str | None
    filter_source: str | None  # "explicit", "l0" or None
    hits: int
    usable: int
    duration_ms: float

    def as_trace(self) -> dict[str, object]:
        return {
            "filter": self.filter,
            "filterSource": self.filter_source,
            "hits": self.hits,
            "usable": self.usable,
            "durationMs": round(self.duration_ms, 3),
        }


@dataclass(frozen=True, slots=True)
class Retrieval:
    """What the Retriever found: the usable candidates of the last pass."""

    candidates: tuple[EvidenceCandidate, ...] = ()
    passes: tuple[SearchPass, ...] = ()
    fallback_reason: str | None = None
    below_min_relevance: int = 0  # of the pass whose hits are used
    timings_ms: Mapping[str, float] = field(default_factory=dict)
    search_parameters: Mapping[str, object] = field(default_factory=dict)

    @property
    def filter_applied(self) -> str | None:
        return self.passes[-1].filter if self.passes else None

    @property
    def candidate_count(self) -> int:
        return self.passes[-1].hits if self.passes else 0


@dataclass(frozen=True, slots=True)
class Materialised:
    """The returned candidates with their content, and those that vanished meanwhile."""

    kept: tuple[RankedCandidate, ...]
    vanished: tuple[str, ...] = ()
    duration_ms: float = 0.0


class Retriever:
    def __init__(
        self,
        *,
        search: KnowledgeSearchPort,
        embedder: Embedder | None,
        clock: Clock,
        config: LookupConfig,
    ) -> None:
        self._search = search
        self._embedder = embedder
        self._clock = clock
        self._config = config

    def retrieve(
        self, query: str, hints: QueryHints, mode: SearchMode, category: str | None
    ) -> Retrieval:
        timings: dict[str, float] = {}
        vector = self._query_vector(query, mode, timings)
        first_filter = category or hints.filter_candidate
        source = "explicit" if category else ("l0" if first_filter else None)
        passes: list[SearchPass] = []
        usable, below = self._search_pass(query, mode, vector, first_filter, source, passes)
        fallback_reason: str | None = None
        if not usable and first_filter is not None and source == "l0":
            fallback_reason = (
                "filtered_pass_empty"
                if passes[-1].hits == 0
                else "filtered_pass_below_min_relevance"
            )
            usable, below = self._search_pass(query, mode, vector, None, None, passes)
        timings["search"] = sum(p.duration_ms for p in passes)
        return Retrieval(
            candidates=tuple(usable),
            passes=tuple(passes),
            fallback_reason=fallback_reason,
            below_min_relevance=below,
            timings_ms=timings,
            search_parameters=dict(self._search.search_parameters()),
        )

    def materialise(self, final: Sequence[RankedCandidate]) -> Materialised:
        """Fetch the content of candidates searched without it (late materialisation).
        A row deleted between search and fetch (a concurrent re-ingest) is dropped: a
        block is never shown without its text."""
        missing = [r.evidence_key for r in final if r.candidate.content is None]
        if not missing:
            return Materialised(kept=tuple(final))
        t = self._clock.monotonic()
        fetched = self._search.fetch_content(missing)
        kept: list[RankedCandidate] = []
        vanished: list[str] = []
        for item in final:
            content = item.candidate.content
            if content is None and item.evidence_key in fetched:
                item = item.with_candidate(item.candidate.with_content(fetched[item.evidence_key]))
                content = item.candidate.content
            if content is None:
                vanished.append(item.evidence_key)
            else:
                kept.append(item)
        return Materialised(
            kept=tuple(kept),
            vanished=tuple(vanished),
            duration_ms=(self._clock.monotonic() - t) * 1000.0,
        )

    # ------------------------------------------------------------------ parts

    def _query_vector(
        self, query: str, mode: SearchMode, timings: dict[str, float]
    ) -> tuple[float, ...] | None:
        if not mode.needs_query_vector:
            return None
        if self._embedder is None:
            raise ConfigurationError(
                "rag.search-mode", mode.value, "dense and hybrid search need an embedder"
            )
        t = self._clock.monotonic()
        vector = tuple(self._embedder.embed_query(query))
        timings["embed"] = (self._clock.monotonic() - t) * 1000.0
        return vector

    def _search_pass(
        self,
        query: str,
        mode: SearchMode,
        vector: tuple[float, ...] | None,
        category: str | None,
        source: str | None,
        passes: list[SearchPass],
    ) -> tuple[list[EvidenceCandidate], int]:
        settings = self._config.retrieval
        cap = settings.max_chunks_per_document
        request = KnowledgeSearchRequest(
            query_text=query,
            top_k=settings.retrieve_k,
            mode=mode,
            query_vector=vector,
            category_filter=category,
            group_size=cap if self._config.engine_grouping and cap else None,
            include_content=not self._config.late_materialisation,
        )
        t = self._clock.monotonic()
        hits = self._search.search(request)
        duration_ms = (self._clock.monotonic() - t) * 1000.0
        candidates = [
            self._candidate(hit, rank, mode, category) for rank, hit in enumerate(hits, 1)
        ]
        usable = [c for c in candidates if c.evidence_strength >= settings.min_relevance]
        passes.append(
            SearchPass(
                filter=category,
                filter_source=source,
                hits=len(candidates),
                usable=len(usable),
                duration_ms=duration_ms,
            )
        )
        return usable, len(candidates) - len(usable)

    def _candidate(
        self, hit: KnowledgeSearchHit, rank: int, mode: SearchMode, category: str | None
    ) -> EvidenceCandidate:
        meta = hit.metadata
        reasons = [mode.value, *hit.reasons]
        if category is not None:
            reasons.append(f"filter:category={category}")

        def text(key: str) -> str:
            value = meta.get(key)
            return value if isinstance(value, str) else ""

        calibration = self._config.calibration
        strength = (
            max(
                normalise_relevance(score, kind, calibration)
                for kind, score in hit.component_scores
            )
            if hit.component_scores
            else None
        )
        return EvidenceCandidate(
            identity=hit.identity,
            original_rank=rank,
            raw_score=hit.score,
            score_kind=hit.score_kind,
            relevance=normalise_relevance(hit.score, hit.score_kind, calibration),
            strength=strength,
            content=hit.content,
            source=text("source"),
            title=text("title"),
            breadcrumb=text("breadcrumb"),
            category=text("category"),
            source_type=text("source_type"),
            hit_reasons=tuple(dict.fromkeys(reasons)),
            metadata=meta,
        )
