"""The auditor's console: server-rendered, read-only pages over ``LookupApp.audit``.

    /                                sessions (search by id part, time, status)
    /sessions/{id}                   a session's invocations in order; export links
    /sessions/{id}/export.jsonl|csv  the session, one invocation (JSONL) / evidence row (CSV)
    /invocations/{id}                evidence as shown, retrieval trace, rerank adjustments
    /quality                         rates and latency over time, top documents, eval sessions
    /login, /logout                  a signed session cookie (token-protected servers; ``signin``)

No page changes data, no page runs a script, nothing is loaded from elsewhere (the
content security policy says so); every stored string is escaped (``render``).
"""

from __future__ import annotations

import csv
import io
import json
import time
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from datetime import datetime, timedelta
from importlib.resources import files
from typing import Annotated, Any
from urllib.parse import parse_qs, urlencode

from fastapi import APIRouter, HTTPException, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response, StreamingResponse

from lookup_knowledge.adapters.api import LookupApp
from lookup_knowledge.adapters.config import ServerSettings
from lookup_knowledge.adapters.http.auth import Role, TokenGuard
from lookup_knowledge.adapters.http.evidence import recover_shown_text
from lookup_knowledge.adapters.http.render import render
from lookup_knowledge.adapters.http.rest import time_range
from lookup_knowledge.adapters.http.schemas import EvidenceOut, InvocationDetailOut
from lookup_knowledge.adapters.http.signin import (
    LOGIN_COOKIE,
    SESSION_COOKIE,
    ConsoleSessions,
    LoginThrottle,
)
from lookup_knowledge.application.ports import (
    AuditQueries,
    InvocationDetail,
    InvocationFilter,
    InvocationSummary,
    SessionFilter,
    TimeRange,
    reread_tenants,
)
from lookup_knowledge.application.tool import MAX_ID_CHARS
from lookup_knowledge.domain.errors import InvalidInputError, LookupKnowledgeError, NotFoundError

SESSION_PAGE = 500
BUCKETS = 12
# The sign-out form's CSRF token of the request being rendered (base.html shows the
# form when it is set).
_LOGOUT_CSRF: ContextVar[str | None] = ContextVar("logout_csrf", default=None)


def render_page(template: str, **context: Any) -> str:
    return render(template, logout_csrf=_LOGOUT_CSRF.get(), **context)


def console_router(
    lookup_app: LookupApp,
    guard: TokenGuard,
    server: ServerSettings | None = None,
    *,
    now: Callable[[], float] = time.time,
) -> APIRouter:
    """The console's pages. ``now`` (epoch seconds): the clock of session expiry and of
    the login throttle."""
    router = APIRouter(include_in_schema=False)
    server = server or lookup_app.settings.server
    signins = ConsoleSessions(
        server.auditor_token, lifetime_s=server.console_session_hours * 3600, now=now
    )
    throttle = LoginThrottle(server.login_attempts_per_minute, now=now)

    def audit() -> AuditQueries:
        return lookup_app.audit  # resolved per request: the audit store may be off

    def allowed(request: Request) -> bool:
        header = request.headers.get("authorization")
        if header is None and guard.enabled:
            return signins.check(request.cookies.get(SESSION_COOKIE)) is not None
        try:
            guard.check(header, Role.AUDITOR)
        except HTTPException:
            return False
        return True

    def secure(request: Request) -> bool:
        return server.behind_https or request.url.scheme == "https"

    def page(request: Request, build: Callable[[], str]) -> Response:
        """Render a console page, or the page that says why not (as HTML)."""
        session = signins.check(request.cookies.get(SESSION_COOKIE))
        _LOGOUT_CSRF.set(signins.csrf_for(session) if session is not None else None)
        if not allowed(request):
            return _html(
                render(
                    "error.html",
                    title="Sign in",
                    message="This console needs an auditor token.",
                    login=True,
                ),
                401,
            )
        try:
            return _html(build())
        except NotFoundError as error:
            return _html(
                render("error.html", title="Not found", message=error.message, login=False), 404
            )
        except InvalidInputError as error:
            return _html(
                render("error.html", title="Invalid input", message=error.message, login=False), 400
            )
        except LookupKnowledgeError as error:
            return _html(
                render(
                    "error.html",
                    title="Unavailable",
                    message=f"{error.code}: {error.message}",
                    login=False,
                ),
                503,
            )

    @router.get("/static/console.css")
    def stylesheet() -> Response:
        css = (
            files("lookup_knowledge.adapters.http")
            .joinpath("static/console.css")
            .read_text("utf-8")
        )
        return Response(css, media_type="text/css", headers={"cache-control": "max-age=3600"})

    @router.get("/", response_class=HTMLResponse)
    def sessions(
        request: Request,
        q: Annotated[str | None, Query(max_length=MAX_ID_CHARS)] = None,
        status: str | None = None,
        since: str | None = None,
        until: str | None = None,
        offset: Annotated[int, Query(ge=0, le=2**31 - 1)] = 0,
    ) -> Response:
        def build() -> str:
            result = audit().list_sessions(
                SessionFilter(
                    id_contains=q or None,
                    status=status or None,
                    time_range=time_range(_when("since", since), _when("until", until)),
                    limit=50,
                    offset=offset,
                )
            )
            form = {
                "q": q or "",
                "status": status or "",
                "since": since or "",
                "until": until or "",
            }
            older = (
                "/?" + urlencode({**form, "offset": result.next_offset})
                if result.next_offset is not None
                else None
            )
            return render_page(
                "sessions.html", sessions=result.items, form=form, older=older, nav="sessions"
            )

        return page(request, build)

    @router.get("/sessions/{session_id:path}/export.jsonl")
    def export_jsonl(request: Request, session_id: str) -> Response:
        if not allowed(request):
            return _html(
                render(
                    "error.html",
                    title="Sign in",
                    message="This needs an auditor token.",
                    login=True,
                ),
                401,
            )
        details = list(_session_details(lookup_app, session_id))
        lines = (
            json.dumps(InvocationDetailOut.of_detail(d).model_dump(mode="json"), ensure_ascii=False)
            + "\n"
            for d in details
        )
        return StreamingResponse(
            lines,
            media_type="application/x-ndjson",
            headers={"content-disposition": _attachment(session_id, "jsonl")},
        )

    @router.get("/sessions/{session_id:path}/export.csv")
    def export_csv(request: Request, session_id: str) -> Response:
        if not allowed(request):
            return _html(
                render(
                    "error.html",
                    title="Sign in",
                    message="This needs an auditor token.",
                    login=True,
                ),
                401,
            )
        buffer = io.StringIO()
        writer = csv.writer(buffer)
        head = [
            "seq",
            "invocation_id",
            "step_id",
            "started_at",
            "query",
            "status",
            "relevance_level",
            "duration_ms",
        ]
        writer.writerow(head + list(EvidenceOut.model_fields))
        for d in _session_details(lookup_app, session_id):
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
                writer.writerow([_cell(v) for v in row + list(e.values())])
        return Response(
            buffer.getvalue(),
            media_type="text/csv; charset=utf-8",
            headers={"content-disposition": _attachment(session_id, "csv")},
        )

    # A session id may hold "/": the path converter takes it whole (after the exports).
    @router.get("/sessions/{session_id:path}", response_class=HTMLResponse)
    def session(
        request: Request, session_id: str, offset: Annotated[int, Query(ge=0, le=2**31 - 1)] = 0
    ) -> Response:
        def build() -> str:
            result = audit().list_invocations(
                InvocationFilter(session_id=session_id, limit=SESSION_PAGE, offset=offset)
            )
            if not result.items and offset == 0:
                raise NotFoundError(f"no invocations in session {session_id!r}")
            items = sorted(result.items, key=lambda i: i.seq)
            more = (
                f"/sessions/{_q(session_id)}?offset={result.next_offset}"
                if result.next_offset is not None
                else None
            )
            return render_page(
                "session.html",
                session_id=session_id,
                session_path=_q(session_id),
                invocations=items,
                more=more,
                nav="sessions",
            )

        return page(request, build)

    @router.get("/invocations/{invocation_id}", response_class=HTMLResponse)
    def invocation(request: Request, invocation_id: str) -> Response:
        def build() -> str:
            detail = audit().get_invocation(invocation_id)
            details = dict(detail.retrieval_details)
            shown_chars = {
                str(e.get("document_id")): e.get("chars") for e in _dicts(details.get("evidence"))
            }
            current = _current_texts(lookup_app, detail)
            blocks = []
            for e in detail.evidence:
                chars = shown_chars.get(e.document_id)
                shown = recover_shown_text(
                    current.get(e.rank),
                    e.content_hash,
                    chars if isinstance(chars, int) else None,
                )
                blocks.append({"row": e, "shown": shown})
            trace = details.get("retrievalTrace")
            trace = trace if isinstance(trace, dict) else {}
            return render_page(
                "invocation.html",
                s=detail.summary,
                d=detail,
                session_path=_q(detail.summary.session_id),
                blocks=blocks,
                trace=trace,
                passes=_dicts(trace.get("passes")),
                counts=_pairs(trace.get("counts")),
                timings=_pairs(trace.get("timingsMs")),
                hints=trace.get("queryHints") if isinstance(trace.get("queryHints"), dict) else {},
                rerank=_dicts(details.get("rerankTrace")),
                pack=details.get("contextPack"),
                details=details,
                nav="sessions",
            )

        return page(request, build)

    @router.get("/quality", response_class=HTMLResponse)
    def quality(request: Request, since: str | None = None, until: str | None = None) -> Response:
        def build() -> str:
            span = time_range(_when("since", since), _when("until", until))
            buckets = _buckets(lookup_app, span)
            overall = audit().quality_summary(span, 10)
            charts = [
                _chart(
                    "No-evidence rate",
                    [(b0, q.no_evidence_rate if q.count else None) for b0, q in buckets],
                    percent=True,
                ),
                _chart(
                    "Fallback rate",
                    [(b0, q.fallback_rate if q.count else None) for b0, q in buckets],
                    percent=True,
                ),
                _chart(
                    "p95 latency (ms)",
                    [(b0, q.p95_duration_ms) for b0, q in buckets],
                    percent=False,
                ),
                _chart("Invocations", [(b0, float(q.count)) for b0, q in buckets], percent=False),
            ]
            evals = audit().list_sessions(SessionFilter(id_contains="eval-", limit=20)).items
            return render_page(
                "quality.html",
                overall=overall,
                charts=charts,
                evals=evals,
                form={"since": since or "", "until": until or ""},
                nav="quality",
            )

        return page(request, build)

    def login_page(
        request: Request, nonce: str | None, message: str | None, status: int
    ) -> Response:
        """The sign-in form with a CSRF token bound to the login cookie's nonce."""
        fresh = nonce is None
        if nonce is None:
            nonce, csrf = signins.login_nonce()
        else:
            csrf = signins.csrf_of_login(nonce)
        response = _html(render("login.html", message=message, csrf=csrf, nav=""), status)
        if fresh:
            response.set_cookie(
                LOGIN_COOKIE,
                nonce,
                httponly=True,
                samesite="strict",
                secure=secure(request),
                max_age=3600,
                path="/login",
            )
        return response

    @router.get("/login", response_class=HTMLResponse)
    def login_form(request: Request) -> Response:
        return login_page(request, None, None, 200)

    @router.post("/login")
    async def login(request: Request) -> Response:
        client = request.client.host if request.client else "unknown"
        wait = throttle.retry_after(client)
        if wait is not None:
            busy = _html(
                render(
                    "error.html",
                    title="Too many attempts",
                    message=f"Too many failed sign-ins; try again in {wait} s.",
                    login=False,
                ),
                429,
            )
            busy.headers["retry-after"] = str(wait)
            return busy
        form = parse_qs((await request.body()).decode("utf-8", "replace"))
        nonce = request.cookies.get(LOGIN_COOKIE)
        if not nonce or not signins.csrf_ok(nonce, "login", _field(form, "csrf")):
            return login_page(
                request, None, "The sign-in form expired or did not come from here.", 403
            )
        token = _field(form, "token").strip()
        if guard.role_of(f"Bearer {token}") is not Role.AUDITOR:
            throttle.failed(client)
            return login_page(request, nonce, "That is not an auditor token.", 401)
        throttle.succeeded(client)
        response = RedirectResponse("/", status_code=303)
        response.set_cookie(
            SESSION_COOKIE,
            signins.issue(),
            httponly=True,
            samesite="strict",
            secure=secure(request),
            max_age=signins.lifetime_s,
        )
        response.delete_cookie(LOGIN_COOKIE, path="/login")
        return response

    @router.post("/logout")
    async def logout(request: Request) -> Response:
        session = signins.check(request.cookies.get(SESSION_COOKIE))
        if session is not None:
            form = parse_qs((await request.body()).decode("utf-8", "replace"))
            if not signins.csrf_ok(session.session_id, "csrf", _field(form, "csrf")):
                return _html(
                    render(
                        "error.html",
                        title="Forbidden",
                        message="The sign-out form did not come from this console.",
                        login=False,
                    ),
                    403,
                )
            signins.revoke(session)
        response = RedirectResponse("/login", status_code=303)
        response.delete_cookie(SESSION_COOKIE)
        return response

    return router


# ------------------------------------------------------------------ helpers


def _field(form: dict[str, list[str]], name: str) -> str:
    return (form.get(name) or [""])[0]


def _html(body: str, status: int = 200) -> HTMLResponse:
    return HTMLResponse(body, status_code=status)


def _q(value: str) -> str:
    from urllib.parse import quote

    return quote(value, safe="")


def _attachment(session_id: str, ext: str) -> str:
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in session_id)[:80] or "session"
    return f'attachment; filename="session-{safe}.{ext}"'


def _cell(value: Any) -> Any:
    """CSV cells that a spreadsheet would run as a formula are quoted as text."""
    if isinstance(value, str) and value[:1] in ("=", "+", "-", "@", "\t", "\r"):
        return "'" + value
    return value


def _when(name: str, value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        raise InvalidInputError(
            f"{name} must be an ISO date or datetime, got {value[:40]!r}"
        ) from None


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


def _pairs(value: Any) -> list[tuple[str, Any]]:
    return [(str(k), v) for k, v in value.items()] if isinstance(value, dict) else []


def _session_details(lookup_app: LookupApp, session_id: str) -> Iterator[Any]:
    offset: int | None = 0
    while offset is not None:
        result = lookup_app.audit.list_invocations(
            InvocationFilter(session_id=session_id, limit=SESSION_PAGE, offset=offset)
        )
        for item in sorted(result.items, key=lambda i: i.seq):
            yield lookup_app.audit.get_invocation(item.id)
        offset = result.next_offset


def _edge(lookup_app: LookupApp, span: TimeRange, newest: bool) -> InvocationSummary | None:
    items = lookup_app.audit.list_invocations(
        InvocationFilter(time_range=span, limit=1, newest_first=newest)
    ).items
    return items[0] if items else None


def _buckets(lookup_app: LookupApp, span: TimeRange) -> list[tuple[datetime, Any]]:
    first, last = _edge(lookup_app, span, False), _edge(lookup_app, span, True)
    if first is None or last is None:
        return []
    start = span.started_from or first.started_at
    end = span.started_to or last.started_at + timedelta(microseconds=1)
    width = max((end - start) / BUCKETS, timedelta(seconds=1))
    out: list[tuple[datetime, Any]] = []
    at = start
    while at < end and len(out) < BUCKETS:
        upto = min(at + width, end)
        out.append((at, lookup_app.audit.quality_summary(TimeRange(at, upto), 1)))
        at = upto
    return out


def _chart(
    title: str, points: list[tuple[datetime, float | None]], *, percent: bool
) -> dict[str, Any]:
    """Bars for an inline SVG (no script): heights scaled to the largest value."""
    values = [v for _, v in points if v is not None]
    largest = max(values, default=0.0)
    top = largest or 1.0
    bars = []
    for i, (at, v) in enumerate(points):
        height = 0.0 if v is None else 90.0 * v / top
        label = "no calls" if v is None else (f"{v:.0%}" if percent else f"{v:.1f}")
        bars.append({"x": 8 + i * 30, "y": 100 - height, "h": height, "at": at, "label": label})
    return {
        "title": title,
        "bars": bars,
        "top": (f"{largest:.0%}" if percent else f"{largest:.1f}") if values else "–",
    }
