"""MCP and access control: the principal comes from the server's configuration (stdio,
in-process) or, over HTTP, from the bearer token's entry in ``mcp.principals``; the
tool's input stays ``query`` alone."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import Client
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client

from lookup_knowledge.adapters.api import LookupApp, create_app
from lookup_knowledge.adapters.mcp_server import CONVERSATION_META_KEY, build_mcp_server
from lookup_knowledge.application.ports import InvocationFilter
from lookup_knowledge.application.tool import QUERY_SCHEMA
from tests.integration.test_mcp_http import _two_calls, serve  # noqa: F401 - fixture

ACME_TOKEN = "acme-token-1"
GLOBEX_TOKEN = "globex-token-2"


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def _corpus(root: Path, tenant: str) -> Path:
    folder = root / tenant / "kb"
    folder.mkdir(parents=True)
    (folder / "failover.md").write_text(
        f"# Database failover\n\nTo fail over the primary PostgreSQL database ({tenant}-marker) "
        "run pg_ctl promote on the replica.\n",
        encoding="utf-8",
    )
    return folder


@pytest.fixture
def app(tmp_path: Path) -> Iterator[LookupApp]:
    built = create_app(
        overrides={
            "data-dir": str(tmp_path / "data"),
            "embedder.provider": "hashing",
            "search.backend": "memory",
            "access.mode": "enforced",
            "mcp.tenant": "acme",
            "mcp.user": "stdio-user",
            "mcp.principals": {
                _digest(ACME_TOKEN): {"tenant": "acme", "user": "a"},
                _digest(GLOBEX_TOKEN): {"tenant": "globex", "user": "g", "groups": ["ops"]},
            },
        }
    )
    for tenant in ("acme", "globex"):
        built.ingest([_corpus(tmp_path, tenant)], tenant=tenant)
    yield built
    built.close()


def _records(app: LookupApp) -> list[Any]:
    app.flush()
    return list(app.audit.list_invocations(InvocationFilter(limit=100, traffic="all")).items)


QUERY = "how do I fail over the primary PostgreSQL database"


def test_the_tool_schema_has_no_principal_argument(app: LookupApp) -> None:
    async def listed() -> dict[str, Any]:
        async with Client(build_mcp_server(app), mode="legacy") as client:
            tools = await client.list_tools()
            return next(t.input_schema for t in tools.tools if t.name == "lookup_knowledge")

    schema = anyio.run(listed)
    assert set(schema["properties"]) == {"query"} == set(QUERY_SCHEMA["properties"])


def test_in_process_calls_run_for_the_configured_principal(app: LookupApp) -> None:
    async def call() -> dict[str, Any]:
        async with Client(build_mcp_server(app), mode="legacy") as client:
            result = await client.call_tool("lookup_knowledge", {"query": QUERY})
            assert result.structured_content is not None
            return dict(result.structured_content)

    payload = anyio.run(call)
    texts = [b["content"] for b in payload["evidenceBlocks"]]
    assert texts
    assert all("acme-marker" in t for t in texts)
    (record,) = _records(app)
    assert (record.principal_tenant, record.principal_user) == ("acme", "stdio-user")


def test_each_bearer_token_gets_its_principal(app: LookupApp, serve: Any) -> None:  # noqa: F811
    url = serve()
    for token, tenant in ((ACME_TOKEN, "acme"), (GLOBEX_TOKEN, "globex")):
        payloads = anyio.run(_two_calls, url, {"Authorization": f"Bearer {token}"})
        for payload in payloads:
            texts = [b["content"] for b in payload["evidenceBlocks"]]
            assert texts
            assert all(f"{tenant}-marker" in t for t in texts)
    tenants = [r.principal_tenant for r in _records(app)]
    assert sorted(tenants) == ["acme", "acme", "globex", "globex"]
    denied = httpx.post(
        url, headers={"Authorization": "Bearer unknown"}, json={"jsonrpc": "2.0"}, timeout=10
    )
    assert denied.status_code == 401


async def _call(
    url: str, token: str, tool: str, arguments: dict[str, Any], meta: dict[str, Any] | None
) -> Any:
    transport = streamable_http_client(
        url, http_client=create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    )
    async with Client(transport, mode="legacy") as client:  # type: ignore[arg-type]
        return await client.call_tool(tool, arguments, meta=meta)


def test_a_token_cannot_write_into_another_tokens_conversation(
    app: LookupApp,
    serve: Any,  # noqa: F811
) -> None:
    url = serve()
    meta = {CONVERSATION_META_KEY: "shared-chat"}
    first = anyio.run(_call, url, GLOBEX_TOKEN, "lookup_knowledge", {"query": QUERY}, meta)
    assert not first.is_error
    second = anyio.run(_call, url, ACME_TOKEN, "lookup_knowledge", {"query": QUERY}, meta)
    assert second.is_error
    assert "forbidden" in second.content[0].text
    records = _records(app)
    assert [(r.session_id, r.principal_tenant) for r in records] == [("mcp-shared-chat", "globex")]


def test_check_answer_in_another_tokens_conversation_is_no_oracle_on_its_text(
    app: LookupApp,
    serve: Any,  # noqa: F811
) -> None:
    url = serve()
    meta = {CONVERSATION_META_KEY: "globex-chat"}
    shown = anyio.run(_call, url, GLOBEX_TOKEN, "lookup_knowledge", {"query": QUERY}, meta)
    block = shown.structured_content["evidenceBlocks"][0]
    answer = (
        f"To fail over the primary PostgreSQL database (globex-marker) [{block['document_id']}]."
    )
    own = anyio.run(_call, url, GLOBEX_TOKEN, "check_answer", {"answer": answer}, meta)
    assert own.structured_content["verdict"] == "supported"
    other = anyio.run(_call, url, ACME_TOKEN, "check_answer", {"answer": answer}, meta)
    assert other.structured_content["verdict"] != "supported"
    assert [c["status"] for c in other.structured_content["claims"][0]["citations"]] == ["unknown"]


def test_a_principal_in_meta_is_refused_unless_the_token_is_a_trusted_hosts(
    app: LookupApp,
    serve: Any,  # noqa: F811
) -> None:
    url = serve()
    meta = {"lookup-knowledge/principal": {"tenant": "globex"}}
    refused = anyio.run(_call, url, ACME_TOKEN, "lookup_knowledge", {"query": QUERY}, meta)
    assert refused.is_error
    assert "forbidden" in refused.content[0].text
    assert _records(app) == []


@pytest.mark.parametrize("bad", ["x" * 300, "chat\x00nul", 7], ids=["long", "nul", "number"])
def test_a_bad_conversation_id_is_a_recorded_invalid_input(app: LookupApp, bad: object) -> None:
    async def call() -> Any:
        async with Client(build_mcp_server(app), mode="legacy") as client:
            return await client.call_tool(
                "lookup_knowledge", {"query": QUERY}, meta={CONVERSATION_META_KEY: bad}
            )

    result = anyio.run(call)
    assert result.is_error
    (record,) = _records(app)
    assert record.error_code == "invalid_input"
    assert record.session_id.startswith("mcp-")
    assert len(record.session_id) <= 255
