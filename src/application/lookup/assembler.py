"""The Assembler: what the stages produced becomes a ``LookupResult``.

It decides the status (``error`` when a stage failed, ``ok`` when a block is returned,
``no_evidence`` otherwise), the quality judgements (relevance level, completeness hint,
quality score; formulas in ``domain.quality``), the message the agent reads, and the two
traces: ``retrievalTrace`` (settings, hints, passes, filter, fallback, counts, timings)
and ``rerankTrace`` (every ranked candidate: scores, rank before and after, the bonuses
applied, its outcome).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

from lookup_knowledge.application.lookup.config import LookupConfig
from lookup_knowledge.application.lookup.post_processor import PostProcessed
from lookup_knowledge.application.lookup.reranker_stage import RerankerReport
from lookup_knowledge.application.lookup.result import LookupResult
from lookup_knowledge.application.lookup.retriever import Retrieval
from lookup_knowledge.application.lookup.traces import RerankTrace, RetrievalTrace
from lookup_knowledge.domain.access import UNRESTRICTED, AccessScope
from lookup_knowledge.domain.errors import LookupKnowledgeError
from lookup_knowledge.domain.model import InvocationStatus, QueryHints, SearchMode, Traffic
from lookup_knowledge.domain.packing import ContextPack, OmissionReason
from lookup_knowledge.domain.projection import ProjectedBlock
from lookup_knowledge.domain.quality import (
    completeness_hint,
    quality_score,
    relevance_level,
)


@dataclass(frozen=True, slots=True)
class LookupCall:
    """Who asked what: the identity of one invocation."""

    invocation_id: str
    session_id: str
    query: str
    mode: SearchMode
    started_at: datetime
    step_id: str | None = None
    tool_call_id: str | None = None
    traffic: Traffic = Traffic.PRODUCTION
    access: AccessScope = UNRESTRICTED


@dataclass(frozen=True, slots=True)
class StageOutputs:
    """What the stages produced (empty where a stage did not run or failed)."""

    hints: QueryHints
    retrieval: Retrieval = field(default_factory=Retrieval)
    processed: PostProcessed = field(default_factory=PostProcessed)
    pack: ContextPack | None = None
    blocks: tuple[ProjectedBlock, ...] = ()
    error: LookupKnowledgeError | None = None
    domains: tuple[str, ...] = ()
    timings_ms: Mapping[str, float] = field(default_factory=dict)
    #: What the optional reranker stage did (None: no reranker configured, or not run).
    reranker: RerankerReport | None = None

    @property
    def status(self) -> InvocationStatus:
        if self.error is not None:
            return InvocationStatus.ERROR
        return InvocationStatus.OK if self.blocks else InvocationStatus.NO_EVIDENCE


class Assembler:
    def __init__(self, config: LookupConfig) -> None:
        self._config = config

    def assemble(self, call: LookupCall, out: StageOutputs) -> LookupResult:
        shown = {b.document_id for b in out.blocks}
        relevances = [
            r.candidate.evidence_strength for r in out.processed.final if r.evidence_key in shown
        ]
        omitted_budget = (
            sum(1 for o in out.pack.omitted if o.reason is OmissionReason.CHAR_BUDGET)
            if out.pack
            else 0
        )
        distinct = len({b.source or b.document_id for b in out.blocks})
        return LookupResult(
            invocation_id=call.invocation_id,
            status=out.status,
            found=bool(out.blocks),
            evidence_blocks=out.blocks,
            context_pack=out.pack,
            retrieval_trace=self._retrieval_trace(call, out),
            rerank_trace=self._rerank_trace(out.processed, out.reranker),
            relevance_level=relevance_level(relevances, self._config.quality),
            completeness_hint=completeness_hint(len(out.blocks), distinct, omitted_budget),
            retrieved_domains_this_session=out.domains,
            message=_message(out),
            quality_score=quality_score(relevances, self._config.retrieval.return_n),
            error_code=out.error.code if out.error else None,
            error_message=out.error.message if out.error else None,
            payload_profile=self._config.payload_profile,
        )

    def _retrieval_trace(self, call: LookupCall, out: StageOutputs) -> RetrievalTrace:
        settings = self._config.retrieval
        searched = out.retrieval.mode or call.mode
        return RetrievalTrace(
            mode=searched.value,
            retrieve_k=settings.retrieve_k,
            return_n=settings.return_n,
            max_chunks_per_document=settings.max_chunks_per_document,
            min_relevance=settings.min_relevance_for(searched),
            engine_grouping=self._config.engine_grouping,
            late_materialisation=self._config.late_materialisation,
            search_parameters=dict(out.retrieval.search_parameters),
            query_hints=out.hints.as_trace(),
            passes=tuple(p.as_trace() for p in out.retrieval.passes),
            filter_applied=out.retrieval.filter_applied,
            access={
                "mode": call.access.mode.value,
                "filter": call.access.describe(),
                "droppedByCheck": out.retrieval.access_dropped,
            },
            fallback_reason=out.retrieval.fallback_reason,
            mode_reason=out.retrieval.mode_reason,
            counts={**out.processed.counts, "projected": len(out.blocks)},
            timings_ms=dict(out.timings_ms),
            reranker=out.reranker.as_trace() if out.reranker is not None else None,
            requested_mode=call.mode.value if searched is not call.mode else None,
            vanished=tuple(out.processed.vanished),
            # Hits not served, each with its reason: unrecordable ids or fields, no
            # text, a row gone before its content was fetched.
            dropped=tuple(d.as_trace() for d in (*out.retrieval.dropped, *out.processed.dropped)),
        )

    @staticmethod
    def _rerank_trace(
        processed: PostProcessed, reranker: RerankerReport | None = None
    ) -> tuple[RerankTrace, ...]:
        by_relevance = sorted(
            processed.ranked, key=lambda r: (-r.candidate.relevance, r.candidate.original_rank)
        )
        rank_before = {id(r): i for i, r in enumerate(by_relevance, 1)}
        scores = reranker.scores if reranker is not None else {}
        return tuple(
            RerankTrace(
                document_id=r.evidence_key,
                reranker_score=scores.get(r.evidence_key),
                relevance=r.candidate.relevance,
                strength=r.candidate.evidence_strength,
                final_score=r.final_score,
                rank_before=rank_before[id(r)],
                rank_after=i,
                adjustments=tuple(a.as_trace() for a in r.adjustments),
                outcome=processed.outcomes.get(r.evidence_key, "dropped"),
            )
            for i, r in enumerate(processed.ranked, 1)
        )


def _message(out: StageOutputs) -> str:
    if out.error is not None:
        return (
            f"Knowledge lookup failed ({out.error.code}): {out.error.message}. "
            "No evidence is available from this call; do not cite the knowledge base "
            "for it."
        )
    if not out.blocks:
        return (
            "No evidence found in the knowledge base for this query. Do not answer "
            "from the knowledge base; say that no evidence was found or rephrase."
        )
    # How many blocks and documents: the blocks say it (each fact once).
    return "Cite only the document_id values listed here."
