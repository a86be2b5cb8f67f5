"""The auditor's console: server-rendered, read-only pages over ``LookupApp.audit``.

    /                                sessions: search by id part, query text, document
                                     shown, status, time, traffic; answer-check column
    /sessions/{id}                   a session's invocations in order, its answer checks;
                                     export links
    /sessions/{id}/export.jsonl|csv  the session, one invocation (JSONL) / evidence row (CSV)
    /invocations/{id}                evidence as shown, retrieval trace, near misses,
                                     rerank adjustments; previous / next in the session
    /checks/{id}                     an answer check: claims, verdicts, reasons, the cited
                                     blocks with the aligned span highlighted, the judge
    /quality                         rates and latency over time, top documents, eval runs
    /eval/{run}/report.html          an eval run's HTML report (from the data dir)
    /login, /logout                  a signed session cookie (token-protected servers; ``signin``)

No page changes data, no page runs a script, nothing is loaded from elsewhere (the
content security policy says so); every stored string is escaped (``render``).
Handlers are module-level functions (``console_*`` modules beside this one) reading the
shared ``Console`` from the request.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from importlib.resources import files
from typing import Annotated, Any
from urllib.parse import quote, urlencode

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import Response

from lookup_knowledge.adapters.api import LookupApp
from lookup_knowledge.adapters.config import ServerSettings
from lookup_knowledge.adapters.http.auth import TokenGuard
from lookup_knowledge.adapters.http.console_checks import (
    check_page,
    checks_column,
    invocation_verdicts,
    session_checks,
)
from lookup_knowledge.adapters.http.console_context import Console, console_of, render_page
from lookup_knowledge.adapters.http.console_export import SESSION_PAGE, export_csv, export_jsonl
from lookup_knowledge.adapters.http.console_invocation import invocation
from lookup_knowledge.adapters.http.console_quality import eval_report, quality, when
from lookup_knowledge.adapters.http.console_signin import login, login_form, logout
from lookup_knowledge.adapters.http.rest import time_range
from lookup_knowledge.application.ports import InvocationFilter, SessionFilter
from lookup_knowledge.application.ports.audit_queries import MAX_QUERY_TEXT
from lookup_knowledge.application.tool import MAX_ID_CHARS
from lookup_knowledge.domain.errors import InvalidInputError, NotFoundError
from lookup_knowledge.domain.model import Traffic

SESSIONS_PER_PAGE = 50
TRAFFIC_CHOICES = ("production", "eval", "replay", "all")
Offset = Annotated[int, Query(ge=0, le=2**31 - 1)]


def console_router(
    lookup_app: LookupApp,
    guard: TokenGuard,
    server: ServerSettings | None = None,
    *,
    now: Callable[[], float] = time.time,
) -> APIRouter:
    """The console's pages. ``now`` (epoch seconds): the clock of session expiry and of
    the login throttle."""
    console = Console(lookup_app, guard, server, now=now)

    def attach(request: Request) -> None:
        request.state.console = console

    router = APIRouter(include_in_schema=False, dependencies=[Depends(attach)])
    _get(router, "/static/console.css", stylesheet)
    _get(router, "/", sessions)
    _get(router, "/sessions/{session_id:path}/export.jsonl", export_jsonl)
    _get(router, "/sessions/{session_id:path}/export.csv", export_csv)
    # A session id may hold "/": the path converter takes it whole (after the exports).
    _get(router, "/sessions/{session_id:path}", session)
    _get(router, "/invocations/{invocation_id}", invocation)
    _get(router, "/checks/{check_id}", check_page)
    _get(router, "/quality", quality)
    _get(router, "/eval/{run_id}/report.html", eval_report)
    _get(router, "/login", login_form)
    router.add_api_route("/login", login, methods=["POST"], response_class=Response)
    router.add_api_route("/logout", logout, methods=["POST"], response_class=Response)
    return router


def _get(router: APIRouter, path: str, endpoint: Any) -> None:
    router.add_api_route(path, endpoint, methods=["GET"], response_class=Response)


def stylesheet() -> Response:
    css = files("lookup_knowledge.adapters.http").joinpath("static/console.css").read_text("utf-8")
    return Response(css, media_type="text/css", headers={"cache-control": "max-age=3600"})


def sessions(
    request: Request,
    q: Annotated[str | None, Query(max_length=MAX_ID_CHARS)] = None,
    text: Annotated[str | None, Query(max_length=MAX_QUERY_TEXT)] = None,
    doc: Annotated[str | None, Query(max_length=MAX_QUERY_TEXT)] = None,
    status: str | None = None,
    since: str | None = None,
    until: str | None = None,
    traffic: str | None = None,
    offset: Offset = 0,
) -> Response:
    console = console_of(request)
    form = {
        "q": q or "",
        "text": text or "",
        "doc": doc or "",
        "status": status or "",
        "since": since or "",
        "until": until or "",
        "traffic": traffic or "",
    }

    def build() -> str:
        result = console.audit().list_sessions(
            SessionFilter(
                id_contains=q or None,
                query_contains=text or None,
                document_id=doc or None,
                status=status or None,
                time_range=time_range(when("since", since), when("until", until)),
                traffic=_traffic(traffic),
                limit=SESSIONS_PER_PAGE,
                offset=offset,
            )
        )
        kept = {k: v for k, v in form.items() if v}

        def at(to: int) -> str:
            return "/?" + urlencode({**kept, "offset": to}) if to else "/?" + urlencode(kept)

        older = at(result.next_offset) if result.next_offset is not None else None
        newer = at(max(offset - SESSIONS_PER_PAGE, 0)) if offset > 0 else None
        return render_page(
            "sessions.html",
            sessions=result.items,
            checks=checks_column(console, [s.session_id for s in result.items]),
            form=form,
            traffic_choices=TRAFFIC_CHOICES,
            older=older,
            newer=newer,
            page_number=offset // SESSIONS_PER_PAGE + 1,
            nav="sessions",
        )

    return console.page(request, build)


def _traffic(value: str | None) -> Any:
    if not value:
        return None
    if value == "all":
        return "all"
    if value not in TRAFFIC_CHOICES:
        raise InvalidInputError(f"traffic must be one of {', '.join(TRAFFIC_CHOICES)}")
    return Traffic(value)


def session(request: Request, session_id: str, offset: Offset = 0) -> Response:
    console = console_of(request)

    def build() -> str:
        audit = console.audit()
        result = audit.list_invocations(
            InvocationFilter(session_id=session_id, limit=SESSION_PAGE, offset=offset)
        )
        if not result.items and offset == 0:
            raise NotFoundError(f"no invocations in session {session_id!r}")
        items = sorted(result.items, key=lambda i: i.seq)
        path = quote(session_id, safe="")
        later = (
            f"/sessions/{path}?offset={result.next_offset}"
            if result.next_offset is not None
            else None
        )
        earlier = f"/sessions/{path}?offset={max(offset - SESSION_PAGE, 0)}" if offset > 0 else None
        checks = session_checks(console, session_id)
        full = [console.checks().get_check(c.id) for c in checks[:20]]
        cited = invocation_verdicts(full, audit.session_evidence(session_id)) if full else {}
        return render_page(
            "session.html",
            session_id=session_id,
            session_path=path,
            invocations=items,
            checks=checks,
            cited=cited,
            earlier=earlier,
            later=later,
            nav="sessions",
        )

    return console.page(request, build)
