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

**Session ids** and **principals**: ``mcp_callers.py``.

**HTTP.** ``serve_http`` (``lookup-knowledge mcp --transport http``) serves streamable
HTTP at ``/mcp``; each MCP session there is its own audit session. It binds 127.0.0.1
by default; binding any other address needs ``mcp.token``, which every request must
then carry as ``Authorization: Bearer <token>`` (401 otherwise).

Argument errors never take the server down: an empty or over-long ``query`` reaches the
lookup, which records the call and answers with its error result (``found`` false and a
message saying why); arguments of the wrong shape are rejected by the SDK with an
``isError`` result.
"""

# ruff: noqa: E402 - the extra is checked before its packages are imported
from __future__ import annotations

import copy
import hmac
import ipaddress
import json
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
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
from lookup_knowledge.adapters.mcp_callers import (
    CALL_SESSION_PREFIX,
    CONVERSATION_META_KEY,
    SESSION_PREFIX,
    _BadConversation,
    _call_session,
    _ConnectionSession,
    _conversation,
    _Principals,
    _session_and_step,
    _session_of,
    _stateless,
    _token_digest,
)
from lookup_knowledge.adapters.mcp_wire import GuardedLines, stdin_lines
from lookup_knowledge.application.answer_check import answer_check_json
from lookup_knowledge.application.tool import (
    QUERY_SCHEMA,
    RESULT_SCHEMA,
    TOOL_DESCRIPTION,
    TOOL_NAME,
)
from lookup_knowledge.domain.answer_check import CitationStatus, Verdict
from lookup_knowledge.domain.errors import (
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

CHECK_TOOL_NAME = "check_answer"
CHECK_TOOL_DESCRIPTION = (
    "Check a draft answer against the evidence lookup_knowledge returned in this session. "
    "Cite evidence as [document_id]. Returns a verdict per claim: supported, unsupported "
    "(with reasons: a number, quote or name not in the cited block), uncited or "
    "invalid_citation. Fix or drop every claim that is not supported before answering."
)

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


@asynccontextmanager
async def _per_connection(
    _server: MCPServer[_ConnectionSession],
) -> AsyncIterator[_ConnectionSession]:
    # Entered by the SDK once per served connection (stdio, in-process, SSE); once per
    # server on streamable HTTP, where the transport's session id takes over instead.
    yield _ConnectionSession()


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
    tools = [_lookup_tool(app, principals), _check_tool(app, principals)]
    return MCPServer(name, tools=tools, lifespan=_per_connection)


def _lookup_tool(app: LookupApp, principals: _Principals) -> Tool:
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
    return tool


def _check_tool(app: LookupApp, principals: _Principals) -> Tool:
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
    return checker


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
