"""The MCP server, driven by the SDK's own client: in-process (both protocol eras the
SDK speaks) and for real over stdio in a subprocess. Every call must land in the audit
store under one ``mcp-…`` session per client session."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import anyio
import jsonschema
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.types import CallToolResult, TextContent

from lookup_knowledge.adapters.api import LookupApp, create_app
from lookup_knowledge.adapters.mcp_server import (
    CHECK_RESULT_SCHEMA,
    CHECK_TOOL_NAME,
    CONVERSATION_META_KEY,
    SESSION_PREFIX,
    _ConnectionSession,
    _session_and_step,
    build_mcp_server,
)
from lookup_knowledge.application.ports import InvocationFilter, InvocationSummary
from lookup_knowledge.application.tool import (
    QUERY_SCHEMA,
    RESULT_SCHEMA,
    TOOL_DESCRIPTION,
    TOOL_NAME,
)
from lookup_knowledge.domain.projection import expand_agent_blocks
from tests.support.payload import assert_names_only_returned_blocks

T = TypeVar("T")

DOCS = {
    "database/failover.md": (
        "# Database failover\n\n"
        "To fail over the primary PostgreSQL database, run `pg_ctl promote` on the replica "
        "and point the db-primary DNS record at it. Failover takes about two minutes.\n"
    ),
    "network/vpn.md": (
        "# VPN access\n\n"
        "Request VPN access through the IT portal. Approval takes one business day; "
        "the VPN client profile is mailed to you afterwards.\n"
    ),
    "billing/refunds.md": (
        "# Refund policy\n\n"
        "Refunds are issued within 14 days to the original card. Partial refunds need "
        "a manager's approval.\n"
    ),
}

FAILOVER_QUERY = "how do I fail over the primary PostgreSQL database"
VPN_QUERY = "how do I request VPN access"

# "auto" is the SDK client's default (the 2026-07-28 per-request protocol in-process);
# "legacy" is the initialize handshake every 1.x client (and most hosts today) speak.
MODES = ("auto", "legacy")


def _run(fn: Callable[[], Awaitable[T]]) -> T:
    return anyio.run(fn)


def _write_corpus(folder: Path) -> Path:
    for relative, text in DOCS.items():
        path = folder / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return folder


@pytest.fixture
def app(tmp_path: Path) -> Iterator[LookupApp]:
    corpus = _write_corpus(tmp_path / "corpus")
    built = create_app(
        overrides={
            "data-dir": str(tmp_path / "data"),
            "embedder.provider": "hashing",
            "search.backend": "memory",
        }
    )
    try:
        report = built.ingest([corpus], root=corpus)
        assert report.added == len(DOCS)
        assert not report.failures
        yield built
    finally:
        built.close()


def _payload(result: CallToolResult, *, is_error: bool = False) -> dict[str, Any]:
    """The tool JSON, sent once as structuredContent (valid against the declared output
    schema); the text block names the message and every citable id, and no excerpt."""
    assert result.is_error is is_error, result.content
    assert result.structured_content is not None
    payload = dict(result.structured_content)
    jsonschema.validate(payload, RESULT_SCHEMA)
    assert len(result.content) == 1
    block = result.content[0]
    assert isinstance(block, TextContent)
    assert payload["message"] in block.text
    for evidence in payload["evidenceBlocks"]:
        assert evidence["document_id"] in block.text
        assert evidence["content"] not in block.text
    # Each id with where it is from, also for a block that leaves it to an earlier one.
    for shown in expand_agent_blocks(payload["evidenceBlocks"]):
        where = shown.get("title") or shown.get("breadcrumb") or shown.get("source")
        assert f"- {shown['document_id']} ({where})" in block.text
    assert_names_only_returned_blocks(payload)
    return payload


def _returned_ids(payload: dict[str, Any]) -> list[str]:
    return [block["document_id"] for block in payload["evidenceBlocks"]]


def _invocation(app: LookupApp, invocation_id: str) -> InvocationSummary:
    assert app.flush(timeout_s=30.0)
    return app.audit.get_invocation(invocation_id).summary


def _session_rows(app: LookupApp, session_id: str) -> list[InvocationSummary]:
    assert app.flush(timeout_s=30.0)
    return list(app.audit.list_invocations(InvocationFilter(session_id=session_id)).items)


def _shown_ids(app: LookupApp, invocation_id: str) -> list[str]:
    evidence = app.audit.get_invocation(invocation_id).evidence
    return [e.document_id for e in sorted(evidence, key=lambda e: e.rank) if e.projected]


# ------------------------------------------------------------------ in-process


@pytest.mark.parametrize("mode", MODES)
def test_lists_the_lookup_tool_with_the_shared_schema_and_the_checker(
    app: LookupApp, mode: str
) -> None:
    async def scenario() -> list[Any]:
        async with Client(build_mcp_server(app), mode=mode) as client:
            return list((await client.list_tools()).tools)

    tools = _run(scenario)

    assert [t.name for t in tools] == [TOOL_NAME, CHECK_TOOL_NAME]
    tool, checker = tools
    assert checker.input_schema["required"] == ["answer"]
    assert tool.description == TOOL_DESCRIPTION
    assert tool.input_schema == QUERY_SCHEMA
    assert tool.input_schema["required"] == ["query"]
    assert tool.input_schema["properties"]["query"]["type"] == "string"
    assert tool.output_schema == RESULT_SCHEMA  # the structured result is declared
    assert tool.annotations is not None
    assert tool.annotations.read_only_hint is True


@pytest.mark.parametrize("mode", MODES)
def test_call_returns_the_tool_json_and_is_recorded(app: LookupApp, mode: str) -> None:
    async def scenario() -> CallToolResult:
        async with Client(build_mcp_server(app), mode=mode) as client:
            return await client.call_tool(TOOL_NAME, {"query": FAILOVER_QUERY})

    payload = _payload(_run(scenario))

    assert payload["found"] is True
    ids = _returned_ids(payload)
    assert ids
    assert ids[0].startswith("corpus/database/failover.md")
    assert set(payload) >= {"contextPack", "message", "relevanceLevel", "invocationId"}

    summary = _invocation(app, payload["invocationId"])
    assert summary.session_id.startswith(SESSION_PREFIX)
    assert len(summary.session_id) > len(SESSION_PREFIX)
    assert summary.tool_name == TOOL_NAME
    assert summary.query == FAILOVER_QUERY
    assert summary.tool_call_id  # the MCP request id

    rows = _session_rows(app, summary.session_id)
    assert [r.id for r in rows] == [payload["invocationId"]]
    assert rows[0].status == "ok"
    assert rows[0].seq == 1
    assert rows[0].step_id == "1"
    assert rows[0].returned_count == len(ids)
    assert _shown_ids(app, payload["invocationId"]) == ids
    # The citation check accepts what the tool returned in that session, and only that.
    report = app.verify_citations(summary.session_id, [*ids, "billing/nope.md#chunk-9"])
    assert list(report.valid_ids) == ids
    assert list(report.unknown) == ["billing/nope.md#chunk-9"]


@pytest.mark.parametrize("mode", MODES)
def test_one_client_session_is_one_audit_session(app: LookupApp, mode: str) -> None:
    server = build_mcp_server(app)

    async def scenario() -> tuple[list[dict[str, Any]], dict[str, Any]]:
        async with Client(server, mode=mode) as first:
            a = _payload(await first.call_tool(TOOL_NAME, {"query": FAILOVER_QUERY}))
            b = _payload(await first.call_tool(TOOL_NAME, {"query": VPN_QUERY}))
        async with Client(server, mode=mode) as second:
            c = _payload(await second.call_tool(TOOL_NAME, {"query": VPN_QUERY}))
        return [a, b], c

    (a, b), c = _run(scenario)

    first_session = _invocation(app, a["invocationId"]).session_id
    assert _invocation(app, b["invocationId"]).session_id == first_session
    rows = _session_rows(app, first_session)
    assert [r.id for r in rows] == [a["invocationId"], b["invocationId"]]
    assert [r.seq for r in rows] == [1, 2]
    assert [r.step_id for r in rows] == ["1", "2"]
    assert [r.query for r in rows] == [FAILOVER_QUERY, VPN_QUERY]
    assert all(r.status == "ok" for r in rows)
    # The session remembers the domains it retrieved across the two calls.
    assert set(b["retrievedDomainsThisSession"]) >= set(a["retrievedDomainsThisSession"])

    second_session = _invocation(app, c["invocationId"]).session_id
    assert second_session.startswith(SESSION_PREFIX)
    assert second_session != first_session
    second_rows = _session_rows(app, second_session)
    assert [(r.id, r.seq, r.step_id) for r in second_rows] == [(c["invocationId"], 1, "1")]


@pytest.mark.parametrize("mode", MODES)
def test_empty_query_is_a_recorded_error_result_and_the_server_keeps_serving(
    app: LookupApp, mode: str
) -> None:
    async def scenario() -> tuple[dict[str, Any], dict[str, Any]]:
        async with Client(build_mcp_server(app), mode=mode) as client:
            empty = _payload(await client.call_tool(TOOL_NAME, {"query": "   "}), is_error=True)
            after = _payload(await client.call_tool(TOOL_NAME, {"query": FAILOVER_QUERY}))
        return empty, after

    empty, after = _run(scenario)

    assert empty["found"] is False
    assert empty["evidenceBlocks"] == []
    assert "invalid_input" in empty["message"]
    assert after["found"] is True

    session_id = _invocation(app, empty["invocationId"]).session_id
    rows = _session_rows(app, session_id)
    assert [(r.id, r.seq, r.status) for r in rows] == [
        (empty["invocationId"], 1, "error"),
        (after["invocationId"], 2, "ok"),
    ]
    assert rows[0].error_code == "invalid_input"


@pytest.mark.parametrize("mode", MODES)
def test_malformed_arguments_are_error_results_not_a_crash(app: LookupApp, mode: str) -> None:
    async def scenario() -> tuple[list[CallToolResult], dict[str, Any]]:
        async with Client(build_mcp_server(app), mode=mode) as client:
            bad = [
                await client.call_tool(TOOL_NAME, {}),
                await client.call_tool(TOOL_NAME, {"query": 42}),
                await client.call_tool(TOOL_NAME, {"query": ["a", "b"]}),
            ]
            good = _payload(await client.call_tool(TOOL_NAME, {"query": VPN_QUERY}))
        return bad, good

    bad, good = _run(scenario)

    for result in bad:
        assert result.is_error is True
        assert isinstance(result.content[0], TextContent)
        assert "query" in result.content[0].text
    assert good["found"] is True
    # Nothing reached the lookup for the malformed calls: the good call is the session's first.
    summary = _invocation(app, good["invocationId"])
    assert (summary.seq, summary.step_id) == (1, "1")
    assert len(_session_rows(app, summary.session_id)) == 1


@pytest.mark.parametrize("mode", MODES)
def test_an_argument_the_schema_does_not_declare_is_a_tool_error(app: LookupApp, mode: str) -> None:
    async def scenario() -> tuple[list[Any], list[CallToolResult], dict[str, Any]]:
        async with Client(build_mcp_server(app), mode=mode) as client:
            tools = list((await client.list_tools()).tools)
            bad = [
                await client.call_tool(TOOL_NAME, {"query": VPN_QUERY, "top_k": 50}),
                await client.call_tool(CHECK_TOOL_NAME, {"answer": "x", "session_id": "other"}),
            ]
            good = _payload(await client.call_tool(TOOL_NAME, {"query": VPN_QUERY}))
        return tools, bad, good

    tools, bad, good = _run(scenario)

    for tool in tools:  # declared ...
        assert tool.input_schema["additionalProperties"] is False, tool.name
    for result, extra in zip(bad, ("top_k", "session_id"), strict=True):  # ... and enforced
        assert result.is_error is True
        assert isinstance(result.content[0], TextContent)
        assert extra in result.content[0].text
    # The refused lookup never ran: the good call is the session's first.
    summary = _invocation(app, good["invocationId"])
    assert (summary.seq, summary.step_id) == (1, "1")


@pytest.mark.parametrize("mode", MODES)
def test_check_answer_declares_the_structured_result_it_returns(app: LookupApp, mode: str) -> None:
    async def scenario() -> tuple[Any, CallToolResult]:
        async with Client(build_mcp_server(app), mode=mode) as client:
            checker = (await client.list_tools()).tools[1]
            found = _payload(await client.call_tool(TOOL_NAME, {"query": FAILOVER_QUERY}))
            answer = f"Failover takes about two minutes [{_returned_ids(found)[0]}]."
            # The SDK client validates structured content against the declared schema.
            return checker, await client.call_tool(CHECK_TOOL_NAME, {"answer": answer})

    checker, result = _run(scenario)

    assert checker.name == CHECK_TOOL_NAME
    assert checker.output_schema == CHECK_RESULT_SCHEMA
    verdicts = _verdicts(result)
    jsonschema.validate(verdicts, CHECK_RESULT_SCHEMA)
    assert verdicts["verdict"] == "supported"
    assert verdicts["claims"][0]["support"] is not None


def test_session_rules_per_transport() -> None:
    connection = _ConnectionSession()
    other = _ConnectionSession()
    assert connection.session_id.startswith(SESSION_PREFIX)
    assert connection.session_id != other.session_id

    # stdio / in-process: no headers -> the served connection's session and its counter.
    assert _session_and_step(None, connection, "7") == (connection.session_id, "1")
    assert _session_and_step(None, connection, "9") == (connection.session_id, "2")
    assert _session_and_step(None, other, "7") == (other.session_id, "1")

    # Stateful streamable HTTP: the transport's session id (header names are case-blind).
    assert _session_and_step({"Mcp-Session-Id": "abc123"}, connection, "5") == ("mcp-abc123", "5")
    assert _session_and_step({"mcp-session-id": "abc123"}, other, "6") == ("mcp-abc123", "6")

    # Stateless HTTP: no session exists, so no two calls share one.
    first, _ = _session_and_step({"content-type": "application/json"}, connection, "1")
    second, _ = _session_and_step({"content-type": "application/json"}, connection, "1")
    assert first.startswith(SESSION_PREFIX)
    assert first != second != connection.session_id
    # ... and the connection's own counter was not consumed by the HTTP calls.
    assert _session_and_step(None, connection, "10") == (connection.session_id, "3")


# ------------------------------------------------------------------ stdio subprocess


# Milvus Lite keeps its data directory locked until the process that opened it exits, so
# the index is filled in a child process of its own, then served by another.
_FILL = """
import sys
from lookup_knowledge import create_app
data_dir, corpus = sys.argv[1], sys.argv[2]
overrides = {"data-dir": data_dir, "embedder.provider": "hashing"}
with create_app(overrides=overrides) as app:
    assert app.settings.search.backend.value == "milvus", app.settings.search.backend
    report = app.ingest([corpus], root=corpus)
    assert not report.failures, report.failures
    print(report.added)
"""


@pytest.mark.parametrize("mode", MODES)
def test_serve_stdio_in_a_subprocess_records_one_session(tmp_path: Path, mode: str) -> None:
    """``python -m lookup_knowledge.adapters.mcp_server`` (what ``lookup-knowledge mcp``
    runs) over real pipes, on a Milvus Lite file and a SQLite audit file."""
    data_dir = tmp_path / "data"
    corpus = _write_corpus(tmp_path / "corpus")
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOOKUP_KNOWLEDGE_")}
    filled = subprocess.run(
        [sys.executable, "-c", _FILL, str(data_dir), str(corpus)],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert filled.returncode == 0, filled.stderr[-4000:]
    assert filled.stdout.split()[-1] == str(len(DOCS))
    assert (data_dir / "milvus.db").exists()

    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "lookup_knowledge.adapters.mcp_server"],
        env={
            "LOOKUP_KNOWLEDGE_DATA_DIR": str(data_dir),
            "LOOKUP_KNOWLEDGE_EMBEDDER__PROVIDER": "hashing",
        },
        cwd=str(tmp_path),
    )

    async def scenario() -> tuple[list[str], dict[str, Any], dict[str, Any]]:
        async with Client(params, mode=mode) as client:
            names = [t.name for t in (await client.list_tools()).tools]
            a = _payload(await client.call_tool(TOOL_NAME, {"query": FAILOVER_QUERY}))
            b = _payload(await client.call_tool(TOOL_NAME, {"query": VPN_QUERY}))
        return names, a, b

    names, a, b = _run(scenario)

    assert names == [TOOL_NAME, CHECK_TOOL_NAME]
    assert a["found"] is True, a["message"]
    assert _returned_ids(a)[0].startswith("corpus/database/failover.md")
    assert b["found"] is True, b["message"]

    # The server process has exited; its records are in the SQLite audit file under the
    # data directory (read here without opening Milvus: the audit needs no index).
    reader_overrides = {
        "data-dir": str(data_dir),
        "embedder.provider": "hashing",
        "search.backend": "memory",
    }
    with create_app(overrides=reader_overrides) as reader:
        session_id = _invocation(reader, a["invocationId"]).session_id
        assert session_id.startswith(SESSION_PREFIX)
        rows = _session_rows(reader, session_id)
        assert [r.id for r in rows] == [a["invocationId"], b["invocationId"]]
        assert [(r.seq, r.step_id, r.status) for r in rows] == [(1, "1", "ok"), (2, "2", "ok")]
        assert _shown_ids(reader, a["invocationId"]) == _returned_ids(a)
        assert _shown_ids(reader, b["invocationId"]) == _returned_ids(b)


def _verdicts(result: CallToolResult, *, is_error: bool = False) -> dict[str, Any]:
    """check_answer's JSON: the structured content, and the same as the text block."""
    assert result.is_error is is_error, result.content
    assert result.structured_content is not None
    (block,) = result.content
    assert isinstance(block, TextContent)
    assert json.loads(block.text) == result.structured_content
    return dict(result.structured_content)


@pytest.mark.parametrize("mode", MODES)
def test_check_answer_judges_claims_against_what_this_mcp_session_was_shown(
    app: LookupApp, mode: str
) -> None:
    async def scenario() -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
        async with Client(build_mcp_server(app), mode=mode) as client:
            found = _payload(await client.call_tool(TOOL_NAME, {"query": FAILOVER_QUERY}))
            cited = _returned_ids(found)[0]
            good = _verdicts(
                await client.call_tool(
                    CHECK_TOOL_NAME,
                    {"answer": f"Failover takes about two minutes [{cited}]."},
                )
            )
            bad = _verdicts(
                await client.call_tool(
                    CHECK_TOOL_NAME,
                    {"answer": f"Failover takes about five minutes [{cited}]."},
                )
            )
        return found, good, bad

    found, good, bad = _run(scenario)

    assert _returned_ids(found)[0].startswith("corpus/database/failover.md")
    assert good["verdict"] == "supported", good
    assert bad["verdict"] == "unsupported", bad
    assert any("five minutes" in r for r in bad["claims"][0]["reasons"])
    # the aligned span is published; no judge is configured here
    span = good["claims"][0]["span"]
    assert span["document_id"] == _returned_ids(found)[0]
    assert span["end"] > span["start"]
    assert good["claims"][0]["judge"] is None
    # Both checks are recorded under the MCP session of the lookup.
    (invocation,) = _session_rows(app, good["sessionId"])
    assert invocation.session_id == bad["sessionId"]
    assert invocation.session_id.startswith(SESSION_PREFIX)


def test_check_answer_uses_the_conversation_named_in_meta(app: LookupApp) -> None:
    meta = {CONVERSATION_META_KEY: "chat-c"}

    async def scenario() -> tuple[str, dict[str, Any], dict[str, Any]]:
        async with Client(build_mcp_server(app), mode="legacy") as client:
            found = _payload(await client.call_tool(TOOL_NAME, {"query": VPN_QUERY}, meta=meta))
            cited = _returned_ids(found)[0]
            answer = {"answer": f"Approval takes one business day [{cited}]."}
            same = _verdicts(await client.call_tool(CHECK_TOOL_NAME, answer, meta=meta))
        async with Client(build_mcp_server(app), mode="legacy") as other:
            elsewhere = _verdicts(await other.call_tool(CHECK_TOOL_NAME, answer))
        return cited, same, elsewhere

    cited, same, elsewhere = _run(scenario)
    assert same["sessionId"] == "mcp-chat-c"
    assert same["verdict"] == "supported", same
    # another MCP session was not shown the block: its citation is not_in_session
    assert elsewhere["verdict"] == "invalid_citation"
    assert elsewhere["claims"][0]["citations"] == [
        {"document_id": cited, "status": "not_in_session"}
    ]
