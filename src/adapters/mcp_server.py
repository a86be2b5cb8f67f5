"""``lookup_knowledge(query)`` as an MCP tool server (the official ``mcp`` SDK, 2.x).

    from lookup_knowledge import create_app
    from lookup_knowledge.adapters.mcp_server import serve_stdio

    with create_app() as app:
        serve_stdio(app)            # what ``lookup-knowledge mcp`` runs

The server offers ``lookup_knowledge``, with the same description and input schema as the
OpenAI / Anthropic function-calling entries (``tool_schema``), and ``check_answer(answer)``,
which checks a draft answer against what this MCP session was shown (``CheckAnswer``) and
returns the published verdict JSON. A call
runs ``LookupApp.alookup`` (on the app's worker pool, never on the event loop), so it is
recorded in the audit store like any other lookup, and returns the tool JSON once, as
``structuredContent`` declared by the tool's ``outputSchema``; the text block only says
the message and lists the citable ids (clients that read only text still learn what
was found and what to cite, and the excerpts are not sent twice).

**Session ids.** The audit groups calls by session and the citation check works per
session, so every MCP client session maps to one ``mcp-…`` session id:

* on a transport that has its own session id (stateful streamable HTTP, the
  ``Mcp-Session-Id`` the SDK's session manager issued and checks), ``mcp-<that id>``;
* otherwise the connection the server is serving: stdio (one client per process), the
  SDK's in-process client, SSE. The SDK enters the server lifespan once per served
  connection, so the lifespan state carries a fresh ``mcp-<uuid>`` and a call counter;
* on stateless HTTP, and with the per-request MCP protocol (2026) that the SDK's default
  client negotiates, no session exists at all: each call gets its own id,
  ``mcp-call-<uuid7>``, unless the request names its conversation (below). A
  ``check_answer`` there finds its sessions from the ids the answer cites: the caller's
  own ``mcp-call-`` sessions that were shown them (never another principal's). It checks
  against their evidence together and is recorded in the one that showed most of the
  cited ids, so a lookup and the check of the answer built on it share a session.

A client that keeps one server for many conversations (a desktop app on stdio) names the
conversation in the request's ``_meta``: ``{"lookup-knowledge/conversation-id": "c-42"}``
makes the call's audit session ``mcp-c-42`` whatever the transport, so two chats never
share a session (and a citation check per chat sees only that chat's evidence).

``step_id`` is the call's number within its session ("1", "2", …) when the server keeps
the session, else the MCP request id; ``tool_call_id`` is always the MCP request id.

**HTTP.** ``serve_http`` (``lookup-knowledge mcp --transport http``) serves streamable
HTTP at ``/mcp``; each MCP session there is its own audit session. It binds 127.0.0.1
by default; binding any other address needs ``mcp.token``, which every request must
then carry as ``Authorization: Bearer <token>`` (401 otherwise).

**Principal.** Who the lookups are for comes from the server's configuration, never from
the client: over HTTP a bearer token listed in ``server.principals`` (by its sha256;
``mcp.principals`` is its deprecated name) maps to that principal, and every listed token
is accepted; otherwise (stdio, or ``mcp.token``) the principal is
``mcp.tenant``/``mcp.user``/``mcp.groups``, or none (under ``access.mode=enforced``:
public documents only). A principal named in ``_meta`` (``lookup-knowledge/principal``,
``/tenant``, ``/user``, ``/groups``) or in an ``X-Lookup-Knowledge-*`` header is refused
with a ``forbidden`` tool error, unless the token is a trusted host's
(``trusted-host: true``), which names it in ``_meta["lookup-knowledge/principal"]``.

**Owned sessions.** An audit session belongs to the principal that opened it: a lookup
whose conversation id or ``Mcp-Session-Id`` names another principal's session is a
``forbidden`` tool error, and ``check_answer`` on such a session answers as on an empty
one (nothing recorded, no other principal's session named, never ``forbidden``). A
conversation id no audit session can have (over 251 characters, control characters, not
a string) makes the call a recorded ``invalid_input`` result in the connection's session.

Argument errors never take the server down: an empty or over-long ``query`` reaches the
lookup, which records the call and answers with its error result (``found`` false and a
message saying why); arguments of the wrong shape are rejected by the SDK with an
``isError`` result.
"""

# ruff: noqa: E402 - the extra is checked before its packages are imported
from __future__ import annotations

import copy
import hashlib
import hmac
import ipaddress
import itertools
import json
import logging
import uuid
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from lookup_knowledge.adapters.extras import require

require("mcp", "the MCP server", "mcp")

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.tools import Tool
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import ConfigDict
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from lookup_knowledge.adapters.api import LookupApp, create_app
from lookup_knowledge.adapters.api_requests import LookupRequest
from lookup_knowledge.adapters.local_server import listening_socket
from lookup_knowledge.adapters.mcp_wire import GuardedLines, stdin_lines
from lookup_knowledge.application.answer_check import answer_check_json
from lookup_knowledge.application.ids import uuid7
from lookup_knowledge.application.lookup.query import check_id
from lookup_knowledge.application.session_owner import CallerScope
from lookup_knowledge.application.tool import (
    QUERY_SCHEMA,
    RESULT_SCHEMA,
    TOOL_DESCRIPTION,
    TOOL_NAME,
)
from lookup_knowledge.domain.access import Principal
from lookup_knowledge.domain.answer_check import CitationStatus, Verdict
from lookup_knowledge.domain.errors import (
    AccessDenied,
    ConfigurationError,
    InvalidInputError,
    LookupKnowledgeError,
)
from lookup_knowledge.domain.projection import expand_agent_blocks

__all__ = [
    "CONVERSATION_META_KEY",
    "SESSION_PREFIX",
    "build_mcp_server",
    "main",
    "mcp_http_app",
    "serve_http",
    "serve_stdio",
]

SESSION_PREFIX = "mcp-"
CONVERSATION_META_KEY = "lookup-knowledge/conversation-id"
CHECK_TOOL_NAME = "check_answer"
CHECK_TOOL_DESCRIPTION = (
    "Check a draft answer against the evidence lookup_knowledge returned in this session. "
    "Cite evidence as [document_id]. Returns a verdict per claim: supported, unsupported "
    "(with reasons: a number, quote or name not in the cited block), uncited or "
    "invalid_citation. Fix or drop every claim that is not supported before answering."
)
_TRANSPORT_SESSION_HEADER = "mcp-session-id"

_VERDICTS = [v.value for v in Verdict]
#: ``check_answer``'s structured result (``answer_check_json``; ``audit check-answer
#: --json``). Objects may gain fields; those listed keep their names and types.
CHECK_RESULT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["checkId", "sessionId", "verdict", "claims"],
    "properties": {
        "checkId": {"type": "string"},
        "sessionId": {"type": "string"},
        "verdict": {"type": "string", "enum": _VERDICTS},
        "claims": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["index", "text", "start", "end", "citations", "verdict", "reasons"],
                "properties": {
                    "index": {"type": "integer"},
                    "text": {"type": "string"},
                    "start": {"type": "integer"},
                    "end": {"type": "integer"},
                    "citations": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "required": ["document_id", "status"],
                            "properties": {
                                "document_id": {"type": "string"},
                                "status": {
                                    "type": "string",
                                    "enum": [s.value for s in CitationStatus],
                                },
                            },
                        },
                    },
                    "verdict": {"type": "string", "enum": _VERDICTS},
                    "reasons": {"type": "array", "items": {"type": "string"}},
                    "support": {
                        "type": ["object", "null"],
                        "required": ["document_id", "start", "end", "score"],
                        "properties": {
                            "document_id": {"type": "string"},
                            "start": {"type": "integer"},
                            "end": {"type": "integer"},
                            "score": {"type": "number"},
                        },
                    },
                },
            },
        },
    },
}


@dataclass
class _ConnectionSession:
    """One served MCP connection: its audit session id and how many calls it made."""

    session_id: str = field(default_factory=lambda: f"{SESSION_PREFIX}{uuid.uuid4()}")
    _calls: itertools.count[int] = field(default_factory=lambda: itertools.count(1), repr=False)

    def next_step(self) -> str:
        return str(next(self._calls))


@asynccontextmanager
async def _per_connection(
    _server: MCPServer[_ConnectionSession],
) -> AsyncIterator[_ConnectionSession]:
    # Entered by the SDK once per served connection (stdio, in-process, SSE); once per
    # server on streamable HTTP, where the transport's session id takes over instead.
    yield _ConnectionSession()


def _header(headers: Mapping[str, str] | None, name: str) -> str | None:
    if headers is None:
        return None
    for key, value in headers.items():
        if key.lower() == name:
            return value or None
    return None


def _meta_extra(meta: object) -> Mapping[str, object]:
    if meta is None:
        return {}
    extra = meta.model_extra if hasattr(meta, "model_extra") else meta
    return extra if isinstance(extra, Mapping) else {}


class _BadConversation(Exception):
    """The request's conversation id cannot name an audit session (why: the message)."""


def _conversation(meta: object) -> str | None:
    """The host's conversation id from a request's ``_meta``, when it names one;
    ``_BadConversation`` when it names one no audit session can have."""
    extra = _meta_extra(meta)
    if CONVERSATION_META_KEY not in extra:
        return None
    value = extra[CONVERSATION_META_KEY]
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise _BadConversation(
            f"_meta {CONVERSATION_META_KEY} must be a string, not {type(value).__name__}"
        )
    try:
        check_id(f"_meta {CONVERSATION_META_KEY}", value)
        check_id(f"_meta {CONVERSATION_META_KEY}", f"{SESSION_PREFIX}{value}")
    except InvalidInputError as error:
        raise _BadConversation(error.message) from None
    return value


def _session_and_step(
    headers: Mapping[str, str] | None,
    connection: _ConnectionSession,
    request_id: str,
    conversation: str | None = None,
) -> tuple[str, str]:
    """(session_id, step_id) for one call; see the module docstring for the rules."""
    if conversation is not None:
        return f"{SESSION_PREFIX}{conversation}", request_id
    transport_session = _header(headers, _TRANSPORT_SESSION_HEADER)
    if transport_session is not None:
        return f"{SESSION_PREFIX}{transport_session}", request_id
    if headers is not None:
        # HTTP without a session id: stateless, every request stands alone.
        return _call_session(), request_id
    return connection.session_id, connection.next_step()


#: The audit sessions of stateless calls: one per call, ids that sort by time (uuid7).
CALL_SESSION_PREFIX = f"{SESSION_PREFIX}call-"


def _call_session() -> str:
    return f"{CALL_SESSION_PREFIX}{uuid7(datetime.now(UTC))}"


def _stateless(headers: Mapping[str, str] | None, conversation: str | None) -> bool:
    """HTTP without a transport session and without a conversation id: every call is its
    own audit session."""
    return (
        headers is not None
        and conversation is None
        and _header(headers, _TRANSPORT_SESSION_HEADER) is None
    )


def _session_of(
    headers: Mapping[str, str] | None,
    connection: _ConnectionSession,
    conversation: str | None = None,
) -> str:
    """The audit session of this call, like ``_session_and_step`` but using no step."""
    if conversation is not None:
        return f"{SESSION_PREFIX}{conversation}"
    transport_session = _header(headers, _TRANSPORT_SESSION_HEADER)
    if transport_session is not None:
        return f"{SESSION_PREFIX}{transport_session}"
    if headers is not None:
        return _call_session()
    return connection.session_id


def _token_digest(value: bytes | str) -> str:
    raw = value.encode("utf-8", "surrogateescape") if isinstance(value, str) else value
    return hashlib.sha256(raw).hexdigest()


@dataclass(frozen=True, slots=True)
class _Caller:
    """Who an MCP call is for: the principal, and whether the client may name another
    (a trusted host's token)."""

    principal: Principal | None
    trusted: bool = False

    @property
    def scope(self) -> CallerScope | None:
        return None if self.trusted else CallerScope(self.principal)


#: ``_meta`` keys of this server that would name a principal.
PRINCIPAL_META_KEY = "lookup-knowledge/principal"
_CLAIM_META_KEYS = frozenset(
    {
        PRINCIPAL_META_KEY,
        "lookup-knowledge/tenant",
        "lookup-knowledge/user",
        "lookup-knowledge/groups",
    }
)
_CLAIM_HEADER_PREFIX = "x-lookup-knowledge-"
_CLAIM_HEADERS = frozenset({"x-tenant", "x-tenant-id", "x-user", "x-user-id", "x-groups"})
_NOT_YOURS = (
    "the principal comes from the bearer token (or the server's configuration); this "
    "client may not name another (only a token marked trusted-host in server.principals may)"
)


class _Principals:
    """The configured agent tokens (by sha256, ``server.principals`` with the deprecated
    ``mcp.principals``) and the default principal (stdio, ``mcp.token``)."""

    def __init__(self, app: LookupApp) -> None:
        settings = app.settings
        self.default = _Caller(settings.mcp.principal())
        self.by_digest: dict[str, _Caller] = {
            digest: _Caller(entry.principal(), entry.trusted_host)
            for digest, entry in settings.agent_principals().items()
        }

    def of(self, headers: Mapping[str, str] | None) -> _Caller:
        authorization = _header(headers, "authorization")
        found: _Caller | None = None
        if authorization is not None and self.by_digest:
            scheme, _, token = authorization.partition(" ")
            if scheme.lower() == "bearer" and token:
                digest = _token_digest(token)
                for known, caller in self.by_digest.items():
                    if hmac.compare_digest(known, digest):
                        found = caller
        return found or self.default

    def for_call(self, headers: Mapping[str, str] | None, meta: object) -> _Caller:
        """The caller of one call; a principal named in ``_meta`` or a header is refused
        (``AccessDenied``) unless the token is a trusted host's, which names it in
        ``_meta["lookup-knowledge/principal"]`` ({tenant, user, groups})."""
        caller = self.of(headers)
        extra = _meta_extra(meta)
        claims = sorted(k for k in extra if k in _CLAIM_META_KEYS)
        named = sorted(
            k
            for k in (headers or {})
            if k.lower().startswith(_CLAIM_HEADER_PREFIX) or k.lower() in _CLAIM_HEADERS
        )
        if named or (claims and not caller.trusted):
            raise AccessDenied(_NOT_YOURS)
        if not claims:
            return caller
        if claims != [PRINCIPAL_META_KEY]:
            raise InvalidInputError(
                f"a trusted host names the principal in _meta {PRINCIPAL_META_KEY} "
                "({tenant, user, groups})"
            )
        return _Caller(_principal_from(extra[PRINCIPAL_META_KEY]), trusted=True)


def _principal_from(value: object) -> Principal | None:
    if value is None:
        return None
    if not isinstance(value, Mapping) or not set(value) <= {"tenant", "user", "groups"}:
        raise InvalidInputError(
            f"_meta {PRINCIPAL_META_KEY} must be an object with tenant, user and groups"
        )
    groups = value.get("groups") or []
    if not isinstance(groups, list):
        raise InvalidInputError(f"_meta {PRINCIPAL_META_KEY}.groups must be a list")
    return Principal(value.get("tenant"), value.get("user") or "", frozenset(groups))  # type: ignore[arg-type]


def _tool_result(payload: dict[str, Any], *, is_error: bool = False) -> CallToolResult:
    """The tool JSON once, as ``structuredContent`` (declared by the tool's
    ``outputSchema``); the text block is a short reading of it (the message and the
    citable ids), not a second copy of the excerpts."""
    lines = [str(payload.get("message", ""))]
    for block in expand_agent_blocks(payload.get("evidenceBlocks", [])):
        where = block.get("title") or block.get("breadcrumb") or block.get("source")
        lines.append(f"- {block['document_id']}" + (f" ({where})" if where else ""))
    if payload.get("evidenceBlocks"):
        lines.append("The excerpts are in the structured result (evidenceBlocks[].content).")
    return CallToolResult(
        content=[TextContent(type="text", text="\n".join(lines))],
        structured_content=payload,
        is_error=is_error,
    )


def _error_result(error: LookupKnowledgeError) -> CallToolResult:
    """A call refused before any lookup (a principal it may not name, another
    principal's session): a tool error the model can read."""
    return CallToolResult(
        content=[TextContent(type="text", text=f"{error.code}: {error.message}")],
        structured_content={"error": error.code, "message": error.message},
        is_error=True,
    )


def _check_result(payload: dict[str, Any], *, is_error: bool = False) -> CallToolResult:
    """A check's verdict JSON as ``structuredContent`` and as the text (it is short)."""
    return CallToolResult(
        content=[TextContent(type="text", text=json.dumps(payload, ensure_ascii=False))],
        structured_content=payload,
        is_error=is_error,
    )


def _refuse_unknown_arguments(tool: Tool) -> None:
    """Validate the tool's arguments as its input schema says (``additionalProperties:
    false``): an argument it does not declare is a tool error the model can read, not
    silently dropped (the SDK's argument model ignores unknown names)."""
    lenient = tool.fn_metadata.arg_model
    strict = type(
        lenient.__name__,
        (lenient,),
        {
            "__module__": lenient.__module__,
            "model_config": ConfigDict(**{**lenient.model_config, "extra": "forbid"}),
        },
    )
    tool.fn_metadata.arg_model = strict
    tool.parameters["additionalProperties"] = False


def build_mcp_server(app: LookupApp, *, name: str = "lookup-knowledge") -> MCPServer[Any]:
    """An MCP server offering ``lookup_knowledge(query)`` over ``app``.

    The caller owns ``app`` (and closes it); the server only calls ``app.alookup_result``.
    """
    principals = _Principals(app)

    async def lookup_knowledge(query: str, ctx: Context[_ConnectionSession, Any]) -> CallToolResult:
        request = ctx.request_context
        try:
            caller = principals.for_call(ctx.headers, request.meta)
        except LookupKnowledgeError as error:
            return _error_result(error)
        bad_input: str | None = None
        try:
            conversation = _conversation(request.meta)
        except _BadConversation as error:
            # Still one recorded call: in the connection's session, as invalid_input.
            conversation, bad_input = None, str(error)
        session_id, step_id = _session_and_step(
            ctx.headers, request.lifespan_context, ctx.request_id, conversation
        )
        try:
            result = await app.alookup_result(
                LookupRequest(
                    query,
                    session_id=session_id,
                    step_id=step_id,
                    tool_call_id=ctx.request_id,
                    principal=caller.principal,
                    owned_session=True,
                    input_error=bad_input,
                )
            )
        except LookupKnowledgeError as error:
            return _error_result(error)
        # A failed lookup (status error) is a tool error the model can read and act on.
        return _tool_result(result.to_tool_json(), is_error=result.error_code is not None)

    tool = Tool.from_function(
        lookup_knowledge,
        name=TOOL_NAME,
        description=TOOL_DESCRIPTION,
        annotations=ToolAnnotations(
            title="Look up knowledge",
            read_only_hint=True,
            destructive_hint=False,
            idempotent_hint=True,
            open_world_hint=False,
        ),
        structured_output=False,
    )
    # Advertise the one schema every format shares (tool_schema.QUERY_SCHEMA). The SDK's
    # own argument model only requires a string, so an empty or over-long query still
    # reaches the lookup, which records the call and answers with its error result.
    tool.parameters = copy.deepcopy(QUERY_SCHEMA)
    tool.fn_metadata.output_schema = copy.deepcopy(RESULT_SCHEMA)
    _refuse_unknown_arguments(tool)

    async def check_answer(answer: str, ctx: Context[_ConnectionSession, Any]) -> CallToolResult:
        request = ctx.request_context
        try:
            caller = principals.for_call(ctx.headers, request.meta)
            conversation = _conversation(request.meta)
            if _stateless(ctx.headers, conversation):
                # No session ties this call to the lookups: the ids the answer cites do,
                # among the caller's own per-call sessions.
                check = await app.acheck_answer_of_calls(
                    answer,
                    session_prefix=CALL_SESSION_PREFIX,
                    new_session_id=_call_session(),
                    principal=caller.principal,
                    scope=caller.scope,
                )
                return _check_result(answer_check_json(check))
            session_id = _session_of(ctx.headers, request.lifespan_context, conversation)
            check = await app.acheck_answer(session_id, answer, scope=caller.scope)
        except _BadConversation as error:
            return _check_result(
                {"error": InvalidInputError.code, "message": str(error)}, is_error=True
            )
        except LookupKnowledgeError as error:
            return _check_result({"error": error.code, "message": error.message}, is_error=True)
        return _check_result(answer_check_json(check))

    checker = Tool.from_function(
        check_answer,
        name=CHECK_TOOL_NAME,
        description=CHECK_TOOL_DESCRIPTION,
        annotations=ToolAnnotations(
            title="Check an answer against the evidence shown",
            read_only_hint=False,  # records the check in the audit store
            destructive_hint=False,
            idempotent_hint=False,
            open_world_hint=False,
        ),
        structured_output=False,
    )
    # The verdict JSON is the structured result (an error result is {error, message}).
    checker.fn_metadata.output_schema = copy.deepcopy(CHECK_RESULT_SCHEMA)
    _refuse_unknown_arguments(checker)
    return MCPServer(name, tools=[tool, checker], lifespan=_per_connection)


def serve_stdio(app: LookupApp) -> None:
    """Serve ``lookup_knowledge`` over stdin/stdout until the client disconnects (blocking).

    The caller owns ``app``. While serving, the SDK points fd 1 at stderr, so stray output
    (a print, a driver's banner) cannot corrupt the protocol stream. Every line passes
    ``mcp_wire.check_line`` first, so every request is answered (see ``mcp_wire``).
    """
    anyio.run(_serve_guarded_stdio, build_mcp_server(app))


async def _serve_guarded_stdio(server: MCPServer[Any]) -> None:
    replies_in, replies_out = anyio.create_memory_object_stream[SessionMessage](64)
    lines = GuardedLines(stdin_lines(), replies_in)
    async with stdio_server(stdin=lines) as (read_stream, write_stream):  # type: ignore[arg-type]

        async def send_replies() -> None:
            async with replies_out:
                async for reply in replies_out:
                    await write_stream.send(reply)

        # MCPServer.run_stdio_async with our stdin: the SDK has no public hook between
        # the wire and its validation, so this runs its low-level server on the streams.
        lowlevel = server._lowlevel_server
        async with anyio.create_task_group() as group:
            group.start_soon(send_replies)
            await lowlevel.run(read_stream, write_stream, lowlevel.create_initialization_options())
            group.cancel_scope.cancel()


class _BearerToken:
    """ASGI middleware: every HTTP request must carry ``Authorization: Bearer <token>``,
    with ``token`` or one of the tokens whose sha256 is in ``digests``."""

    def __init__(
        self, app: ASGIApp, token: str | None, digests: frozenset[str] = frozenset()
    ) -> None:
        self._app = app
        self._expected = f"Bearer {token}".encode() if token else None
        self._digests = digests

    def _accepts(self, given: bytes) -> bool:
        if self._expected is not None and hmac.compare_digest(given, self._expected):
            return True
        scheme, _, token = given.partition(b" ")
        if scheme.lower() != b"bearer" or not token:
            return False
        digest = _token_digest(token)
        return any(hmac.compare_digest(digest, known) for known in self._digests)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            given = dict(scope.get("headers") or ()).get(b"authorization", b"")
            if not self._accepts(given):
                response = JSONResponse(
                    {"error": "unauthorized", "detail": "a valid bearer token is required"},
                    status_code=401,
                    headers={"WWW-Authenticate": "Bearer"},
                )
                await response(scope, receive, send)
                return
        await self._app(scope, receive, send)


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def mcp_http_app(app: LookupApp, *, host: str = "127.0.0.1", token: str | None = None) -> ASGIApp:
    """The streamable-HTTP MCP server (at ``/mcp``) as an ASGI app; ``token`` set: every
    request needs it. Off loopback a token is required (``ConfigurationError``)."""
    app.settings.check_mcp_token()
    if app.settings.mcp.principals:
        logging.getLogger(__name__).warning(
            "mcp.principals is deprecated: it is read as server.principals (one map of "
            "agent tokens for REST and MCP); move the entries there"
        )
    digests = frozenset(app.settings.agent_principals())
    if not _loopback(host) and not token and not digests:
        raise ConfigurationError(
            "mcp.token", None, f"required to serve MCP over HTTP on {host} (not loopback)"
        )
    asgi: ASGIApp = build_mcp_server(app).streamable_http_app(host=host)
    return _BearerToken(asgi, token, digests) if token or digests else asgi


def serve_http(
    app: LookupApp,
    *,
    host: str = "127.0.0.1",
    port: int = 8765,
    token: str | None = None,
    on_listening: Callable[[str], None] | None = None,
    wrap: Callable[[ASGIApp, int], ASGIApp] | None = None,
) -> None:
    """Serve ``lookup_knowledge`` over streamable HTTP until interrupted (blocking).

    ``on_listening`` is called with the server's URL (``http://host:port/mcp``, the port
    the system gave when ``port`` is 0) once the socket is bound, before serving; a port
    that cannot be bound is a ``ConfigurationError`` naming ``mcp.port``. ``wrap`` wraps
    the ASGI app once the port is known (the CLI's local operator endpoints)."""
    import uvicorn

    asgi = mcp_http_app(app, host=host, token=token)
    sock = listening_socket(host, port, config_key="mcp.port")
    bound_host, bound_port = sock.getsockname()[:2]
    if wrap is not None:
        asgi = wrap(asgi, bound_port)
    if on_listening is not None:
        shown = f"[{bound_host}]" if ":" in bound_host else bound_host
        on_listening(f"http://{shown}:{bound_port}/mcp")
    uvicorn.Server(uvicorn.Config(asgi, log_level="warning")).run(sockets=[sock])


def main() -> None:
    """``python -m lookup_knowledge.adapters.mcp_server``: configuration from the usual
    sources (``LOOKUP_KNOWLEDGE_*`` environment, ``LOOKUP_KNOWLEDGE_CONFIG``), then stdio."""
    with create_app() as app:
        serve_stdio(app)


if __name__ == "__main__":
    main()
