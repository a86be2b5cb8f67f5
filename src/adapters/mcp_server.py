"""``lookup_knowledge(query)`` as an MCP tool server (the official ``mcp`` SDK, 2.x).

    from lookup_knowledge import create_app
    from lookup_knowledge.adapters.mcp_server import serve_stdio

    with create_app() as app:
        serve_stdio(app)            # what ``lookup-knowledge mcp`` runs

The server offers exactly one tool, ``lookup_knowledge``, with the same description and
input schema as the OpenAI / Anthropic function-calling entries (``tool_schema``). A call
runs ``LookupApp.alookup`` (on the app's worker pool, never on the event loop), so it is
recorded in the audit store like any other lookup, and returns the tool JSON both as
``structuredContent`` and as one JSON text block (for clients that read only text).

**Session ids.** The audit groups calls by session and the citation check works per
session, so every MCP client session maps to one ``mcp-…`` session id:

* on a transport that has its own session id (stateful streamable HTTP, the
  ``Mcp-Session-Id`` the SDK's session manager issued and checks), ``mcp-<that id>``;
* otherwise the connection the server is serving: stdio (one client per process), the
  SDK's in-process client, SSE. The SDK enters the server lifespan once per served
  connection, so the lifespan state carries a fresh ``mcp-<uuid>`` and a call counter;
* on stateless HTTP no session exists at all: each call gets its own id.

``step_id`` is the call's number within its session ("1", "2", …) when the server keeps
the session, else the MCP request id; ``tool_call_id`` is always the MCP request id.

Argument errors never take the server down: an empty or over-long ``query`` reaches the
lookup, which records the call and answers with its error result (``found`` false and a
message saying why); arguments of the wrong shape are rejected by the SDK with an
``isError`` result.
"""

from __future__ import annotations

import copy
import itertools
import json
import uuid
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.tools import Tool
from mcp.types import CallToolResult, TextContent, ToolAnnotations

from lookup_knowledge.adapters.api import LookupApp, create_app
from lookup_knowledge.application.tool import QUERY_SCHEMA, TOOL_DESCRIPTION, TOOL_NAME

__all__ = ["SESSION_PREFIX", "build_mcp_server", "main", "serve_stdio"]

SESSION_PREFIX = "mcp-"
_TRANSPORT_SESSION_HEADER = "mcp-session-id"


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


def _session_and_step(
    headers: Mapping[str, str] | None, connection: _ConnectionSession, request_id: str
) -> tuple[str, str]:
    """(session_id, step_id) for one call; see the module docstring for the rules."""
    transport_session = _header(headers, _TRANSPORT_SESSION_HEADER)
    if transport_session is not None:
        return f"{SESSION_PREFIX}{transport_session}", request_id
    if headers is not None:
        # HTTP without a session id: stateless, every request stands alone.
        return f"{SESSION_PREFIX}{uuid.uuid4()}", request_id
    return connection.session_id, connection.next_step()


def _tool_result(payload: dict[str, Any], *, is_error: bool = False) -> CallToolResult:
    text = json.dumps(payload, ensure_ascii=False)
    return CallToolResult(
        content=[TextContent(type="text", text=text)],
        structured_content=payload,
        is_error=is_error,
    )


def build_mcp_server(app: LookupApp, *, name: str = "lookup-knowledge") -> MCPServer[Any]:
    """An MCP server offering ``lookup_knowledge(query)`` over ``app``.

    The caller owns ``app`` (and closes it); the server only calls ``app.alookup_result``.
    """

    async def lookup_knowledge(query: str, ctx: Context[_ConnectionSession, Any]) -> CallToolResult:
        request = ctx.request_context
        session_id, step_id = _session_and_step(
            ctx.headers, request.lifespan_context, ctx.request_id
        )
        result = await app.alookup_result(
            query, session_id=session_id, step_id=step_id, tool_call_id=ctx.request_id
        )
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
    return MCPServer(name, tools=[tool], lifespan=_per_connection)


def serve_stdio(app: LookupApp) -> None:
    """Serve ``lookup_knowledge`` over stdin/stdout until the client disconnects (blocking).

    The caller owns ``app``. While serving, the SDK points fd 1 at stderr, so stray output
    (a print, a driver's banner) cannot corrupt the protocol stream.
    """
    build_mcp_server(app).run("stdio")


def main() -> None:
    """``python -m lookup_knowledge.adapters.mcp_server``: configuration from the usual
    sources (``LOOKUP_KNOWLEDGE_*`` environment, ``LOOKUP_KNOWLEDGE_CONFIG``), then stdio."""
    with create_app() as app:
        serve_stdio(app)


if __name__ == "__main__":
    main()
