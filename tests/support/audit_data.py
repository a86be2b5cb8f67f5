"""Builders of ``ToolInvocation`` records for audit tests."""

from __future__ import annotations

import itertools
import os
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from lookup_knowledge.application.ids import uuid7
from lookup_knowledge.application.ports import EvidenceRecord, ToolInvocation

BASE_TIME = datetime(2030, 5, 17, 9, 30, tzinfo=UTC)
_counter = itertools.count()


def session(prefix: str = "s") -> str:
    return f"{prefix}-{os.urandom(6).hex()}"


def evidence(
    rank: int,
    document_id: str,
    *,
    category: str = "billing",
    source: str | None = None,
    projected: bool = True,
) -> EvidenceRecord:
    doc, _, chunk = document_id.partition("#chunk-")
    return EvidenceRecord(
        rank=rank,
        document_id=document_id,
        doc_id=doc if chunk else None,
        chunk_index=int(chunk) if chunk else None,
        source=source if source is not None else f"{doc}.md",
        category=category,
        score_before=0.5 + rank / 100,
        score_after=0.9 - rank / 100,
        projected=projected,
        in_context_pack=rank <= 2,
        content_hash=f"{rank:064x}",
    )


def invocation(
    session_id: str,
    *,
    documents: Sequence[str] = (),
    at: datetime | None = None,
    step_id: str | None = "step-1",
    status: str | None = None,
    duration_ms: float = 12.5,
    quality: float = 0.75,
    fallback_reason: str | None = None,
    category: str = "billing",
    query: str = "how do refunds work?",
) -> ToolInvocation:
    """A record; ``at`` defaults to a distinct instant after ``BASE_TIME``."""
    started = at or BASE_TIME + timedelta(milliseconds=next(_counter))
    ev = tuple(evidence(r, d, category=category) for r, d in enumerate(documents, 1))
    return ToolInvocation(
        id=str(uuid7(started)),
        session_id=session_id,
        query=query,
        status=status or ("ok" if documents else "no_evidence"),
        started_at=started,
        duration_ms=duration_ms,
        step_id=step_id,
        tool_call_id="call-" + os.urandom(3).hex(),
        quality_score=quality if documents else 0.0,
        relevance_level="high" if documents else "none",
        retrieval_mode="dense",
        filter_applied=category if documents else None,
        fallback_reason=fallback_reason,
        retrieve_k=20,
        return_n=5,
        candidate_count=len(documents) * 3,
        returned_count=len(documents),
        trace_id="ab" * 16,
        span_id="cd" * 8,
        retrieval_details={
            "version": 1,
            "evidence": [{"document_id": d, "rank": r} for r, d in enumerate(documents, 1)],
            "retrievalTrace": {"passes": [{"filter": category, "hits": len(documents)}]},
            "rerankTrace": [],
            "contextPack": None,
        },
        evidence=ev,
    )
