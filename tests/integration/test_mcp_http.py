"""MCP over streamable HTTP with the official client: one audit session per MCP session,
a bearer token off loopback, and a conversation id in ``_meta`` on any transport."""

from __future__ import annotations

import os
import re
import select
import subprocess
import sys
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import Client
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client

from lookup_knowledge.adapters.api import LookupApp, create_app
from lookup_knowledge.adapters.mcp_server import (
    CONVERSATION_META_KEY,
    build_mcp_server,
    mcp_http_app,
)
from lookup_knowledge.application.ports import InvocationFilter
from lookup_knowledge.domain.errors import ConfigurationError
from tests.support.http import served

QUERY = "how do I fail over the primary PostgreSQL database"
CLI = str(Path(sys.executable).parent / "lookup-knowledge")


@pytest.fixture
def app(tmp_path: Path) -> Iterator[LookupApp]:
    corpus = tmp_path / "corpus" / "database"
    corpus.mkdir(parents=True)
    (corpus / "failover.md").write_text(
        "# Database failover\n\nTo fail over the primary PostgreSQL database, run "
        "`pg_ctl promote` on the replica and repoint the db-primary DNS record.\n",
        encoding="utf-8",
    )
    built = create_app(
        overrides={
            "data-dir": str(tmp_path / "data"),
            "embedder.provider": "hashing",
            "search.backend": "memory",
        }
    )
    built.ingest([tmp_path / "corpus"], root=tmp_path / "corpus")
    yield built
    built.close()


@pytest.fixture
def serve(app: LookupApp) -> Iterator[Any]:
    """Start the HTTP app on its own loopback port (uvicorn in a thread); yields a starter."""
    with ExitStack() as servers:

        def start(token: str | None = None) -> str:
            return servers.enter_context(served(mcp_http_app(app, token=token))) + "/mcp"

        yield start


def _sessions(app: LookupApp) -> list[str]:
    app.flush()
    items = app.audit.list_invocations(InvocationFilter(limit=100)).items
    return [i.session_id for i in items]


async def _two_calls(
    url: str,
    headers: dict[str, str] | None = None,
    mode: str = "legacy",
    conversation: str | None = None,
) -> list[dict[str, Any]]:
    transport = streamable_http_client(url, http_client=create_mcp_http_client(headers=headers))
    meta = {CONVERSATION_META_KEY: conversation} if conversation else None
    payloads = []
    async with Client(transport, mode=mode) as client:  # type: ignore[arg-type]
        for _ in range(2):
            result = await client.call_tool("lookup_knowledge", {"query": QUERY}, meta=meta)
            assert not result.is_error
            assert result.structured_content is not None
            payloads.append(dict(result.structured_content))
    return payloads


def test_two_http_sessions_are_two_audit_sessions(app: LookupApp, serve: Any) -> None:
    url = serve()
    first = anyio.run(_two_calls, url)
    second = anyio.run(_two_calls, url)
    assert all(p["found"] for p in first + second)
    sessions = _sessions(app)
    assert len(sessions) == 4
    assert len(set(sessions)) == 2  # one per MCP session, both calls of a session in it
    assert all(s.startswith("mcp-") for s in sessions)
    assert sessions[0] == sessions[1]
    assert sessions[2] == sessions[3]


def test_the_per_request_protocol_has_no_session_so_the_conversation_id_groups_calls(
    app: LookupApp, serve: Any
) -> None:
    """The 2026 per-request MCP protocol keeps no session: without a conversation id each
    call stands alone; with one, a chat's calls share its audit session."""
    url = serve()
    anyio.run(_two_calls, url, None, "auto")
    alone = _sessions(app)
    assert len(set(alone)) == 2
    anyio.run(_two_calls, url, None, "auto", "chat-9")
    assert _sessions(app)[2:] == ["mcp-chat-9", "mcp-chat-9"]


def test_a_token_is_required_when_set_and_off_loopback(app: LookupApp, serve: Any) -> None:
    url = serve(token="s3cret-token")
    denied = httpx.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"}, timeout=10)
    assert denied.status_code == 401
    wrong = httpx.post(
        url, headers={"Authorization": "Bearer nope"}, json={"jsonrpc": "2.0"}, timeout=10
    )
    assert wrong.status_code == 401
    payloads = anyio.run(_two_calls, url, {"Authorization": "Bearer s3cret-token"})
    assert all(p["found"] for p in payloads)
    with pytest.raises(ConfigurationError, match=r"mcp\.token"):
        mcp_http_app(app, host="0.0.0.0")


def test_a_conversation_id_in_meta_names_the_audit_session(app: LookupApp) -> None:
    async def chat(conversation: str) -> None:
        async with Client(build_mcp_server(app), mode="legacy") as client:
            result = await client.call_tool(
                "lookup_knowledge", {"query": QUERY}, meta={CONVERSATION_META_KEY: conversation}
            )
            assert not result.is_error

    async def both() -> None:
        await chat("chat-a")
        await chat("chat-b")
        await chat("chat-a")

    anyio.run(both)
    sessions = _sessions(app)
    assert sessions == ["mcp-chat-a", "mcp-chat-b", "mcp-chat-a"]


def test_enforced_access_refuses_an_mcp_token_that_maps_to_no_principal(tmp_path: Path) -> None:
    built = create_app(
        overrides={
            "data-dir": str(tmp_path / "data"),
            "embedder.provider": "hashing",
            "search.backend": "memory",
            "access.mode": "enforced",
            "mcp.token": "s3cret-token",
        }
    )
    try:
        with pytest.raises(ConfigurationError, match=r"server\.principals"):
            mcp_http_app(built, token="s3cret-token")
    finally:
        built.close()


def test_the_http_transport_says_where_it_listens_on_stderr(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOOKUP_KNOWLEDGE_")}
    env["LOOKUP_KNOWLEDGE_EMBEDDER__PROVIDER"] = "hashing"
    command = [CLI, "--data-dir", str(tmp_path / "data"), "mcp", "--transport", "http"]
    server = subprocess.Popen(
        [*command, "--port", "0"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert server.stderr is not None
        ready, _, _ = select.select([server.stderr], [], [], 60)
        assert ready, "nothing on stderr within a minute"
        line = server.stderr.readline()
        found = re.search(r"(http://127\.0\.0\.1:\d+/mcp)\b", line)
        assert found, line
        url = found.group(1)

        async def tools() -> list[str]:
            async with Client(url, mode="legacy") as client:
                return [t.name for t in (await client.list_tools()).tools]

        assert anyio.run(tools) == ["lookup_knowledge", "check_answer"]
    finally:
        server.terminate()
        stdout, _ = server.communicate(timeout=30)
    assert stdout == ""


def test_stdio_writes_nothing_but_the_protocol_to_stdout(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOOKUP_KNOWLEDGE_")}
    env["LOOKUP_KNOWLEDGE_EMBEDDER__PROVIDER"] = "hashing"
    done = subprocess.run(
        [CLI, "--data-dir", str(tmp_path / "data"), "mcp"],
        stdin=subprocess.DEVNULL,  # the client hangs up at once
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
    assert "http://" not in done.stderr
