"""The MCP server over stdio, spoken to in raw JSON-RPC lines (what a buggy or hostile
client sends), on SQLite and PostgreSQL: every request with an id gets an answer (a
result, an ``isError`` result or a JSON-RPC error) within a bound, the server stays up,
and every tool call it answered is recorded once with exactly the ids it returned."""

from __future__ import annotations

import json
import queue
import subprocess
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from lookup_knowledge.adapters.api import create_app
from lookup_knowledge.application.ports import InvocationFilter
from tests.e2e.hostile.support import CLI, Backend, evidence_ids

#: An answer slower than this is a request the server dropped.
ANSWER_TIMEOUT_S = 60.0


class RawClient:
    """Writes JSON-RPC lines to ``lookup-knowledge mcp`` and collects its answers by id."""

    def __init__(self, backend: Backend) -> None:
        self.process = subprocess.Popen(
            [CLI, "mcp"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=backend.env(),
        )
        self._answers: dict[object, queue.Queue[dict[str, Any]]] = {}
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self._ids = iter(range(1000, 10**9))

    def _box(self, request_id: object) -> queue.Queue[dict[str, Any]]:
        key = json.dumps(request_id)
        with self._lock:
            return self._answers.setdefault(key, queue.Queue())

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            try:
                message = json.loads(line)
            except ValueError:
                continue
            if isinstance(message, dict) and "id" in message:
                self._box(message["id"]).put(message)

    def send_line(self, line: bytes) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line + b"\n")
        self.process.stdin.flush()

    def send(self, message: dict[str, Any]) -> None:
        self.send_line(json.dumps(message).encode())

    def answer(self, request_id: object, timeout: float = ANSWER_TIMEOUT_S) -> dict[str, Any]:
        try:
            return self._box(request_id).get(timeout=timeout)
        except queue.Empty:
            pytest.fail(f"no answer to request {request_id!r} within {timeout} s")

    def request(self, method: str, params: object = None) -> dict[str, Any]:
        request_id = next(self._ids)
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)
        return self.answer(request_id)

    def call(self, arguments: object, name: str = "lookup_knowledge") -> dict[str, Any]:
        return self.request("tools/call", {"name": name, "arguments": arguments})

    def alive(self) -> None:
        assert self.request("ping").get("result") == {}, "the server still answers"

    def close(self) -> str:
        assert self.process.stdin is not None
        self.process.stdin.close()
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        assert self.process.stderr is not None
        return self.process.stderr.read().decode(errors="replace")


@pytest.fixture(scope="module")
def mcp_backend(backend: Backend, tmp_path_factory: pytest.TempPathFactory) -> Backend:
    docs = tmp_path_factory.mktemp("mcp-docs")
    (docs / "failover.md").write_text(
        "# Failover\n\nPromote the standby with patronictl failover.\n", encoding="utf-8"
    )
    (docs / "billing.md").write_text("# Billing\n\nERR-429 means slow down.\n", encoding="utf-8")
    here = Backend(tmp_path_factory.mktemp("mcp-data"), backend.audit_url)
    with create_app(overrides=here.overrides()) as app:
        app.ingest([docs])
    return here


@pytest.fixture(scope="module")
def client(mcp_backend: Backend) -> Iterator[RawClient]:
    raw = RawClient(mcp_backend)
    hello = raw.request(
        "initialize",
        {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "hostile", "version": "0"},
        },
    )
    assert "result" in hello, hello
    raw.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    yield raw
    stderr = raw.close()
    assert "Traceback (most recent call last)" not in stderr, stderr


def _tool_json(answer: dict[str, Any]) -> dict[str, Any]:
    result = answer["result"]
    data = result.get("structuredContent") or json.loads(result["content"][0]["text"])
    assert isinstance(data, dict)
    return data


def _recorded_once(backend: Backend, payload: dict[str, Any]) -> None:
    """The server records a call before it answers it."""
    with backend.audit() as audit:
        detail = audit.get_invocation(payload["invocationId"])
        session = detail.summary.session_id
        page = audit.list_invocations(InvocationFilter(session_id=session, limit=1000))
        assert [i.id for i in page.items].count(payload["invocationId"]) == 1
        assert [e.document_id for e in detail.evidence] == evidence_ids(payload)


ANSWERED_CALLS: list[tuple[str, object]] = [
    ("plain", {"query": "how do I promote the standby"}),
    ("escape-sequences", {"query": "\x1b[31mfailover\x1b[0m"}),
    ("nul", {"query": "fail\x00over"}),
    ("empty", {"query": ""}),
    ("huge", {"query": "failover " * 20_000}),
    ("cjk", {"query": "数据库主从切换"}),
]


@pytest.mark.parametrize(("label", "arguments"), ANSWERED_CALLS, ids=[a[0] for a in ANSWERED_CALLS])
def test_a_tool_call_is_answered_and_recorded_once(
    client: RawClient, mcp_backend: Backend, label: str, arguments: object
) -> None:
    answer = client.call(arguments)
    assert "result" in answer, answer
    _recorded_once(mcp_backend, _tool_json(answer))
    client.alive()


def test_a_lone_surrogate_query_is_answered_and_recorded(
    client: RawClient, mcp_backend: Backend
) -> None:
    request_id = "surrogate-1"
    line = (
        '{"jsonrpc":"2.0","id":"surrogate-1","method":"tools/call","params":'
        '{"name":"lookup_knowledge","arguments":{"query":"fail \\ud800 over"}}}'
    )
    client.send_line(line.encode())
    answer = client.answer(request_id, timeout=20)
    assert "result" in answer or "error" in answer
    if "result" in answer and not answer["result"].get("isError"):
        _recorded_once(mcp_backend, _tool_json(answer))


REJECTED_CALLS: list[tuple[str, object, str]] = [
    ("no-arguments", {}, "tools/call"),
    ("query-int", {"query": 5}, "tools/call"),
    ("query-null", {"query": None}, "tools/call"),
    ("extra-argument", {"query": "x", "category": "ops"}, "tools/call"),
    ("arguments-a-list", ["failover"], "tools/call"),
]


@pytest.mark.parametrize(
    ("label", "arguments", "method"), REJECTED_CALLS, ids=[r[0] for r in REJECTED_CALLS]
)
def test_a_malformed_tool_call_gets_an_answer(
    client: RawClient, mcp_backend: Backend, label: str, arguments: object, method: str
) -> None:
    answer = client.call(arguments)
    assert "result" in answer or "error" in answer, answer
    if "result" in answer and not answer["result"].get("isError"):
        _recorded_once(mcp_backend, _tool_json(answer))
    client.alive()


def test_an_unknown_tool_gets_an_error(client: RawClient) -> None:
    answer = client.call({"query": "x"}, name="rm_rf")
    assert "error" in answer or answer["result"].get("isError"), answer
    client.alive()


def test_an_unknown_method_gets_method_not_found(client: RawClient) -> None:
    answer = client.request("tools/explode", {})
    assert answer["error"]["code"] == -32601, answer
    client.alive()


def test_tools_list_names_the_lookup_tool(client: RawClient) -> None:
    tools = client.request("tools/list", {})["result"]["tools"]
    assert "lookup_knowledge" in [t["name"] for t in tools]


def test_a_line_that_is_not_json_leaves_the_server_up(client: RawClient) -> None:
    client.send_line(b"{this is not json")
    client.send_line(b"\xff\xfe garbage bytes")
    client.alive()


ODD_REQUESTS: list[tuple[str, str, bytes]] = [
    ("id-without-method", "odd-1", b'{"jsonrpc":"2.0","id":"odd-1"}'),
    (
        "params-a-string",
        "odd-2",
        b'{"jsonrpc":"2.0","id":"odd-2","method":"tools/call","params":"x"}',
    ),
    (
        "params-deeply-nested",
        "odd-3",
        b'{"jsonrpc":"2.0","id":"odd-3","method":"tools/call","params":'
        + b'{"a":' * 5000
        + b"1"
        + b"}" * 5001,
    ),
]


@pytest.mark.parametrize(
    ("label", "request_id", "line"), ODD_REQUESTS, ids=[o[0] for o in ODD_REQUESTS]
)
def test_an_odd_request_with_an_id_gets_an_answer(
    client: RawClient, label: str, request_id: str, line: bytes
) -> None:
    client.send_line(line)
    answer = client.answer(request_id, timeout=20)
    assert "error" in answer or "result" in answer


def test_the_server_is_still_up_after_everything(client: RawClient) -> None:
    client.alive()
    answer = client.call({"query": "ERR-429"})
    assert "result" in answer
