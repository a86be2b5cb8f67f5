"""The MCP server answers every request, through a real stdio
subprocess fed raw JSON-RPC lines (each read bounded by a timeout): a query with a lone
surrogate is answered and recorded; an id without a method, string params, deep nesting
and non-JSON get a JSON-RPC error with the request's id."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lookup_knowledge import create_app
from lookup_knowledge.adapters.mcp_wire import MAX_DEPTH, check_line
from lookup_knowledge.application.ports import InvocationFilter

pytestmark = pytest.mark.slow
TIMEOUT_S = 60.0


class Wire:
    def __init__(self, data_dir: Path) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("LOOKUP_KNOWLEDGE_")}
        env.update(
            LOOKUP_KNOWLEDGE_DATA_DIR=str(data_dir),
            LOOKUP_KNOWLEDGE_SEARCH__BACKEND="memory",
            LOOKUP_KNOWLEDGE_EMBEDDER__PROVIDER="hashing",
        )
        self.process = subprocess.Popen(
            [sys.executable, "-m", "lookup_knowledge.adapters.mcp_server"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
        )

    def send(self, line: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line.encode("utf-8") + b"\n")
        self.process.stdin.flush()

    def receive(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        ready, _, _ = select.select([self.process.stdout], [], [], TIMEOUT_S)
        assert ready, "no reply within the timeout (the server went silent)"
        reply: dict[str, Any] = json.loads(self.process.stdout.readline())
        return reply

    def ask(self, line: str) -> dict[str, Any]:
        self.send(line)
        return self.receive()

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        try:
            self.process.wait(timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


@pytest.fixture
def wire(tmp_path: Path) -> Iterator[Wire]:
    server = Wire(tmp_path / "data")
    try:
        init = server.ask(
            json.dumps(
                {
                    "jsonrpc": "2.0",
                    "id": 0,
                    "method": "initialize",
                    "params": {
                        "protocolVersion": "2025-06-18",
                        "capabilities": {},
                        "clientInfo": {"name": "hostile", "version": "1"},
                    },
                }
            )
        )
        assert init["id"] == 0
        assert "result" in init
        server.send(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        yield server
    finally:
        server.close()


def _call(request_id: int, query_json: str) -> str:
    return (
        f'{{"jsonrpc":"2.0","id":{request_id},"method":"tools/call","params":'
        f'{{"name":"lookup_knowledge","arguments":{{"query":{query_json}}}}}}}'
    )


def test_lone_surrogate_query_is_answered_and_recorded(wire: Wire, tmp_path: Path) -> None:
    reply = wire.ask(_call(7, r'"restart \ud800 the pool"'))
    assert reply["id"] == 7
    result = reply["result"]
    tool_json = result["structuredContent"]
    assert "found" in tool_json
    invocation_id = tool_json["invocationId"]
    wire.close()
    with create_app(
        overrides={
            "data-dir": str(tmp_path / "data"),
            "search.backend": "memory",
            "embedder.provider": "hashing",
        }
    ) as app:
        assert app.flush(timeout_s=30)
        items = app.audit.list_invocations(InvocationFilter(limit=10)).items
    assert [i.id for i in items] == [invocation_id]
    assert items[0].query == "restart \ufffd the pool"


@pytest.mark.parametrize(
    ("line", "code"),
    [
        ('{"jsonrpc":"2.0","id":11}', -32600),
        ('{"jsonrpc":"2.0","id":12,"method":"tools/list","params":"x"}', -32602),
        ('{"jsonrpc":"2.0","id":13,"method":"tools/call","params":[1,2]}', -32602),
        (
            '{"jsonrpc":"2.0","id":14,"method":"tools/call","params":'
            + '{"a":' * 5000
            + "1"
            + "}" * 5000
            + "}",
            -32600,
        ),
        ('{"jsonrpc":"2.0","id":15,"method":"tools/call","params":{"name":', -32700),
        ('{"jsonrpc":"2.0","id":16,"method":7}', -32600),
        ('{"jsonrpc":"1.0","id":17,"method":"tools/list"}', -32600),
    ],
    ids=["no-method", "string-params", "list-params", "deep", "cut", "method-number", "v1"],
)
def test_malformed_requests_get_a_json_rpc_error(wire: Wire, line: str, code: int) -> None:
    reply = wire.ask(line)
    expected_id = int(line.split('"id":', 1)[1].split(",", 1)[0].split("}", 1)[0])
    assert reply["id"] == expected_id
    assert reply["error"]["code"] == code
    # ... and the server still answers what follows.
    after = wire.ask('{"jsonrpc":"2.0","id":99,"method":"tools/list"}')
    assert after["id"] == 99
    assert "result" in after


def test_wire_checks_without_a_process() -> None:
    assert check_line("   ") == (None, None)
    forward, error = check_line('{"jsonrpc":"2.0","method":"notifications/x","params":"s"}')
    assert (forward, error) == (None, None)  # a notification: nobody to answer
    forward, error = check_line("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1))
    assert forward is None
    assert error is not None
    assert error.request_id is None
