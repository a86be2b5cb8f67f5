"""The Retriever: L0 hints in, search passes out.

1. a pass filtered by the explicit category, else by the L0 filter candidate (when the
   transformer found exactly one domain);
2. when an L0-filtered pass yields no usable evidence (its best hit below
   ``rag.min-relevance``, on the calibrated scale of ``domain.relevance``), an
   unfiltered retry, with the reason recorded;
3. nothing usable either: no candidates (the lookup answers ``no_evidence``).

An explicit category is the host's filter: it is never dropped by a retry. Hits become
candidates here, with their identity, normalised relevance and absolute strength. With
late materialisation on, the survivors' content is fetched afterwards (``materialise``),
by the row's primary key.

A hit the audit store could not record exactly as the agent would see it (an id, a
category or a source beyond the limits of ``evidence_problem``, a NUL or a lone
surrogate in one) and a hit without text are dropped here, each with its reason in the
retrieval trace (``dropped``): evidence is never served unrecorded or empty.

Access: every pass (the filtered one and the unfiltered retry alike) and the content
fetch carry the lookup's ``AccessScope``, so the engine filters by it. Defence in
depth: each hit is checked again against ``AccessScope.allows`` with the access
metadata the engine returned; a hit that fails is dropped, counted
(``access_dropped``), logged and listed in the trace, even if the engine's filter
should have excluded it.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from lookup_knowledge.application.lookup.config import LookupConfig
from lookup_knowledge.application.ports import (
    Clock,
    Embedder,
    KnowledgeSearchHit,
    KnowledgeSearchPort,
    KnowledgeSearchRequest,
    evidence_problem,
)
from lookup_knowledge.application.ports.audit_records import row_tenant_problem
from lookup_knowledge.domain.access import UNRESTRICTED, AccessScope, split_storage_key
from lookup_knowledge.domain.errors import ConfigurationError
from lookup_knowledge.domain.model import EvidenceCandidate, QueryHints, RankedCandidate, SearchMode
from lookup_knowledge.domain.relevance import hit_relevance, normalise_relevance

logger = logging.getLogger(__name__)

#: The reason a hit the principal may not see is dropped with (trace and audit).
ACCESS_DENIED = "not visible to this principal (dropped by the access check)"


#: ``Retrieval.mode_reason`` when a hybrid lookup was answered by BM25 alone.
UNREADABLE_QUERY = "embedder_cannot_read_query"


@dataclass(frozen=True, slots=True)
class SearchPass:
    """One search the Retriever ran, as the retrieval trace shows it."""

    filter: str | None
    filter_source: str | None  # "explicit", "l0" or None
    hits: int
    usable: int
    duration_ms: float
    dropped: int = 0  # hits that could not be served (see ``Retrieval.dropped``)
    access_dropped: int = 0  # of those, hits the principal may not see

    def as_trace(self) -> dict[str, object]:
        return {
            "filter": self.filter,
            "filterSource": self.filter_source,
            "hits": self.hits,
            "usable": self.usable,
            "dropped": self.dropped,
            "accessDropped": self.access_dropped,
            "durationMs": round(self.duration_ms, 3),
        }


@dataclass(frozen=True, slots=True)
class DroppedHit:
    """A hit that was not served, and why. ``document_id`` is shown escaped (it may hold
    the very characters that made it unservable)."""

    document_id: str
    reason: str

    def as_trace(self) -> dict[str, str]:
        return {"document_id": self.document_id, "reason": self.reason}


def _shown(key: str, limit: int = 200) -> str:
    text = key if len(key) <= limit else key[:limit] + "..."
    return text.encode("utf-8", "backslashreplace").decode("utf-8").replace("\x00", "\\x00")


def _unservable(candidate: EvidenceCandidate) -> str | None:
    """Why a candidate must not be served, or None."""
    problem = evidence_problem(
        candidate.evidence_key,
        candidate.doc_id,
        candidate.identity.chunk_index,
        candidate.category,
        candidate.source,
    )
    if problem is not None:
        return f"cannot be recorded exactly: {problem}"
    return _empty_or_broken(candidate.content)


def _empty_or_broken(content: str | None) -> str | None:
    if content is None:
        return None
    if not content.strip():
        return "empty text"
    try:
        content.encode("utf-8")
    except UnicodeEncodeError:
        return "text contains a lone surrogate (not valid Unicode text)"
    return None


@dataclass(frozen=True, slots=True)
class Retrieval:
    """What the Retriever found: the usable candidates of the last pass."""

    candidates: tuple[EvidenceCandidate, ...] = ()
    passes: tuple[SearchPass, ...] = ()
    fallback_reason: str | None = None
    below_min_relevance: int = 0  # of the pass whose hits are used
    timings_ms: Mapping[str, float] = field(default_factory=dict)
    search_parameters: Mapping[str, object] = field(default_factory=dict)
    dropped: tuple[DroppedHit, ...] = ()  # of every pass
    #: The mode searched, when it is not the one asked for, and why.
    mode: SearchMode | None = None
    mode_reason: str | None = None

    @property
    def access_dropped(self) -> int:
        """Hits of every pass that the defence-in-depth access check dropped."""
        return sum(p.access_dropped for p in self.passes)

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
    dropped: tuple[DroppedHit, ...] = ()  # vanished or empty, with the reason


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
        self,
        query: str,
        hints: QueryHints,
        mode: SearchMode,
        category: str | None,
        access: AccessScope = UNRESTRICTED,
    ) -> Retrieval:
        timings: dict[str, float] = {}
        asked, mode_reason = mode, None
        if (
            mode is SearchMode.HYBRID
            and self._config.bm25_only_when_unreadable
            and self._embedder is not None
            and not self._embedder.reads(query)
        ):
            # The embedder cannot read the query's language: its dense list would be
            # ranked by script, not topic, and only add noise to the fusion.
            mode, mode_reason = SearchMode.SPARSE, UNREADABLE_QUERY
        vector = self._query_vector(query, mode, timings)
        first_filter = category or hints.filter_candidate
        source = "explicit" if category else ("l0" if first_filter else None)
        passes: list[SearchPass] = []
        dropped: list[DroppedHit] = []
        usable, below = self._search_pass(
            query, mode, vector, first_filter, source, passes, dropped, access
        )
        fallback_reason: str | None = None
        if not usable and first_filter is not None and source == "l0":
            fallback_reason = (
                "filtered_pass_empty"
                if passes[-1].hits == 0
                else "filtered_pass_below_min_relevance"
            )
            usable, below = self._search_pass(
                query, mode, vector, None, None, passes, dropped, access
            )
        timings["search"] = sum(p.duration_ms for p in passes)
        return Retrieval(
            candidates=tuple(usable),
            passes=tuple(passes),
            fallback_reason=fallback_reason,
            below_min_relevance=below,
            timings_ms=timings,
            search_parameters=dict(self._search.search_parameters()),
            dropped=tuple(dropped),
            mode=mode if mode is not asked else None,
            mode_reason=mode_reason,
        )

    def materialise(
        self, final: Sequence[RankedCandidate], access: AccessScope = UNRESTRICTED
    ) -> Materialised:
        """Fetch the content of candidates searched without it (late materialisation),
        by each row's primary key. A row deleted between search and fetch (a concurrent
        re-ingest) or one without text is dropped with its reason: a block is never
        shown without its text."""
        missing = [_row_key(r) for r in final if r.candidate.content is None]
        if not missing:
            return Materialised(kept=tuple(final))
        t = self._clock.monotonic()
        fetched = self._search.fetch_content(missing, access)
        kept: list[RankedCandidate] = []
        vanished: list[str] = []
        dropped: list[DroppedHit] = []
        for item in final:
            content = item.candidate.content
            if content is None and _row_key(item) in fetched:
                item = item.with_candidate(item.candidate.with_content(fetched[_row_key(item)]))
                content = item.candidate.content
            if content is None:
                vanished.append(item.evidence_key)
                dropped.append(
                    DroppedHit(
                        _shown(item.evidence_key),
                        f"no row with primary key {_shown(_row_key(item))!r} at fetch time "
                        "(deleted meanwhile, or no longer visible to this principal)",
                    )
                )
                continue
            why = _empty_or_broken(content)
            if why is not None:
                vanished.append(item.evidence_key)
                dropped.append(DroppedHit(_shown(item.evidence_key), why))
                continue
            kept.append(item)
        return Materialised(
            kept=tuple(kept),
            vanished=tuple(vanished),
            duration_ms=(self._clock.monotonic() - t) * 1000.0,
            dropped=tuple(dropped),
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
        dropped: list[DroppedHit],
        access: AccessScope = UNRESTRICTED,
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
            embedder=self._embedder.identity
            if vector is not None and self._embedder is not None
            else None,
            access=access,
        )
        t = self._clock.monotonic()
        hits = self._search.search(request)
        duration_ms = (self._clock.monotonic() - t) * 1000.0
        candidates: list[EvidenceCandidate] = []
        unservable = 0
        denied = 0
        for rank, hit in enumerate(hits, 1):
            if not access.allows(hit.access):
                # The engine's filter should have excluded it: never served, and said.
                denied += 1
                unservable += 1
                dropped.append(DroppedHit(_shown(hit.identity.evidence_key), ACCESS_DENIED))
                logger.warning(
                    "search returned a hit the principal may not see; dropped",
                    extra={"document_id": _shown(hit.identity.evidence_key)},
                )
                continue
            candidate = self._candidate(hit, rank, mode, category)
            why = _unservable(candidate)
            if why is None:
                candidates.append(candidate)
            else:
                unservable += 1
                dropped.append(DroppedHit(_shown(candidate.evidence_key), why))
        # The pass answers when its best hit reaches min-relevance; the blocks beside it
        # are judged against that best (``drop_far_below_best``), not one by one here:
        # a relevant block ranked low by its own weak evidence still counts.
        best = max((c.evidence_strength for c in candidates), default=0.0)
        usable = candidates if best >= settings.min_relevance_for(mode) else []
        passes.append(
            SearchPass(
                filter=category,
                filter_source=source,
                hits=len(hits),
                usable=len(usable),
                duration_ms=duration_ms,
                dropped=unservable,
                access_dropped=denied,
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
        # Order by the engine's score (RRF for hybrid); judge by the evidence each list
        # gives on the calibrated scale (``domain.relevance``), never by a rank.
        per_list = hit.component_scores or ((hit.score_kind, hit.score),)
        weights = {
            SearchMode.DENSE: calibration.model.dense,
            SearchMode.SPARSE: calibration.model.sparse,
            SearchMode.HYBRID: calibration.model.hybrid,
        }[mode]
        strength = hit_relevance(per_list, hit.calibration, weights, calibration)
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
            row_id=hit.id,
            row_tenant=hit.access.tenant or _key_tenant(hit.id),
        )


def _key_tenant(row_id: str | None) -> str:
    """The tenant the row's stored key carries (``storage_key``), for a hit whose access
    fields could not be read (served only with access control off): the re-read of the
    block must address that row, not an untenanted one. ``""`` for a key without one,
    or with one no row could have been written with (the record must stay valid: an
    invalid tenant would fail it, and every served block is recorded)."""
    if not row_id:
        return ""
    try:
        tenant = split_storage_key(row_id)[0]
    except ValueError:
        return ""
    return tenant if row_tenant_problem(tenant) is None else ""


def _row_key(item: RankedCandidate) -> str:
    """The key content is fetched by: the row's primary key when the engine gave one."""
    return item.candidate.row_id or item.evidence_key
