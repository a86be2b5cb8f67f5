"""A session's records as files: JSONL (one invocation a line) and CSV (one evidence
row a line, formula-like cells neutralised)."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from typing import Any

from fastapi import Request
from fastapi.responses import Response, StreamingResponse

from lookup_knowledge.adapters.api import LookupApp
from lookup_knowledge.adapters.http.console_context import console_of, error_page
from lookup_knowledge.adapters.http.schemas import EvidenceOut, InvocationDetailOut
from lookup_knowledge.application.ports import InvocationFilter

SESSION_PAGE = 500
_HEAD = [
    "seq",
    "invocation_id",
    "step_id",
    "started_at",
    "query",
    "status",
    "relevance_level",
    "duration_ms",
]


def _refused() -> Response:
    return error_page("Sign in", "This needs an auditor token.", 401, login=True)


def export_jsonl(request: Request, session_id: str) -> Response:
    console = console_of(request)
    if not console.allowed(request):
        return _refused()
    details = list(session_details(console.lookup_app, session_id))
    lines = (
        json.dumps(InvocationDetailOut.of_detail(d).model_dump(mode="json"), ensure_ascii=False)
        + "\n"
        for d in details
    )
    return StreamingResponse(
        lines,
        media_type="application/x-ndjson",
        headers={"content-disposition": attachment(session_id, "jsonl")},
    )


def export_csv(request: Request, session_id: str) -> Response:
    console = console_of(request)
    if not console.allowed(request):
        return _refused()
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(_HEAD + list(EvidenceOut.model_fields))
    for d in session_details(console.lookup_app, session_id):
        s = d.summary
        row = [
            s.seq,
            s.id,
            s.step_id or "",
            s.started_at.isoformat(),
            s.query,
            s.status,
            s.relevance_level,
            s.duration_ms,
        ]
        evidence = [EvidenceOut.of(e).model_dump() for e in d.evidence] or [
            dict.fromkeys(EvidenceOut.model_fields, "")
        ]
        for e in evidence:
            writer.writerow([cell(v) for v in row + list(e.values())])
    return Response(
        buffer.getvalue(),
        media_type="text/csv; charset=utf-8",
        headers={"content-disposition": attachment(session_id, "csv")},
    )


def attachment(session_id: str, ext: str) -> str:
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in session_id)[:80] or "session"
    return f'attachment; filename="session-{safe}.{ext}"'


def cell(value: Any) -> Any:
    """CSV cells that a spreadsheet would run as a formula are quoted as text."""
    if isinstance(value, str) and value[:1] in ("=", "+", "-", "@", "\t", "\r"):
        return "'" + value
    return value


def session_details(lookup_app: LookupApp, session_id: str) -> Iterator[Any]:
    offset: int | None = 0
    while offset is not None:
        result = lookup_app.audit.list_invocations(
            InvocationFilter(session_id=session_id, limit=SESSION_PAGE, offset=offset)
        )
        for item in sorted(result.items, key=lambda i: i.seq):
            yield lookup_app.audit.get_invocation(item.id)
        offset = result.next_offset
