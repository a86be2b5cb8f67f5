"""The ``lookup_knowledge`` use case: one lookup from query to recorded result.

Read top to bottom, ``LookupKnowledge.execute`` is the whole pipeline:

    transform (L0 hints) -> retrieve (filtered pass, unfiltered retry) -> candidates
    -> rerank -> sort -> dedup by evidenceKey -> per-document cap -> return-n
    -> materialise content (late) -> pack context -> project -> assess quality
    -> record the invocation -> result

Every policy it applies lives in ``lookup_knowledge.domain``.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from lookup_knowledge.application.ids import uuid7
from lookup_knowledge.application.ports import (
    RETRIEVAL_DETAILS_VERSION,
    Clock,
    Embedder,
    EvidenceRecord,
    KnowledgeSearchHit,
    KnowledgeSearchPort,
    KnowledgeSearchRequest,
    NoTelemetry,
    RecordOutcome,
    SessionState,
    Span,
    Telemetry,
    ToolInvocation,
    ToolInvocationRecorder,
)
from lookup_knowledge.application.query_transformer import QueryTransformer
from lookup_knowledge.application.tool import MAX_ID_CHARS, MAX_QUERY_CHARS, TOOL_NAME
from lookup_knowledge.domain.errors import (
    ConfigurationError,
    InternalError,
    InvalidInputError,
    LookupKnowledgeError,
)
from lookup_knowledge.domain.model import (
    EvidenceCandidate,
    InvocationStatus,
    QueryHints,
    RankedCandidate,
    SearchMode,
)
from lookup_knowledge.domain.packing import ContextPack, OmissionReason, pack_context
from lookup_knowledge.domain.postprocess import (
    cap_per_document,
    dedup_by_evidence_key,
    sort_by_final_score,
    truncate,
)
from lookup_knowledge.domain.projection import ProjectedBlock, ProjectionBudgets, project_blocks
from lookup_knowledge.domain.quality import (
    CompletenessHint,
    QualityThresholds,
    RelevanceLevel,
    completeness_hint,
    quality_score,
    relevance_level,
)
from lookup_knowledge.domain.relevance import RelevanceCalibration, normalise_relevance
from lookup_knowledge.domain.rerank import RerankWeights, rerank
from lookup_knowledge.domain.settings import RetrievalSettings

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class LookupConfig:
    """Everything that shapes a lookup, validated by its parts."""

    retrieval: RetrievalSettings = field(default_factory=RetrievalSettings)
    mode: SearchMode = SearchMode.DENSE
    engine_grouping: bool = False
    # Off by default: measured at 100k chunks the second round trip costs more than
    # returning ~1 KB texts with the search, and rerank bonuses want the text.
    late_materialisation: bool = False
    rerank: RerankWeights = field(default_factory=RerankWeights)
    calibration: RelevanceCalibration = field(default_factory=RelevanceCalibration)
    context_char_budget: int = 4000
    context_min_excerpt_chars: int = 80
    projection: ProjectionBudgets = field(default_factory=ProjectionBudgets)
    quality: QualityThresholds = field(default_factory=QualityThresholds)

    def __post_init__(self) -> None:
        if self.context_char_budget < 1:
            raise ConfigurationError(
                "rag.context.char-budget", self.context_char_budget, "must be >= 1"
            )


@dataclass(frozen=True, slots=True)
class LookupOptions:
    """Per-call overrides a host (or the CLI) may pass; the agent passes only a query."""

    mode: SearchMode | None = None
    category: str | None = None  # an explicit filter: no unfiltered retry
    tool_call_id: str | None = None


@dataclass(frozen=True, slots=True)
class LookupResult:
    """The result contract (DESIGN.md section 4), before JSON projection."""

    invocation_id: str
    status: InvocationStatus
    found: bool
    evidence_blocks: tuple[ProjectedBlock, ...]
    context_pack: ContextPack | None
    retrieval_trace: Mapping[str, Any]
    rerank_trace: tuple[Mapping[str, Any], ...]
    relevance_level: RelevanceLevel
    completeness_hint: CompletenessHint
    retrieved_domains_this_session: tuple[str, ...]
    message: str
    quality_score: float
    error_code: str | None = None
    record_outcome: RecordOutcome | None = None

    def to_tool_json(self) -> dict[str, Any]:
        """The agent-facing JSON of ``lookup_knowledge`` (the Projector's output)."""
        pack = self.context_pack
        return {
            "found": self.found,
            "evidenceBlocks": [b.as_json() for b in self.evidence_blocks],
            "contextPack": (
                {"text": pack.text, **pack.summary()}
                if pack is not None
                else {"text": "", "charBudget": 0, "charsUsed": 0, "included": [], "omitted": []}
            ),
            "retrievalTrace": dict(self.retrieval_trace),
            "rerankTrace": [dict(r) for r in self.rerank_trace],
            "relevanceLevel": self.relevance_level.value,
            "completenessHint": self.completeness_hint.value,
            "retrievedDomainsThisSession": list(self.retrieved_domains_this_session),
            "message": self.message,
            "invocationId": self.invocation_id,
        }


@dataclass
class _Pass:
    filter: str | None
    filter_source: str | None
    hits: int = 0
    usable: int = 0
    duration_ms: float = 0.0

    def as_trace(self) -> dict[str, object]:
        return {
            "filter": self.filter,
            "filterSource": self.filter_source,
            "hits": self.hits,
            "usable": self.usable,
            "durationMs": round(self.duration_ms, 3),
        }


class LookupKnowledge:
    """The use case. Thread-safe as long as its ports are."""

    def __init__(
        self,
        *,
        search: KnowledgeSearchPort,
        transformer: QueryTransformer,
        recorder: ToolInvocationRecorder,
        session_state: SessionState,
        clock: Clock,
        embedder: Embedder | None = None,
        config: LookupConfig | None = None,
        telemetry: Telemetry | None = None,
    ) -> None:
        self._search = search
        self._transformer = transformer
        self._recorder = recorder
        self._sessions = session_state
        self._clock = clock
        self._embedder = embedder
        self._config = config or LookupConfig()
        self._telemetry = telemetry or NoTelemetry()

    @property
    def config(self) -> LookupConfig:
        return self._config

    # ------------------------------------------------------------------ entry point

    def execute(
        self,
        query: str,
        *,
        session_id: str,
        step_id: str | None = None,
        options: LookupOptions | None = None,
    ) -> LookupResult:
        opts = options or LookupOptions()
        _check_id("session_id", session_id, required=True)
        _check_id("step_id", step_id)
        _check_id("tool_call_id", opts.tool_call_id)
        started_at = self._clock.now()
        t0 = self._clock.monotonic()
        invocation_id = str(uuid7(started_at))
        mode = opts.mode or self._config.mode
        with self._telemetry.span(
            f"execute_tool {TOOL_NAME}",
            {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": TOOL_NAME,
                "gen_ai.tool.type": "function",
                "gen_ai.tool.call.id": opts.tool_call_id or invocation_id,
                "lookup_knowledge.invocation_id": invocation_id,
                "session.id": session_id,
            },
        ) as span:
            run = _Run(self, query, session_id, mode, opts, t0)
            try:
                run.validate_query()
                with self._telemetry.span(
                    "retrieval knowledge",
                    {
                        "gen_ai.operation.name": "retrieval",
                        "gen_ai.request.top_k": self._config.retrieval.retrieve_k,
                        "lookup_knowledge.search_mode": mode.value,
                    },
                ) as retrieval_span:
                    run.retrieve()
                    run.post_process()
                    run.describe(retrieval_span)
            except LookupKnowledgeError as error:
                run.fail(error)
                span.record_error(error)
            except Exception as error:  # an adapter bug must not crash the agent's turn
                logger.exception(
                    "lookup failed unexpectedly", extra={"invocation_id": invocation_id}
                )
                run.fail(InternalError(f"{type(error).__name__}: {error}"))
                span.record_error(error)
            run.finish()
            span.set_attribute("lookup_knowledge.status", run.status.value)
            span.set_attribute("lookup_knowledge.returned", len(run.projected))
            result = run.to_result(invocation_id, None)
            invocation = run.to_invocation(result, step_id, started_at, span.trace_id, span.span_id)
            outcome = self._record(invocation)
        logger.info(
            "lookup_knowledge done",
            extra={
                "invocation_id": invocation_id,
                "session_id": session_id,
                "status": run.status.value,
                "returned": len(run.projected),
                "duration_ms": invocation.duration_ms,
                "record": outcome.value if outcome else "failed",
            },
        )
        return replace(result, record_outcome=outcome)

    def with_config(self, config: LookupConfig) -> LookupKnowledge:
        """The same ports under another configuration (eval and replay compare configs)."""
        return LookupKnowledge(
            search=self._search,
            transformer=self._transformer,
            recorder=self._recorder,
            session_state=self._sessions,
            clock=self._clock,
            embedder=self._embedder,
            config=config,
            telemetry=self._telemetry,
        )

    def _record(self, invocation: ToolInvocation) -> RecordOutcome | None:
        try:
            return self._recorder.record(invocation)
        except Exception:  # AuditError or an adapter bug: the lookup still answers
            # The recorder already spools and counts; reaching here means even the
            # spool failed. The lookup still answers; the failure is logged loudly.
            logger.exception(
                "audit record could not be written or spooled",
                extra={"invocation_id": invocation.id},
            )
            return None


def _check_id(name: str, value: object, *, required: bool = False) -> None:
    """Ids come from the host, not the agent: a bad one is the host's bug, raised before
    anything is searched, so a lookup is never served that the audit store cannot keep."""
    if value is None and not required:
        return
    if not isinstance(value, str) or not value.strip():
        raise InvalidInputError(f"{name} must be a non-empty string")
    if len(value) > MAX_ID_CHARS:
        raise InvalidInputError(f"{name} is {len(value)} characters; the limit is {MAX_ID_CHARS}")
    if any(ord(ch) < 32 or ord(ch) == 127 or 0xD800 <= ord(ch) <= 0xDFFF for ch in value):
        raise InvalidInputError(f"{name} must not contain control characters or lone surrogates")


def clean_text(text: str) -> str:
    """Query text as the agent sent it, minus what no store can hold: NUL and other
    control characters (tab and newline stay) and lone UTF-16 surrogates (become U+FFFD)."""
    if text.isascii() and text.isprintable():
        return text
    fixed = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return "".join(ch for ch in fixed if ch in "\t\n" or (ord(ch) >= 32 and ord(ch) != 127))


class _Run:
    """The state of one lookup while it moves through the pipeline."""

    def __init__(
        self,
        owner: LookupKnowledge,
        query: str,
        session_id: str,
        mode: SearchMode,
        options: LookupOptions,
        t0: float,
    ) -> None:
        self.o = owner
        self.cfg = owner.config
        self.query = clean_text(query) if isinstance(query, str) else ""
        self.session_id = session_id
        self.mode = mode
        self.options = options
        self.t0 = t0
        self.timings: dict[str, float] = {}
        self.hints = QueryHints(query=self.query)
        self.passes: list[_Pass] = []
        self.filter_applied: str | None = None
        self.fallback_reason: str | None = None
        self.candidates: list[EvidenceCandidate] = []
        self.below_min = 0
        self.ranked: list[RankedCandidate] = []
        self.final: list[RankedCandidate] = []
        self.outcomes: dict[str, str] = {}
        self.counts: dict[str, int] = {}
        self.vanished: list[str] = []
        self.pack: ContextPack | None = None
        self.projected: list[ProjectedBlock] = []
        self.status = InvocationStatus.NO_EVIDENCE
        self.error: LookupKnowledgeError | None = None
        self.domains: tuple[str, ...] = ()
        self.duration_ms = 0.0

    def _lap(self, name: str, since: float) -> float:
        now = self.o._clock.monotonic()
        self.timings[name] = self.timings.get(name, 0.0) + (now - since) * 1000.0
        return now

    # ------------------------------------------------------------------ steps

    def validate_query(self) -> None:
        if not self.query.strip():
            raise InvalidInputError("query must be a non-empty string")
        if len(self.query) > MAX_QUERY_CHARS:
            raise InvalidInputError(
                f"query is {len(self.query)} characters; the limit is {MAX_QUERY_CHARS}"
            )

    def retrieve(self) -> None:
        clock = self.o._clock
        t = clock.monotonic()
        self.hints = self.o._transformer.transform(self.query)
        t = self._lap("transform", t)

        vector: tuple[float, ...] | None = None
        if self.mode.needs_query_vector:
            if self.o._embedder is None:
                raise ConfigurationError(
                    "rag.search-mode", self.mode.value, "dense and hybrid search need an embedder"
                )
            vector = tuple(self.o._embedder.embed_query(self.query))
            t = self._lap("embed", t)

        explicit = self.options.category
        first_filter = explicit if explicit else self.hints.filter_candidate
        source = "explicit" if explicit else ("l0" if first_filter else None)
        usable = self._search_pass(vector, first_filter, source)
        if not usable and first_filter is not None and source == "l0":
            self.fallback_reason = (
                "filtered_pass_empty"
                if self.passes[-1].hits == 0
                else "filtered_pass_below_min_relevance"
            )
            usable = self._search_pass(vector, None, None)
        self.filter_applied = self.passes[-1].filter
        self.candidates = usable
        if not usable:
            self.status = InvocationStatus.NO_EVIDENCE

    def _search_pass(
        self, vector: tuple[float, ...] | None, category: str | None, source: str | None
    ) -> list[EvidenceCandidate]:
        settings = self.cfg.retrieval
        request = KnowledgeSearchRequest(
            query_text=self.query,
            top_k=settings.retrieve_k,
            mode=self.mode,
            query_vector=vector,
            category_filter=category,
            group_size=(
                settings.max_chunks_per_document
                if self.cfg.engine_grouping and settings.max_chunks_per_document
                else None
            ),
            include_content=not self.cfg.late_materialisation,
        )
        record = _Pass(filter=category, filter_source=source)
        t = self.o._clock.monotonic()
        hits = self.o._search.search(request)
        record.duration_ms = (self.o._clock.monotonic() - t) * 1000.0
        self.timings["search"] = self.timings.get("search", 0.0) + record.duration_ms
        candidates = [self._candidate(hit, rank, category) for rank, hit in enumerate(hits, 1)]
        usable = [c for c in candidates if c.evidence_strength >= settings.min_relevance]
        record.hits = len(candidates)
        record.usable = len(usable)
        self.below_min = len(candidates) - len(usable)  # of the pass whose hits are used
        self.passes.append(record)
        return usable

    def _candidate(
        self, hit: KnowledgeSearchHit, rank: int, category: str | None
    ) -> EvidenceCandidate:
        meta = hit.metadata
        reasons = [self.mode.value, *hit.reasons]
        if category is not None:
            reasons.append(f"filter:category={category}")

        def text(key: str) -> str:
            value = meta.get(key)
            return value if isinstance(value, str) else ""

        calibration = self.cfg.calibration
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

    def post_process(self) -> None:
        if not self.candidates:
            return
        settings = self.cfg.retrieval
        t = self.o._clock.monotonic()
        scored = rerank(self.candidates, self.hints, self.cfg.rerank)
        ordered = sort_by_final_score(scored)
        deduped = dedup_by_evidence_key(ordered)
        capped = cap_per_document(deduped.kept, settings.max_chunks_per_document)
        final = truncate(capped.kept, settings.return_n)
        self.ranked = ordered
        for item in ordered:
            self.outcomes.setdefault(item.evidence_key, "duplicate")
        for item in deduped.kept:
            self.outcomes[item.evidence_key] = "truncated"
        for item in capped.dropped:
            self.outcomes[item.evidence_key] = "capped"
        self.counts = {
            "candidates": self.passes[-1].hits,
            "belowMinRelevance": self.below_min,
            "afterDedup": len(deduped.kept),
            "duplicatesMerged": sum(deduped.merged.values()),
            "afterCap": len(capped.kept),
            "cappedOut": len(capped.dropped),
        }
        t = self._lap("postprocess", t)
        final = self._materialise(final)
        t = self._lap("materialise", t)
        for item in final:
            self.outcomes[item.evidence_key] = "returned"
        self.final = final
        self.counts["returned"] = len(final)
        self.pack = pack_context(
            final, self.cfg.context_char_budget, self.cfg.context_min_excerpt_chars
        )
        self.projected = project_blocks(final, self.cfg.projection)
        self._lap("pack", t)
        self.status = InvocationStatus.OK if self.projected else InvocationStatus.NO_EVIDENCE

    def _materialise(self, final: list[RankedCandidate]) -> list[RankedCandidate]:
        missing = [r.evidence_key for r in final if r.candidate.content is None]
        if not missing:
            return final
        fetched = self.o._search.fetch_content(missing)
        kept: list[RankedCandidate] = []
        for item in final:
            if item.candidate.content is not None:
                kept.append(item)
            elif item.evidence_key in fetched:
                kept.append(
                    item.with_candidate(item.candidate.with_content(fetched[item.evidence_key]))
                )
            else:
                # Deleted between search and fetch (a concurrent re-ingest): never show
                # a block without its text.
                self.vanished.append(item.evidence_key)
                self.outcomes[item.evidence_key] = "vanished"
        return kept

    def describe(self, span: Span) -> None:
        span.set_attribute("lookup_knowledge.filter_applied", self.filter_applied or "")
        span.set_attribute("lookup_knowledge.fallback_reason", self.fallback_reason or "")
        span.set_attribute("lookup_knowledge.passes", len(self.passes))
        span.set_attribute("lookup_knowledge.candidates", sum(p.hits for p in self.passes))
        span.set_attribute("lookup_knowledge.returned", len(self.projected))

    def fail(self, error: LookupKnowledgeError) -> None:
        self.status = InvocationStatus.ERROR
        self.error = error
        self.final, self.projected, self.pack = [], [], None

    def finish(self) -> None:
        returned_domains = [r.candidate.category for r in self.final if r.candidate.category]
        try:
            if returned_domains:
                self.o._sessions.add_retrieved_domains(self.session_id, returned_domains)
            self.domains = self.o._sessions.retrieved_domains(self.session_id)
        except Exception:  # session memory is a hint; it must not cost the lookup
            logger.exception("session state unavailable", extra={"session_id": self.session_id})
            self.domains = tuple(dict.fromkeys(returned_domains))
        self.duration_ms = (self.o._clock.monotonic() - self.t0) * 1000.0
        self.timings["total"] = self.duration_ms

    # ------------------------------------------------------------------ outputs

    def relevances(self) -> list[float]:
        shown = {b.document_id for b in self.projected}
        return [r.candidate.evidence_strength for r in self.final if r.evidence_key in shown]

    def retrieval_trace(self) -> dict[str, Any]:
        settings = self.cfg.retrieval
        trace: dict[str, Any] = {
            "mode": self.mode.value,
            "retrieveK": settings.retrieve_k,
            "returnN": settings.return_n,
            "maxChunksPerDocument": settings.max_chunks_per_document,
            "minRelevance": settings.min_relevance,
            "engineGrouping": self.cfg.engine_grouping,
            "lateMaterialisation": self.cfg.late_materialisation,
            "queryHints": self.hints.as_trace(),
            "passes": [p.as_trace() for p in self.passes],
            "filterApplied": self.filter_applied,
            "fallbackReason": self.fallback_reason,
            "counts": {**self.counts, "projected": len(self.projected)},
            "timingsMs": {k: round(v, 3) for k, v in self.timings.items()},
        }
        if self.vanished:
            trace["vanished"] = list(self.vanished)
        return trace

    def rerank_trace(self) -> tuple[dict[str, Any], ...]:
        by_relevance = sorted(
            self.ranked, key=lambda r: (-r.candidate.relevance, r.candidate.original_rank)
        )
        rank_before = {id(r): i for i, r in enumerate(by_relevance, 1)}
        return tuple(
            {
                "document_id": r.evidence_key,
                "relevance": round(r.candidate.relevance, 6),
                "strength": round(r.candidate.evidence_strength, 6),
                "finalScore": round(r.final_score, 6),
                "rankBefore": rank_before[id(r)],
                "rankAfter": i,
                "adjustments": [a.as_trace() for a in r.adjustments],
                "outcome": self.outcomes.get(r.evidence_key, "dropped"),
            }
            for i, r in enumerate(self.ranked, 1)
        )

    def message(self) -> str:
        if self.status is InvocationStatus.ERROR:
            assert self.error is not None
            return (
                f"Knowledge lookup failed ({self.error.code}): {self.error.message}. "
                "No evidence is available from this call; do not cite the knowledge base "
                "for it."
            )
        if not self.projected:
            return (
                "No evidence found in the knowledge base for this query. Do not answer "
                "from the knowledge base; say that no evidence was found or rephrase."
            )
        docs = len({b.source or b.document_id for b in self.projected})
        return (
            f"Found {len(self.projected)} evidence block(s) from {docs} document(s). "
            "Cite evidence by its document_id; cite nothing that is not listed here."
        )

    def to_result(self, invocation_id: str, outcome: RecordOutcome | None) -> LookupResult:
        relevances = self.relevances()
        omitted_budget = (
            sum(1 for o in self.pack.omitted if o.reason is OmissionReason.CHAR_BUDGET)
            if self.pack
            else 0
        )
        distinct = len({b.source or b.document_id for b in self.projected})
        return LookupResult(
            invocation_id=invocation_id,
            status=self.status,
            found=bool(self.projected),
            evidence_blocks=tuple(self.projected),
            context_pack=self.pack,
            retrieval_trace=self.retrieval_trace(),
            rerank_trace=self.rerank_trace(),
            relevance_level=relevance_level(relevances, self.cfg.quality),
            completeness_hint=completeness_hint(len(self.projected), distinct, omitted_budget),
            retrieved_domains_this_session=self.domains,
            message=self.message(),
            quality_score=quality_score(relevances, self.cfg.retrieval.return_n),
            error_code=self.error.code if self.error else None,
            record_outcome=outcome,
        )

    def to_invocation(
        self,
        result: LookupResult,
        step_id: str | None,
        started_at: datetime,
        trace_id: str | None,
        span_id: str | None,
    ) -> ToolInvocation:
        invocation_id = result.invocation_id
        pack_keys = set(self.pack.included_keys) if self.pack else set()
        projected = {b.document_id: b for b in self.projected}
        evidence: list[EvidenceRecord] = []
        for rank, item in enumerate(self.final, 1):
            key = item.evidence_key
            if key not in projected and key not in pack_keys:
                continue
            shown = projected[key].content if key in projected else item.candidate.content or ""
            evidence.append(
                EvidenceRecord(
                    rank=rank,
                    document_id=key,
                    doc_id=item.doc_id,
                    chunk_index=item.candidate.chunk_index,
                    source=item.candidate.source,
                    category=item.candidate.category,
                    score_before=item.candidate.relevance,
                    score_after=item.final_score,
                    projected=key in projected,
                    in_context_pack=key in pack_keys,
                    content_hash=hashlib.sha256(shown.encode("utf-8")).hexdigest(),
                )
            )
        details: dict[str, Any] = {
            "version": RETRIEVAL_DETAILS_VERSION,
            "evidence": [
                {
                    "document_id": b.document_id,
                    "rank": b.rank,
                    "source": b.source,
                    "score": round(b.score, 4),
                    "chars": len(b.content),
                }
                for b in self.projected
            ],
            "contextPack": self.pack.summary() if self.pack else None,
            "retrievalTrace": result.retrieval_trace,
            "rerankTrace": list(result.rerank_trace),
            "relevanceLevel": result.relevance_level.value,
            "completenessHint": result.completeness_hint.value,
        }
        return ToolInvocation(
            id=invocation_id,
            session_id=self.session_id,
            query=self.query[:MAX_QUERY_CHARS],
            status=self.status.value,
            started_at=started_at,
            duration_ms=self.duration_ms,
            step_id=step_id,
            tool_call_id=self.options.tool_call_id,
            tool_name=TOOL_NAME,
            error_code=self.error.code if self.error else None,
            error_message=self.error.message if self.error else None,
            quality_score=result.quality_score,
            relevance_level=result.relevance_level.value,
            retrieval_mode=self.mode.value,
            filter_applied=self.filter_applied,
            fallback_reason=self.fallback_reason,
            retrieve_k=self.cfg.retrieval.retrieve_k,
            return_n=self.cfg.retrieval.return_n,
            candidate_count=self.passes[-1].hits if self.passes else 0,
            returned_count=len(self.projected),
            trace_id=trace_id,
            span_id=span_id,
            retrieval_details=details,
            evidence=tuple(evidence),
        )
