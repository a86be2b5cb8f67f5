"""``/mcp`` inside ``serve``: the MCP server of ``mcp --transport http`` behind the same
agent-scope bearer token, each MCP session its own audit session (official client)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import httpx
from mcp import Client
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client

from lookup_knowledge.adapters.config import load_settings
from lookup_knowledge.adapters.http import create_http_app
from lookup_knowledge.application.ports import InvocationFilter
from tests.support.http import AGENT, AUDITOR, sample_app, served


async def _session(url: str, headers: dict[str, str] | None = None) -> list[dict[str, Any]]:
    transport = streamable_http_client(url, http_client=create_mcp_http_client(headers=headers))
    out = []
    async with Client(transport, mode="legacy") as client:  # type: ignore[arg-type]
        for query in ("PG-53300 too many connections", "how long is the DNS TTL?"):
            result = await client.call_tool("lookup_knowledge", {"query": query})
            assert not result.is_error
            assert result.structured_content is not None
            out.append(dict(result.structured_content))
    return out


def test_two_mcp_sessions_over_serve_are_two_audit_sessions(tmp_path: Path) -> None:
    lookup_app = sample_app(tmp_path / "data")
    try:
        with served(create_http_app(lookup_app)) as url:
            first = anyio.run(_session, f"{url}/mcp")
            second = anyio.run(_session, f"{url}/mcp")
        lookup_app.flush()
        ids = [p["invocationId"] for p in first + second]
        sessions = [lookup_app.audit.get_invocation(i).summary.session_id for i in ids]
        assert sessions[0] == sessions[1] != sessions[2] == sessions[3]
        assert all(s.startswith("mcp-") for s in sessions)
        rows = lookup_app.audit.list_invocations(InvocationFilter(session_id=sessions[0])).items
        assert [r.seq for r in rows] == [1, 2]
    finally:
        lookup_app.close()


def test_mcp_over_serve_needs_the_agent_token(tmp_path: Path) -> None:
    lookup_app = sample_app(tmp_path / "data")
    settings = load_settings(
        overrides={"server.auditor-token": AUDITOR, "server.agent-token": AGENT}
    ).settings
    try:
        with served(create_http_app(lookup_app, settings)) as url:
            ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
            denied = httpx.post(f"{url}/mcp", json=ping)
            assert denied.status_code == 401
            assert denied.headers["content-type"] == "application/problem+json"
            wrong = httpx.post(
                f"{url}/mcp", json=ping, headers={"authorization": f"Bearer {AUDITOR}"}
            )
            assert wrong.status_code == 403
            answers = anyio.run(_session, f"{url}/mcp", {"authorization": f"Bearer {AGENT}"})
        assert all(a["found"] for a in answers)
    finally:
        lookup_app.close()
