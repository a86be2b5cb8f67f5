"""``LookupKnowledge``: one lookup from query to recorded result.

``execute`` reads as the pipeline (each stage in its own module of this package):

    check ids -> clean and check the query
    -> QueryTransformer (L0 hints) -> Retriever (filtered pass, unfiltered retry)
    -> RerankerStage (only with a reranker configured; answered without it on failure)
    -> PostProcessor (rerank, sort, dedup, cap, return-n) -> Retriever.materialise
    -> Projector -> ContextPacker -> session domains -> Assembler (result, traces)
    -> the audit record, recorded before the result is returned

Every policy a stage applies lives in ``lookup_knowledge.domain``.
"""

from __future__ import annotations

import logging
from dataclasses import replace

from lookup_knowledge.application.ids import uuid7
from lookup_knowledge.application.lookup.assembler import Assembler, LookupCall, StageOutputs
from lookup_knowledge.application.lookup.config import LookupConfig, LookupOptions
from lookup_knowledge.application.lookup.context_packer import ContextPacker
from lookup_knowledge.application.lookup.post_processor import PostProcessed, PostProcessor
from lookup_knowledge.application.lookup.projector import Projector
from lookup_knowledge.application.lookup.query import check_id, check_query, clean_query
from lookup_knowledge.application.lookup.recording import invocation_record, record
from lookup_knowledge.application.lookup.reranker_stage import RerankerReport, RerankerStage
from lookup_knowledge.application.lookup.result import LookupResult
from lookup_knowledge.application.lookup.retriever import Retrieval, Retriever
from lookup_knowledge.application.ports import (
    Clock,
    Embedder,
    KnowledgeSearchPort,
    NoTelemetry,
    RecordOutcome,
    Reranker,
    SessionState,
    Span,
    Telemetry,
    ToolInvocationRecorder,
)
from lookup_knowledge.application.query_transformer import QueryTransformer
from lookup_knowledge.application.tool import TOOL_NAME
from lookup_knowledge.domain.access import AccessScope
from lookup_knowledge.domain.errors import InternalError, InvalidInputError, LookupKnowledgeError
from lookup_knowledge.domain.model import QueryHints
from lookup_knowledge.domain.packing import ContextPack
from lookup_knowledge.domain.projection import ProjectedBlock

logger = logging.getLogger(__name__)


class LookupKnowledge:
    """The use case. Thread-safe as long as its ports are: it keeps no per-call state."""

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
        reranker: Reranker | None = None,
    ) -> None:
        self._search = search
        self._transformer = transformer
        self._recorder = recorder
        self._sessions = session_state
        self._clock = clock
        self._embedder = embedder
        self._config = config or LookupConfig()
        self._telemetry = telemetry or NoTelemetry()
        self._reranker = reranker
        self._reranker_stage = (
            RerankerStage(reranker=reranker, search=search, clock=clock, config=self._config)
            if reranker is not None
            else None
        )
        self._retriever = Retriever(
            search=search, embedder=embedder, clock=clock, config=self._config
        )
        self._post_processor = PostProcessor(config=self._config, clock=clock)
        self._packer = ContextPacker(self._config)
        self._projector = Projector(self._config)
        self._assembler = Assembler(self._config)

    @property
    def config(self) -> LookupConfig:
        return self._config

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
            reranker=self._reranker,
        )

    def execute(
        self,
        query: str,
        *,
        session_id: str,
        step_id: str | None = None,
        options: LookupOptions | None = None,
    ) -> LookupResult:
        opts = options or LookupOptions()
        check_id("session_id", session_id, required=True)
        check_id("step_id", step_id)
        check_id("tool_call_id", opts.tool_call_id)
        started_at, t0 = self._clock.now(), self._clock.monotonic()
        call = LookupCall(
            invocation_id=str(uuid7(started_at)),
            session_id=session_id,
            query=clean_query(query),
            mode=opts.mode or self._config.mode,
            started_at=started_at,
            step_id=step_id,
            tool_call_id=opts.tool_call_id,
            traffic=opts.traffic,
            access=AccessScope(self._config.access_mode, opts.principal),
        )
        with self._telemetry.span(f"execute_tool {TOOL_NAME}", _tool_attributes(call)) as span:
            timings: dict[str, float] = {}
            out = self._run_stages(call, opts.category, span, timings, opts.input_error)
            out = replace(out, domains=self._session_domains(call.session_id, out))
            duration_ms = (self._clock.monotonic() - t0) * 1000.0
            timings["total"] = duration_ms
            result = self._assembler.assemble(call, out)
            span.set_attribute("lookup_knowledge.status", result.status.value)
            span.set_attribute("lookup_knowledge.returned", len(out.blocks))
            outcome = self._record(call, out, result, duration_ms, span)
        logger.info(
            "lookup_knowledge done",
            extra={
                "invocation_id": call.invocation_id,
                "session_id": call.session_id,
                "status": result.status.value,
                "returned": len(out.blocks),
                "duration_ms": duration_ms,
                "record": outcome.value if outcome else "failed",
            },
        )
        return replace(result, record_outcome=outcome)

    # ------------------------------------------------------------------ stages

    def _run_stages(
        self,
        call: LookupCall,
        category: str | None,
        span: Span,
        timings: dict[str, float],
        input_error: str | None = None,
    ) -> StageOutputs:
        """Every stage from the query check to the projection, timed into ``timings``; a
        failing stage leaves the outputs of those before it and the error (never a
        partial projection)."""
        hints = QueryHints(query=call.query)
        retrieval = Retrieval()
        processed = PostProcessed()
        pack: ContextPack | None = None
        blocks: tuple[ProjectedBlock, ...] = ()
        error: LookupKnowledgeError | None = None
        reranked: RerankerReport | None = None
        try:
            if input_error is not None:
                raise InvalidInputError(input_error)
            check_query(call.query)
            with self._telemetry.span(
                "retrieval knowledge", self._retrieval_attributes(call)
            ) as rs:
                t = self._clock.monotonic()
                hints = self._transformer.transform(call.query)
                timings["transform"] = (self._clock.monotonic() - t) * 1000.0
                retrieval = self._retriever.retrieve(
                    call.query, hints, call.mode, category, call.access
                )
                timings.update(retrieval.timings_ms)
                if retrieval.candidates and self._reranker_stage is not None:
                    retrieval, reranked = self._reranker_stage.apply(
                        call.query, retrieval, retrieval.mode or call.mode, call.access
                    )
                    timings["rerank"] = reranked.duration_ms
                if retrieval.candidates:
                    ranked = self._post_processor.process(retrieval, hints)
                    timings["postprocess"] = ranked.duration_ms
                    materialised = self._retriever.materialise(ranked.final, call.access)
                    timings["materialise"] = materialised.duration_ms
                    ranked = ranked.with_materialised(materialised)
                    t = self._clock.monotonic()
                    shown = self._projector.project(ranked.final)
                    pack = self._packer.pack(ranked.final, shown)
                    timings["pack"] = (self._clock.monotonic() - t) * 1000.0
                    processed, blocks = ranked, shown
                _describe(rs, retrieval, len(blocks))
        except LookupKnowledgeError as failure:
            error, pack = failure, None
            span.record_error(failure)
        except Exception as failure:  # an adapter bug must not crash the agent's turn
            logger.exception(
                "lookup failed unexpectedly", extra={"invocation_id": call.invocation_id}
            )
            error, pack = InternalError(f"{type(failure).__name__}: {failure}"), None
            span.record_error(failure)
        return StageOutputs(
            hints=hints,
            retrieval=retrieval,
            processed=processed,
            pack=pack,
            blocks=blocks,
            error=error,
            timings_ms=timings,
            reranker=reranked,
        )

    def _session_domains(self, session_id: str, out: StageOutputs) -> tuple[str, ...]:
        returned = [r.candidate.category for r in out.processed.final if r.candidate.category]
        try:
            if returned:
                self._sessions.add_retrieved_domains(session_id, returned)
            return self._sessions.retrieved_domains(session_id)
        except Exception:  # session memory is a hint; it must not cost the lookup
            logger.exception("session state unavailable", extra={"session_id": session_id})
            return tuple(dict.fromkeys(returned))

    def _record(
        self,
        call: LookupCall,
        out: StageOutputs,
        result: LookupResult,
        duration_ms: float,
        span: Span,
    ) -> RecordOutcome | None:
        try:
            invocation = invocation_record(
                self._config,
                call,
                out,
                result,
                duration_ms=duration_ms,
                trace_id=span.trace_id,
                span_id=span.span_id,
            )
        except LookupKnowledgeError:
            logger.exception(
                "audit record could not be made", extra={"invocation_id": call.invocation_id}
            )
            return None
        return record(self._recorder, invocation)

    def _retrieval_attributes(self, call: LookupCall) -> dict[str, str | int | float | bool]:
        return {
            "gen_ai.operation.name": "retrieval",
            "gen_ai.request.top_k": self._config.retrieval.retrieve_k,
            "lookup_knowledge.search_mode": call.mode.value,
        }


def _tool_attributes(call: LookupCall) -> dict[str, str | int | float | bool]:
    return {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": TOOL_NAME,
        "gen_ai.tool.type": "function",
        "gen_ai.tool.call.id": call.tool_call_id or call.invocation_id,
        "lookup_knowledge.invocation_id": call.invocation_id,
        "session.id": call.session_id,
    }


def _describe(span: Span, retrieval: Retrieval, returned: int) -> None:
    span.set_attribute("lookup_knowledge.filter_applied", retrieval.filter_applied or "")
    span.set_attribute("lookup_knowledge.fallback_reason", retrieval.fallback_reason or "")
    span.set_attribute("lookup_knowledge.passes", len(retrieval.passes))
    span.set_attribute("lookup_knowledge.candidates", sum(p.hits for p in retrieval.passes))
    span.set_attribute("lookup_knowledge.returned", returned)
