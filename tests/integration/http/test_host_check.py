"""DNS rebinding: every route of ``serve`` (REST, console, ``/mcp``, probes) answers
only requests for a name it is: the loopback names, its bind address and the names in
``server.allowed-hosts``. A foreign Host header gets 421 before any route runs."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from fastapi.testclient import TestClient

from lookup_knowledge.adapters.api import LookupApp
from lookup_knowledge.adapters.config import load_settings
from lookup_knowledge.adapters.http import create_http_app
from lookup_knowledge.adapters.http.hosts import host_name
from tests.support.http import LOCAL, sample_app, served

PROBLEM = "application/problem+json"
LOOKUP = {"query": "PG-53300 too many connections", "session_id": "hosts-1"}
PING = {"jsonrpc": "2.0", "id": 1, "method": "ping"}


@pytest.fixture(scope="module")
def lookup_app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LookupApp]:
    app = sample_app(tmp_path_factory.mktemp("hosts") / "data")
    app.lookup("PG-53300 too many connections", session_id="hosts-0", step_id="1")
    yield app
    app.close()


@pytest.fixture(scope="module")
def client(lookup_app: LookupApp) -> TestClient:
    return TestClient(create_http_app(lookup_app), base_url=LOCAL)


ROUTES = [
    ("GET", "/v1/sessions"),
    ("GET", "/v1/invocations"),
    ("GET", "/v1/stats"),
    ("POST", "/v1/lookup"),
    ("POST", "/v1/verify"),
    ("GET", "/"),
    ("GET", "/quality"),
    ("GET", "/login"),
    ("POST", "/login"),
    ("GET", "/sessions/hosts-0/export.jsonl"),
    ("GET", "/healthz"),
    ("GET", "/readyz"),
    ("GET", "/openapi.json"),
    ("POST", "/mcp"),
]
FOREIGN = [
    "attacker.example",
    "attacker.example:8787",
    "localhost.attacker.example",
    "127.0.0.1.nip.io",
    "10.0.0.7:8787",
    "",
]


def _send(client: TestClient, method: str, path: str, host: str) -> httpx.Response:
    headers = {"host": host}
    if method == "GET":
        return client.get(path, headers=headers)
    body = LOOKUP if path == "/v1/lookup" else PING if path == "/mcp" else {}
    return client.post(path, json=body, headers=headers)


@pytest.mark.parametrize("host", FOREIGN, ids=[h or "empty" for h in FOREIGN])
@pytest.mark.parametrize(("method", "path"), ROUTES, ids=[f"{m} {p}" for m, p in ROUTES])
def test_a_foreign_host_is_refused_on_every_route(
    client: TestClient, method: str, path: str, host: str
) -> None:
    response = _send(client, method, path, host)
    assert response.status_code in (400, 421), (response.status_code, response.text[:200])
    assert response.headers["content-type"] == PROBLEM
    assert "PG-53300" not in response.text  # nothing stored is in the answer


@pytest.mark.parametrize(
    "host",
    ["localhost", "localhost:8787", "127.0.0.1:8787", "[::1]:8787", "127.0.0.2", "LOCALHOST."],
)
def test_loopback_names_are_answered(client: TestClient, host: str) -> None:
    response = client.get("/v1/sessions", headers={"host": host})
    assert response.status_code == 200, response.text
    assert "hosts-0" in response.text


def test_configured_host_names_are_answered_and_others_still_refused(
    lookup_app: LookupApp,
) -> None:
    settings = load_settings(
        overrides={"server.allowed-hosts": "kb.internal.example, *.corp.example"}
    ).settings
    client = TestClient(create_http_app(lookup_app, settings), base_url=LOCAL)
    for host in ("kb.internal.example", "kb.internal.example:443", "lk.corp.example"):
        assert client.get("/v1/sessions", headers={"host": host}).status_code == 200, host
    for host in ("corp.example", "attacker.example", "kb.internal.example.attacker.example"):
        assert client.get("/v1/sessions", headers={"host": host}).status_code == 421, host


def test_a_star_switches_the_host_check_off(lookup_app: LookupApp) -> None:
    settings = load_settings(overrides={"server.allowed-hosts": "*"}).settings
    client = TestClient(create_http_app(lookup_app, settings), base_url=LOCAL)
    assert client.get("/healthz", headers={"host": "anything.example"}).status_code == 200


def test_mcp_over_serve_answers_a_configured_host_name(lookup_app: LookupApp) -> None:
    """The MCP SDK's own Host check accepts the names ``serve`` is configured for."""
    settings = load_settings(overrides={"server.allowed-hosts": "kb.internal.example"}).settings
    with served(create_http_app(lookup_app, settings)) as url:
        accept = {"accept": "application/json, text/event-stream"}
        named = httpx.post(
            f"{url}/mcp", json=PING, headers={"host": "kb.internal.example", **accept}
        )
        foreign = httpx.post(f"{url}/mcp", json=PING, headers={"host": "evil.example", **accept})
    assert named.status_code != 421, named.text
    assert foreign.status_code == 421


@pytest.mark.parametrize(
    ("header", "name"),
    [
        ("Example.COM.:80", "example.com"),
        ("[::1]:8787", "::1"),
        ("[::1]", "::1"),
        ("127.0.0.1", "127.0.0.1"),
        ("host:port", None),
        ("[::1", None),
        ("[::1]x", None),
        ("", None),
    ],
)
def test_host_name_reads_a_host_header(header: str, name: str | None) -> None:
    assert host_name(header) == name
