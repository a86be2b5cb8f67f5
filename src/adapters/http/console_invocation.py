"""The invocation page: the evidence exactly as shown (hash-checked), the retrieval
trace, what came close on a no-evidence call (the near misses the trace records), the
rerank adjustments, and links to the previous and next invocation of the session."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from fastapi import Request
from fastapi.responses import Response

from lookup_knowledge.adapters.api import LookupApp
from lookup_knowledge.adapters.http.console_context import console_of, render_page
from lookup_knowledge.adapters.http.evidence import recover_shown_text
from lookup_knowledge.adapters.http.render import pathpart
from lookup_knowledge.application.lookup.traces import RerankTrace, RetrievalTrace
from lookup_knowledge.application.ports import (
    AuditQueries,
    InvocationDetail,
    InvocationFilter,
    InvocationSummary,
    reread_tenants,
)

_AROUND = 4  # invocations read on each side to find the neighbours by seq


def invocation(request: Request, invocation_id: str) -> Response:
    console = console_of(request)

    def build() -> str:
        detail = console.audit().get_invocation(invocation_id)
        details = dict(detail.retrieval_details)
        trace = RetrievalTrace.from_wire(details.get("retrievalTrace"))
        previous, following = neighbours(console.audit(), detail.summary)
        return render_page(
            "invocation.html",
            s=detail.summary,
            d=detail,
            session_path=pathpart(detail.summary.session_id),
            blocks=_blocks(console.lookup_app, detail, details),
            trace=trace,
            passes=trace.passes,
            counts=list(trace.counts.items()),
            timings=list(trace.timings_ms.items()),
            hints=trace.query_hints,
            rerank=_dicts(details.get("rerankTrace")),
            near=near_misses(detail, trace, _dicts(details.get("rerankTrace"))),
            previous=previous,
            following=following,
            details=details,
            nav="sessions",
        )

    return console.page(request, build)


def neighbours(
    audit: AuditQueries, s: InvocationSummary
) -> tuple[InvocationSummary | None, InvocationSummary | None]:
    """The invocations of the session with the seq just before and just after."""
    around = audit.list_invocations(
        InvocationFilter(
            session_id=s.session_id, offset=max(s.seq - 1 - _AROUND, 0), limit=2 * _AROUND + 1
        )
    ).items
    before = [i for i in around if i.seq < s.seq]
    after = [i for i in around if i.seq > s.seq]
    return (
        max(before, key=lambda i: i.seq) if before else None,
        min(after, key=lambda i: i.seq) if after else None,
    )


def near_misses(
    detail: InvocationDetail, trace: RetrievalTrace, rerank: list[dict[str, Any]]
) -> dict[str, Any] | None:
    """What came close on a call that showed nothing, as the trace records it: hits per
    pass and how many were usable, those under ``minRelevance``, the hits dropped (and
    why) and the candidates ranked but not returned."""
    if detail.summary.status != "no_evidence":
        return None
    passes = trace.passes
    return {
        "hits": sum(p.get("hits") or 0 for p in passes if isinstance(p.get("hits"), int)),
        "passes": len(passes),
        "below": trace.counts.get("belowMinRelevance", _unusable(passes)),
        "min_relevance": trace.min_relevance,
        "dropped": trace.dropped,
        "vanished": trace.vanished,
        "candidates": [r for r in rerank if RerankTrace.from_wire(r).outcome != "returned"],
    }


def _unusable(passes: Sequence[Mapping[str, Any]]) -> int | None:
    """Hits no pass could use and did not drop: those under the minimum relevance (the
    trace counts them itself only when post-processing ran)."""
    counted = [
        p["hits"] - p["usable"] - (p.get("dropped") or 0)
        for p in passes
        if isinstance(p.get("hits"), int) and isinstance(p.get("usable"), int)
    ]
    return sum(max(n, 0) for n in counted) if counted else None


def _blocks(
    lookup_app: LookupApp, detail: InvocationDetail, details: dict[str, Any]
) -> list[dict[str, Any]]:
    shown_chars = {
        str(e.get("document_id")): e.get("chars") for e in _dicts(details.get("evidence"))
    }
    current = _current_texts(lookup_app, detail)
    blocks = []
    for e in detail.evidence:
        chars = shown_chars.get(e.document_id)
        shown = recover_shown_text(
            current.get(e.rank), e.content_hash, chars if isinstance(chars, int) else None
        )
        blocks.append({"row": e, "shown": shown})
    return blocks


def _current_texts(lookup_app: LookupApp, detail: InvocationDetail) -> dict[int, str]:
    """The knowledge base's current text of each shown block, by rank: from the row the
    block was recorded to come from (its ``row_tenant``); for a record written before
    audit revision 0005 from the rows of the tenant the lookup was made for, else the
    untenanted ones (a public document without a tenant)."""
    principal = detail.summary.principal_tenant
    order = {e.rank: reread_tenants(e.row_tenant, principal) for e in detail.evidence}
    wanted: dict[str | None, list[str]] = {}
    for e in detail.evidence:
        for tenant in order[e.rank]:
            wanted.setdefault(tenant, []).append(e.document_id)
    texts = {t: lookup_app.evidence_text(ids, tenant=t) for t, ids in wanted.items()}
    current: dict[int, str] = {}
    for e in detail.evidence:
        for tenant in order[e.rank]:
            if e.document_id in texts[tenant]:
                current[e.rank] = texts[tenant][e.document_id]
                break
    return current


def _dicts(value: Any) -> list[dict[str, Any]]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []
