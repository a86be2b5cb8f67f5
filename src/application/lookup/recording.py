"""The audit side of a lookup: the ``ToolInvocation`` the store keeps, and recording it.

The record holds every block the agent was shown (in ``evidenceBlocks``, in the context
pack, or both) with the hash of the exact text shown and the tenant of the row it came
from (``""``: a row without a tenant), and compact ``retrieval_details``
(evidence summaries, context-pack summary, both traces). Recording does not fail the
lookup: a recorder that cannot write journals; one that cannot even journal is logged. The
one exception is ``AuditNotRecorded``: a recorder that must commit before the lookup
returns (``audit.durability=database``) could not, so the lookup is not answered.
"""

from __future__ import annotations

import hashlib
import logging
from typing import Any

from lookup_knowledge.application.lookup.assembler import LookupCall, StageOutputs
from lookup_knowledge.application.lookup.config import LookupConfig
from lookup_knowledge.application.lookup.result import LookupResult
from lookup_knowledge.application.ports import (
    RETRIEVAL_DETAILS_VERSION,
    EvidenceRecord,
    RecordOutcome,
    ToolInvocation,
    ToolInvocationRecorder,
)
from lookup_knowledge.application.tool import MAX_QUERY_CHARS, TOOL_NAME
from lookup_knowledge.domain.errors import AuditNotRecorded

logger = logging.getLogger(__name__)


def invocation_record(
    config: LookupConfig,
    call: LookupCall,
    out: StageOutputs,
    result: LookupResult,
    *,
    duration_ms: float,
    trace_id: str | None,
    span_id: str | None,
) -> ToolInvocation:
    """The audit record of one lookup (validated on construction)."""
    principal = call.access.principal
    return ToolInvocation(
        id=call.invocation_id,
        session_id=call.session_id,
        query=call.query[:MAX_QUERY_CHARS],
        status=result.status.value,
        started_at=call.started_at,
        duration_ms=duration_ms,
        step_id=call.step_id,
        tool_call_id=call.tool_call_id,
        traffic=call.traffic.value,
        tool_name=TOOL_NAME,
        error_code=out.error.code if out.error else None,
        error_message=out.error.message if out.error else None,
        quality_score=result.quality_score,
        relevance_level=result.relevance_level.value,
        retrieval_mode=(out.retrieval.mode or call.mode).value,
        filter_applied=out.retrieval.filter_applied,
        fallback_reason=out.retrieval.fallback_reason,
        retrieve_k=config.retrieval.retrieve_k,
        return_n=config.retrieval.return_n,
        candidate_count=out.retrieval.candidate_count,
        returned_count=len(out.blocks),
        trace_id=trace_id,
        span_id=span_id,
        retrieval_details=_details(out, result),
        evidence=_shown_evidence(out),
        principal_tenant=principal.tenant if principal else None,
        principal_user=(principal.user or None) if principal else None,
        principal_groups_hash=principal.groups_hash() if principal else None,
        access_mode=call.access.mode.value,
        access_filter=call.access.describe() if call.access.enforced else None,
    )


def record(recorder: ToolInvocationRecorder, invocation: ToolInvocation) -> RecordOutcome | None:
    try:
        return recorder.record(invocation)
    except AuditNotRecorded:
        raise  # no lookup is answered that is not recorded where it must be
    except Exception:  # AuditError or an adapter bug: the lookup still answers
        # The recorder already journals and counts; reaching here means even the journal
        # failed. The failure is logged loudly.
        logger.exception(
            "audit record could not be written or journaled", extra={"invocation_id": invocation.id}
        )
        return None


def _shown_evidence(out: StageOutputs) -> tuple[EvidenceRecord, ...]:
    pack_keys = set(out.pack.included_keys) if out.pack else set()
    projected = {b.document_id: b for b in out.blocks}
    evidence: list[EvidenceRecord] = []
    for rank, item in enumerate(out.processed.final, 1):
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
                shown_text=shown,
                row_tenant=item.candidate.row_tenant,
            )
        )
    return tuple(evidence)


def _details(out: StageOutputs, result: LookupResult) -> dict[str, Any]:
    return {
        "version": RETRIEVAL_DETAILS_VERSION,
        "evidence": [
            {
                "document_id": b.document_id,
                "rank": b.rank,
                "source": b.source,
                "score": round(b.score, 4),
                "chars": len(b.content),
            }
            for b in out.blocks
        ],
        "contextPack": out.pack.summary() if out.pack else None,
        "retrievalTrace": result.retrieval_trace.to_wire(),
        "rerankTrace": [r.to_wire() for r in result.rerank_trace],
        "relevanceLevel": result.relevance_level.value,
        "completenessHint": result.completeness_hint.value,
    }
