"""Text no store can hold (a NUL, a lone UTF-16 surrogate) sent to ``serve``'s REST
routes, console pages and MCP tools, on SQLite and PostgreSQL: each request is answered
with a client error (problem+json on the API, an HTML page on the console) or, for a
lookup's query text (cleaned as the tool documents), answered and recorded once; never a
server error."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import anyio
import pytest
from fastapi.testclient import TestClient
from mcp import Client

from lookup_knowledge.adapters.api import LookupApp, create_app
from lookup_knowledge.adapters.http import create_http_app
from lookup_knowledge.adapters.mcp_server import CHECK_TOOL_NAME, build_mcp_server
from lookup_knowledge.application.tool import TOOL_NAME
from tests.e2e.hostile.support import Backend, assert_recorded_once, evidence_ids, session_id
from tests.e2e.hostile.test_cli_lookups import DOCS
from tests.support.http import LOCAL

PROBLEM = "application/problem+json"
BAD = {"nul": "\x00", "surrogate": "\ud800"}
#: The same characters as a URL carries them (a surrogate cannot be percent-encoded
#: UTF-8: its bytes decode to U+FFFD, which must be harmless too).
BAD_IN_URL = {"nul": "%00", "surrogate": "%ED%A0%80"}
SESSION = "hostile-http-text"


@pytest.fixture(scope="module")
def app(backend: Backend, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LookupApp]:
    docs = tmp_path_factory.mktemp("http-docs")
    for relative, text in DOCS.items():
        (docs / relative).parent.mkdir(parents=True, exist_ok=True)
        (docs / relative).write_text(text, encoding="utf-8")
    with create_app(overrides={**backend.overrides(), "search.backend": "memory"}) as built:
        built.ingest([docs])
        built.lookup("promote the standby during failover", session_id=SESSION, step_id="1")
        assert built.flush(SESSION, timeout_s=30)
        yield built


@pytest.fixture(scope="module")
def client(app: LookupApp) -> TestClient:
    return TestClient(create_http_app(app), base_url=LOCAL)


def _post(client: TestClient, path: str, body: dict[str, Any]) -> Any:
    """JSON as a client would send it: ``\\ud800`` escaped (``json.dumps`` default)."""
    return client.post(path, content=json.dumps(body), headers={"content-type": "application/json"})


def _client_error(response: Any) -> None:
    assert 400 <= response.status_code < 500, (response.status_code, response.text)


# (label, path, body with {bad} where the text goes)
BODIES: list[tuple[str, str, dict[str, Any]]] = [
    ("verify-session", "/v1/verify", {"session_id": "s{bad}", "document_ids": ["a#chunk-0"]}),
    ("verify-document-id", "/v1/verify", {"session_id": SESSION, "document_ids": ["a{bad}"]}),
    (
        "verify-group",
        "/v1/verify",
        {"session_id": SESSION, "document_ids": ["a#chunk-0"], "groups": ["g{bad}"]},
    ),
    ("check-session", "/v1/check-answer", {"session_id": "s{bad}", "answer": "Fine [a#chunk-0]."}),
    (
        "check-answer-text",
        "/v1/check-answer",
        {"session_id": SESSION, "answer": "Promote it {bad} [a#chunk-0]."},
    ),
    (
        "check-answer-blocks",
        "/v1/check-answer",
        {"session_id": SESSION, "answer": [{"type": "text", "text": "Promote {bad}"}]},
    ),
    (
        "check-step",
        "/v1/check-answer",
        {"session_id": SESSION, "answer": "Promote it.", "step_id": "s{bad}"},
    ),
    ("lookup-session", "/v1/lookup", {"query": "failover", "session_id": "s{bad}"}),
    ("lookup-step", "/v1/lookup", {"query": "failover", "session_id": "s", "step_id": "{bad}"}),
    (
        "lookup-category",
        "/v1/lookup",
        {"query": "failover", "session_id": "s", "category": "{bad}"},
    ),
    (
        "lookup-tool-call",
        "/v1/lookup",
        {"query": "failover", "session_id": "s", "tool_call_id": "t{bad}"},
    ),
    (
        "lookup-principal",
        "/v1/lookup",
        {"query": "failover", "session_id": "s", "principal": {"tenant": "t{bad}"}},
    ),
]


def _fill(value: Any, bad: str) -> Any:
    if isinstance(value, str):
        return value.replace("{bad}", bad)
    if isinstance(value, dict):
        return {k: _fill(v, bad) for k, v in value.items()}
    if isinstance(value, list):
        return [_fill(v, bad) for v in value]
    return value


@pytest.mark.parametrize("kind", sorted(BAD))
@pytest.mark.parametrize(("label", "path", "body"), BODIES, ids=[b[0] for b in BODIES])
def test_bad_text_in_a_request_body_is_a_client_error(
    client: TestClient, label: str, path: str, body: dict[str, Any], kind: str
) -> None:
    response = _post(client, path, _fill(body, BAD[kind]))
    _client_error(response)
    assert response.headers["content-type"] == PROBLEM
    assert response.json()["code"] in ("invalid_input", "forbidden")


@pytest.mark.parametrize("kind", sorted(BAD))
def test_bad_text_in_a_lookup_query_is_cleaned_answered_and_recorded(
    client: TestClient, app: LookupApp, kind: str
) -> None:
    session = session_id(f"http-query-{kind}")
    response = _post(
        client, "/v1/lookup", {"query": f"failover {BAD[kind]} standby", "session_id": session}
    )
    assert response.status_code == 200, response.text
    payload = response.json()
    assert app.flush(session, timeout_s=30)
    assert_recorded_once(app.audit, session, payload["invocationId"], evidence_ids(payload))


# (label, path with {bad}): audit reads and console pages.
URLS: list[tuple[str, str]] = [
    ("invocations-session", "/v1/invocations?session={bad}"),
    ("invocations-step", "/v1/invocations?step={bad}"),
    ("sessions-q", "/v1/sessions?q={bad}"),
    ("invocation-id", "/v1/invocations/{bad}"),
    ("console-q", "/?q={bad}"),
    ("console-status", "/?status={bad}"),
    ("console-since", "/?since={bad}"),
    ("console-session", "/sessions/{bad}"),
    ("console-export-jsonl", "/sessions/{bad}/export.jsonl"),
    ("console-export-csv", "/sessions/{bad}/export.csv"),
    ("console-invocation", "/invocations/{bad}"),
    ("console-quality", "/quality?until={bad}"),
]


@pytest.mark.parametrize("kind", sorted(BAD_IN_URL))
@pytest.mark.parametrize(("label", "path"), URLS, ids=[u[0] for u in URLS])
def test_bad_text_in_a_url_is_never_a_server_error(
    client: TestClient, label: str, path: str, kind: str
) -> None:
    response = client.get(path.replace("{bad}", BAD_IN_URL[kind]))
    assert response.status_code < 500, (response.status_code, response.text[:300])
    if kind == "nul" and "{bad}" in path.split("?")[-1] and "?" in path:
        _client_error(response)  # a NUL filter is refused, not searched for


def test_a_nul_in_the_console_search_is_an_input_error_page(client: TestClient) -> None:
    response = client.get("/?q=%00")
    assert response.status_code == 400, response.text[:300]
    assert "text/html" in response.headers["content-type"]
    assert "Invalid input" in response.text


@pytest.mark.parametrize("kind", sorted(BAD))
def test_bad_text_in_mcp_tool_arguments_is_a_tool_result_not_a_crash(
    app: LookupApp, kind: str
) -> None:
    bad = BAD[kind]

    async def scenario() -> tuple[Any, Any]:
        async with Client(build_mcp_server(app), mode="legacy") as mcp:
            looked = await mcp.call_tool(TOOL_NAME, {"query": f"failover {bad}"})
            checked = await mcp.call_tool(CHECK_TOOL_NAME, {"answer": f"Promote {bad} [x#c]."})
            return looked, checked

    looked, checked = anyio.run(scenario)
    assert not looked.is_error, looked.content
    assert looked.structured_content is not None
    assert checked.is_error
    assert checked.structured_content == {
        "error": "invalid_input",
        "message": checked.structured_content["message"],
    }
