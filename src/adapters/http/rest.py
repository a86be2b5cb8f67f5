"""The REST API under ``/v1`` and the probes ``/healthz`` and ``/readyz``.

Agent scope: ``POST /v1/lookup``, ``POST /v1/verify``. Auditor scope (read-only): the
``GET /v1/...`` audit reads. The probes carry no stored data and need no token.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, HTTPException, Query, Request

from lookup_knowledge.adapters.api import LookupApp
from lookup_knowledge.adapters.api_requests import LookupRequest as LookupCall
from lookup_knowledge.adapters.http.auth import Caller, Role, TokenGuard
from lookup_knowledge.adapters.http.schemas import (
    Check,
    CheckAnswerRequest,
    Health,
    InvocationDetailOut,
    InvocationOut,
    InvocationPageOut,
    LookupRequest,
    Readiness,
    SessionOut,
    SessionPageOut,
    StatsOut,
    Text,
    VerifyRequest,
    VerifyResponse,
)
from lookup_knowledge.application.answer_check import answer_check_json
from lookup_knowledge.application.ports import (
    MAX_PAGE_SIZE,
    InvocationFilter,
    SessionFilter,
    TimeRange,
)
from lookup_knowledge.application.tool import MAX_ID_CHARS

Status = Literal["ok", "no_evidence", "error"]
NOT_YOURS_TO_NAME = (
    "the principal comes from the bearer token; this token may not name another "
    "(only a token marked trusted-host in server.principals may)"
)
PROBLEM: dict[str, Any] = {"content": {"application/problem+json": {}}}
ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"description": "Invalid input (problem+json)", **PROBLEM},
    401: {"description": "No valid bearer token (problem+json)", **PROBLEM},
    403: {
        "description": "A token of another scope, a principal the token may not name, or "
        "another principal's session (problem+json)",
        **PROBLEM,
    },
    413: {"description": "Request body too large (problem+json)", **PROBLEM},
    422: {"description": "Request does not match the schema (problem+json)", **PROBLEM},
    503: {"description": "A backing store is unavailable (problem+json)", **PROBLEM},
}


def utc(value: datetime | None) -> datetime | None:
    """A naive time is taken as UTC."""
    if value is None:
        return None
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value


def time_range(since: datetime | None, until: datetime | None) -> TimeRange:
    return TimeRange(utc(since), utc(until))


Since = Annotated[
    datetime | None, Query(description="Started at or after (ISO 8601; naive = UTC).")
]
Until = Annotated[datetime | None, Query(description="Started before (ISO 8601; naive = UTC).")]
Limit = Annotated[int, Query(ge=1, le=MAX_PAGE_SIZE)]
Offset = Annotated[int, Query(ge=0, le=2**31 - 1)]


#: Headers a client might use to name a principal: never read (the principal comes from
#: the token), so a request carrying one is refused rather than silently mis-attributed.
PRINCIPAL_HEADER_PREFIX = "x-lookup-knowledge-"
PRINCIPAL_HEADERS = frozenset({"x-tenant", "x-tenant-id", "x-user", "x-user-id", "x-groups"})


def principal_headers(request: Request) -> list[str]:
    return [
        name
        for name in request.headers
        if name.lower().startswith(PRINCIPAL_HEADER_PREFIX) or name.lower() in PRINCIPAL_HEADERS
    ]


def rest_router(
    lookup_app: LookupApp, guard: TokenGuard, *, readiness_timeout_s: float | None = None
) -> APIRouter:
    require_agent = guard.dependency(Role.AGENT)

    def agent_caller(request: Request, caller: Caller = Depends(require_agent)) -> Caller:  # noqa: B008
        """The agent caller; a principal named in a header is refused (403)."""
        named = principal_headers(request)
        if named:
            raise HTTPException(
                403 if not caller.trusted else 400,
                f"a principal is not read from headers ({', '.join(sorted(named))}): "
                + (
                    "it comes from the bearer token"
                    if not caller.trusted
                    else "a trusted host names it in the body's principal"
                ),
            )
        return caller

    router = APIRouter(responses=ERRORS)
    # A default, not an Annotated alias: the annotations are strings (PEP 563) that
    # FastAPI resolves in this module's globals, where a local alias is not.
    _agent_routes(router, lookup_app, Depends(agent_caller))
    _audit_routes(router, lookup_app, [Depends(guard.dependency(Role.AUDITOR))])
    _probe_routes(router, lookup_app, readiness_timeout_s)
    return router


def _agent_routes(router: APIRouter, lookup_app: LookupApp, as_agent: Any) -> None:
    @router.post("/v1/lookup", tags=["agent"])
    async def lookup(body: LookupRequest, caller: Caller = as_agent) -> dict[str, Any]:
        """Run ``lookup_knowledge(query)``: the tool JSON the agent receives. The call is
        recorded (or journalled) before the answer is sent. The principal is the token's;
        ``principal`` in the body is accepted from a trusted host only (403 otherwise).
        A session belongs to the principal that opened it: naming another principal's
        session is refused (403)."""
        principal = caller.principal
        if body.principal is not None:
            if not caller.trusted:
                raise HTTPException(403, NOT_YOURS_TO_NAME)
            principal = body.principal.principal()
        return await lookup_app.alookup(
            LookupCall(
                body.query,
                session_id=body.session_id,
                step_id=body.step_id,
                mode=body.mode,
                category=body.category,
                tool_call_id=body.tool_call_id,
                principal=principal,
                owned_session=True,
            )
        )

    @router.post("/v1/verify", tags=["agent"])
    async def verify(body: VerifyRequest, caller: Caller = as_agent) -> VerifyResponse:
        """EvidenceGuard: which cited document_ids were really returned in the session.
        An agent token acts on its own sessions only (another's answers like an empty
        one) and an id it may not see is ``unknown``; ``groups`` is a trusted host's."""
        if body.groups is not None and not caller.trusted:
            raise HTTPException(403, NOT_YOURS_TO_NAME)
        report = await lookup_app.averify_citations(
            body.session_id, body.document_ids, groups=body.groups, scope=caller.scope
        )
        return VerifyResponse.of(report)

    @router.post("/v1/check-answer", tags=["agent"])
    async def check_answer(body: CheckAnswerRequest, caller: Caller = as_agent) -> dict[str, Any]:
        """Check an answer's claims against the exact text the session was shown; the
        verdicts are recorded (the JSON of ``audit check-answer --json``). An agent token
        checks against its own sessions only."""
        check = await lookup_app.acheck_answer(
            body.session_id,
            body.answer,
            step_id=body.step_id,
            answer_format=body.format,
            scope=caller.scope,
        )
        return answer_check_json(check)


def _audit_routes(router: APIRouter, lookup_app: LookupApp, auditor: Any) -> None:
    @router.get("/v1/invocations", dependencies=auditor, tags=["audit"])
    def invocations(
        session: Annotated[Text | None, Query(min_length=1, max_length=MAX_ID_CHARS)] = None,
        step: Annotated[Text | None, Query(min_length=1, max_length=MAX_ID_CHARS)] = None,
        status: Status | None = None,
        since: Since = None,
        until: Until = None,
        limit: Limit = 50,
        offset: Offset = 0,
        newest_first: bool = False,
    ) -> InvocationPageOut:
        """Invocations ordered by start time, one page at a time."""
        page = lookup_app.audit.list_invocations(
            InvocationFilter(
                session_id=session,
                step_id=step,
                status=status,
                time_range=time_range(since, until),
                limit=limit,
                offset=offset,
                newest_first=newest_first,
            )
        )
        return InvocationPageOut(
            items=[InvocationOut.of(i) for i in page.items], next_offset=page.next_offset
        )

    @router.get("/v1/invocations/{invocation_id}", dependencies=auditor, tags=["audit"])
    def invocation(invocation_id: Text) -> InvocationDetailOut:
        """One invocation: its evidence rows, traces and timings."""
        return InvocationDetailOut.of_detail(lookup_app.audit.get_invocation(invocation_id))

    @router.get("/v1/sessions", dependencies=auditor, tags=["audit"])
    def sessions(
        q: Annotated[
            Text | None, Query(max_length=MAX_ID_CHARS, description="Part of the session id.")
        ] = None,
        status: Status | None = None,
        since: Since = None,
        until: Until = None,
        limit: Limit = 50,
        offset: Offset = 0,
    ) -> SessionPageOut:
        """Sessions, newest last call first, with their invocation counts."""
        page = lookup_app.audit.list_sessions(
            SessionFilter(
                id_contains=q or None,
                status=status,
                time_range=time_range(since, until),
                limit=limit,
                offset=offset,
            )
        )
        return SessionPageOut(
            items=[SessionOut.of(s) for s in page.items], next_offset=page.next_offset
        )

    @router.get("/v1/stats", dependencies=auditor, tags=["audit"])
    def stats(
        since: Since = None,
        until: Until = None,
        top: Annotated[int, Query(ge=1, le=MAX_PAGE_SIZE)] = 10,
    ) -> StatsOut:
        """Quality over a time range: rates, mean quality, latency percentiles."""
        return StatsOut.of(lookup_app.audit.quality_summary(time_range(since, until), top))


def _probe_routes(
    router: APIRouter, lookup_app: LookupApp, readiness_timeout_s: float | None
) -> None:
    @router.get("/healthz", tags=["probes"])
    def healthz() -> Health:
        """The process is up (no dependency is asked)."""
        return Health(status="ok")

    @router.get("/readyz", tags=["probes"], responses={503: {"model": Readiness}})
    def readyz() -> Any:
        """The knowledge search and the audit store answer; the journal backlog. Each
        check is bounded by ``server.readiness-timeout-s``."""
        return readiness(lookup_app, readiness_timeout_s)


def readiness(lookup_app: LookupApp, timeout_s: float | None = None) -> Any:
    """``LookupApp.health()`` as a probe: 200 when ready, 503 otherwise."""
    from fastapi.responses import JSONResponse

    health = lookup_app.health(timeout_s)
    body = Readiness(
        status="ready" if health.ok else "not_ready",
        checks={c.name: Check(ok=c.ok, detail=c.detail) for c in health.components},
        spool_pending=health.spool_pending,
    )
    return JSONResponse(body.model_dump(), status_code=200 if health.ok else 503)
