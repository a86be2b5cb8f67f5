"""The REST API over a real LookupApp (in-memory search, SQLite audit): lookups are
recorded and read back, errors are problem+json with the project's codes, pages cover
everything once, tokens and scopes guard every route that holds data."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from lookup_knowledge.adapters.api import LookupApp
from lookup_knowledge.adapters.config import load_settings
from lookup_knowledge.adapters.http import create_http_app
from lookup_knowledge.domain.errors import ConfigurationError
from tests.integration.http.test_console_signin import sign_in
from tests.support.http import AGENT, AUDITOR, LOCAL, sample_app

PROBLEM = "application/problem+json"


@pytest.fixture(scope="module")
def lookup_app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LookupApp]:
    app = sample_app(tmp_path_factory.mktemp("rest") / "data")
    yield app
    app.close()


@pytest.fixture(scope="module")
def client(lookup_app: LookupApp) -> TestClient:
    return TestClient(create_http_app(lookup_app), base_url=LOCAL)


def _problem(response: Any, status: int, code: str) -> dict[str, object]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == PROBLEM
    body = response.json()
    assert body["status"] == status
    assert body["code"] == code
    assert body["type"] == f"urn:lookup-knowledge:problem:{code}"
    assert body["title"]
    assert isinstance(body["detail"], str)
    return dict(body)


def test_a_lookup_is_recorded_and_read_back_through_the_api(client: TestClient) -> None:
    answer = client.post(
        "/v1/lookup",
        json={"query": "PG-53300 too many connections", "session_id": "rest-1", "step_id": "s1"},
    )
    assert answer.status_code == 200
    tool = answer.json()
    assert tool["found"]
    ids = [b["document_id"] for b in tool["evidenceBlocks"]]
    assert ids[0].startswith("sample_corpus/database/pg-error-catalogue.md#chunk-")

    page = client.get("/v1/invocations", params={"session": "rest-1"}).json()
    assert [i["id"] for i in page["items"]] == [tool["invocationId"]]
    assert page["items"][0]["seq"] == 1
    assert page["items"][0]["step_id"] == "s1"
    assert page["next_offset"] is None

    detail = client.get(f"/v1/invocations/{tool['invocationId']}").json()
    assert [e["document_id"] for e in detail["evidence"] if e["projected"]] == ids
    assert detail["retrieval_details"]["retrievalTrace"]["mode"] == "hybrid"  # the default

    verdict = client.post(
        "/v1/verify", json={"session_id": "rest-1", "document_ids": [ids[0], "made-up#chunk-0"]}
    ).json()
    assert [v["document_id"] for v in verdict["valid"]] == [ids[0]]
    assert verdict["unknown"] == ["made-up#chunk-0"]
    assert verdict["all_valid"] is False
    assert verdict["conclusive"] is True

    sessions = client.get("/v1/sessions", params={"q": "rest-1"}).json()["items"]
    assert [(s["session_id"], s["invocation_count"]) for s in sessions] == [("rest-1", 1)]
    stats = client.get("/v1/stats").json()
    assert stats["count"] >= 1
    assert stats["p95_duration_ms"] is not None


def test_an_answer_is_checked_against_what_the_session_was_shown(client: TestClient) -> None:
    tool = client.post(
        "/v1/lookup", json={"query": "PG-53300 too many connections", "session_id": "rest-check"}
    ).json()
    block = tool["evidenceBlocks"][0]
    quoted = block["content"].split("\n")[-1][:40].strip()
    answer = f'The catalogue says "{quoted}" [{block["document_id"]}]. It also says "made up" [{block["document_id"]}].'
    check = client.post("/v1/check-answer", json={"session_id": "rest-check", "answer": answer})
    assert check.status_code == 200, check.text
    body = check.json()
    assert body["sessionId"] == "rest-check"
    verdicts = [c["verdict"] for c in body["claims"]]
    assert verdicts == ["supported", "unsupported"]
    assert body["verdict"] != "supported"
    _problem(
        client.post("/v1/check-answer", json={"session_id": "", "answer": "x"}),
        422,
        "invalid_input",
    )


def test_invocations_and_sessions_page_through_everything_once(client: TestClient) -> None:
    for i in range(7):
        client.post("/v1/lookup", json={"query": f"dns ttl {i}", "session_id": f"page-{i % 3}"})
    seen: list[str] = []
    offset: int | None = 0
    while offset is not None:
        page = client.get(
            "/v1/invocations", params={"session": "page-0", "limit": 1, "offset": offset}
        ).json()
        seen += [str(i["seq"]) for i in page["items"]]
        offset = page["next_offset"]
    assert seen == ["1", "2", "3"]
    names: list[str] = []
    offset = 0
    while offset is not None:
        page = client.get(
            "/v1/sessions", params={"q": "page-", "limit": 2, "offset": offset}
        ).json()
        names += [s["session_id"] for s in page["items"]]
        offset = page["next_offset"]
    assert sorted(names) == ["page-0", "page-1", "page-2"]
    assert len(names) == 3


def test_errors_are_problem_json_with_the_project_codes(client: TestClient) -> None:
    _problem(client.get("/v1/invocations/not-a-uuid"), 400, "invalid_input")
    _problem(client.get("/v1/invocations/0190a1b2-0000-7000-8000-000000000000"), 404, "not_found")
    body = _problem(client.post("/v1/lookup", json={"query": "x"}), 422, "invalid_input")
    assert body["errors"] == [{"loc": ["body", "session_id"], "msg": "Field required"}]
    _problem(
        client.post("/v1/lookup", content=b"{", headers={"content-type": "application/json"}),
        422,
        "invalid_input",
    )
    _problem(client.get("/v1/invocations", params={"limit": 0}), 422, "invalid_input")
    _problem(client.get("/v1/nowhere"), 404, "not_found")
    _problem(client.delete("/v1/lookup"), 405, "method_not_allowed")
    _problem(
        client.post("/v1/lookup", json={"query": "x", "session_id": "   "}), 400, "invalid_input"
    )


def test_a_body_over_the_limit_is_refused_before_any_route(lookup_app: LookupApp) -> None:
    settings = load_settings(overrides={"server.max-request-bytes": 2048}).settings
    client = TestClient(create_http_app(lookup_app, settings), base_url=LOCAL)
    big = {"query": "x" * 4096, "session_id": "big"}
    _problem(client.post("/v1/lookup", json=big), 413, "request_too_large")

    def chunks() -> Iterator[bytes]:  # no content-length: counted as it streams
        yield b'{"query": "'
        for _ in range(10):
            yield b"y" * 512
        yield b'", "session_id": "big"}'

    _problem(
        client.post("/v1/lookup", content=chunks(), headers={"content-type": "application/json"}),
        413,
        "request_too_large",
    )
    assert client.get("/v1/invocations", params={"session": "big"}).json()["items"] == []


def test_probes_and_openapi(client: TestClient) -> None:
    assert client.get("/healthz").json() == {"status": "ok"}
    ready = client.get("/readyz").json()
    assert ready["status"] == "ready"
    assert set(ready["checks"]) == {"knowledge search", "audit store", "audit journal"}
    assert all(c["ok"] for c in ready["checks"].values())
    assert ready["spool_pending"] == 0
    assert ready["journal_pending"] == 0  # the new name beside the old one
    paths = client.get("/openapi.json").json()["paths"]
    assert {
        "/v1/lookup",
        "/v1/verify",
        "/v1/invocations",
        "/v1/invocations/{invocation_id}",
        "/v1/sessions",
        "/v1/stats",
        "/healthz",
        "/readyz",
    } <= set(paths)
    assert "/" not in paths  # the console is not API
    assert client.get("/docs").status_code == 404  # no CDN-backed docs page


def test_security_headers_and_cors_off_by_default(client: TestClient) -> None:
    response = client.get("/v1/stats", headers={"origin": "https://evil.example"})
    assert "access-control-allow-origin" not in response.headers
    assert "default-src 'none'" in response.headers["content-security-policy"]
    assert response.headers["x-content-type-options"] == "nosniff"
    preflight = client.options(
        "/v1/lookup",
        headers={"origin": "https://evil.example", "access-control-request-method": "POST"},
    )
    assert "access-control-allow-origin" not in preflight.headers


def test_cors_allows_only_the_configured_origins(lookup_app: LookupApp) -> None:
    settings = load_settings(overrides={"server.cors-origins": "https://ops.example"}).settings
    client = TestClient(create_http_app(lookup_app, settings), base_url=LOCAL)
    ok = client.get("/healthz", headers={"origin": "https://ops.example"})
    assert ok.headers["access-control-allow-origin"] == "https://ops.example"
    other = client.get("/healthz", headers={"origin": "https://evil.example"})
    assert "access-control-allow-origin" not in other.headers


# --------------------------------------------------------------------------- tokens


def test_a_bind_off_loopback_needs_both_tokens() -> None:
    with pytest.raises(ConfigurationError, match=r"server\.auditor-token"):
        load_settings(overrides={"server.host": "0.0.0.0"})
    with pytest.raises(ConfigurationError):
        load_settings(overrides={"server.host": "192.0.2.7", "server.auditor-token": AUDITOR})
    with pytest.raises(ConfigurationError, match="differ"):
        load_settings(
            overrides={
                "server.host": "0.0.0.0",
                "server.auditor-token": AUDITOR,
                "server.agent-token": AUDITOR,
            }
        )
    for loopback in ("127.0.0.1", "127.8.9.10", "localhost", "::1"):
        assert load_settings(overrides={"server.host": loopback}).settings.server.host == loopback


@pytest.fixture(scope="module")
def guarded(lookup_app: LookupApp) -> TestClient:
    settings = load_settings(
        overrides={
            "server.host": "0.0.0.0",
            "server.auditor-token": AUDITOR,
            "server.agent-token": AGENT,
        }
    ).settings
    return TestClient(create_http_app(lookup_app, settings), base_url=LOCAL)


def _bearer(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


READS = [
    "/v1/invocations",
    "/v1/sessions",
    "/v1/stats",
    "/v1/invocations/0190a1b2-0000-7000-8000-000000000000",
]


def test_no_token_no_data(guarded: TestClient) -> None:
    for path in READS:
        body = _problem(guarded.get(path), 401, "unauthorized")
        assert "items" not in body
    response = guarded.post("/v1/lookup", json={"query": "dns", "session_id": "no-token"})
    _problem(response, 401, "unauthorized")
    assert response.headers["www-authenticate"].startswith("Bearer")
    _problem(guarded.get("/v1/stats", headers=_bearer("wrong")), 401, "unauthorized")
    _problem(guarded.get("/v1/stats", headers={"authorization": AUDITOR}), 401, "unauthorized")
    # the call without a token was not made, so not recorded
    page = guarded.get("/v1/invocations", params={"session": "no-token"}, headers=_bearer(AUDITOR))
    assert page.status_code == 200
    assert page.json()["items"] == []
    # the probes hold no stored data
    assert guarded.get("/healthz").status_code == 200


def test_each_scope_reaches_its_own_routes_only(guarded: TestClient) -> None:
    lookup = {"query": "dns ttl", "session_id": "scoped"}
    _problem(guarded.post("/v1/lookup", json=lookup, headers=_bearer(AUDITOR)), 403, "forbidden")
    assert guarded.post("/v1/lookup", json=lookup, headers=_bearer(AGENT)).status_code == 200
    verify = {"session_id": "scoped", "document_ids": ["x#chunk-0"]}
    assert guarded.post("/v1/verify", json=verify, headers=_bearer(AGENT)).status_code == 200
    for path in READS[:3]:
        _problem(guarded.get(path, headers=_bearer(AGENT)), 403, "forbidden")
        assert guarded.get(path, headers=_bearer(AUDITOR)).status_code == 200


def test_the_console_needs_the_auditor_token_too(guarded: TestClient) -> None:
    lookup = {"query": "dns ttl", "session_id": "scoped"}  # the session the pages show
    assert guarded.post("/v1/lookup", json=lookup, headers=_bearer(AGENT)).status_code == 200
    for path in (
        "/",
        "/quality",
        "/sessions/scoped",
        "/sessions/scoped/export.jsonl",
        "/sessions/scoped/export.csv",
    ):
        denied = guarded.get(path, follow_redirects=False)
        assert denied.status_code == 401, path
        assert "scoped" not in denied.text or path.startswith("/sessions")
        assert "dns ttl" not in denied.text
        assert guarded.get(path, headers=_bearer(AGENT)).status_code == 401
    assert guarded.get("/", headers=_bearer(AUDITOR)).status_code == 200
    # a browser signs in once: a signed session in an HTTP-only cookie (not the token)
    refused = sign_in(guarded, AGENT)
    assert refused.status_code == 401  # type: ignore[attr-defined]
    signed = sign_in(guarded, AUDITOR)
    assert signed.status_code == 303  # type: ignore[attr-defined]
    cookie = signed.headers["set-cookie"]  # type: ignore[attr-defined]
    assert "HttpOnly" in cookie
    assert "SameSite=strict" in cookie
    assert AUDITOR not in cookie
    assert guarded.get("/sessions/scoped").status_code == 200
    assert guarded.post("/logout", follow_redirects=False).status_code == 403  # no CSRF token
    guarded.cookies.clear()
    assert guarded.get("/").status_code == 401


def test_mounted_apps_and_extra_routers_get_the_same_guard(lookup_app: LookupApp) -> None:
    from fastapi import APIRouter, Depends
    from starlette.responses import PlainTextResponse

    from lookup_knowledge.adapters.http import Mount, Role, TokenGuard

    async def inner(scope: Any, receive: Any, send: Any) -> None:
        await PlainTextResponse(f"mounted at {scope['path']}")(scope, receive, send)

    settings = load_settings(
        overrides={"server.auditor-token": AUDITOR, "server.agent-token": AGENT}
    ).settings
    guard = TokenGuard(settings.server)
    extra = APIRouter()

    @extra.post("/v1/extra", dependencies=[Depends(guard.dependency(Role.AGENT))])
    def extra_route() -> dict[str, str]:
        return {"ok": "yes"}

    client = TestClient(
        create_http_app(
            lookup_app, settings, routers=[extra], mounts=[Mount("/mcp", inner)], mcp=False
        ),
        base_url=LOCAL,
    )
    _problem(client.get("/mcp"), 401, "unauthorized")
    _problem(client.get("/mcp", headers=_bearer(AUDITOR)), 403, "forbidden")
    assert client.get("/mcp", headers=_bearer(AGENT)).text == "mounted at /mcp"
    _problem(client.post("/v1/extra"), 401, "unauthorized")
    assert client.post("/v1/extra", headers=_bearer(AGENT)).json() == {"ok": "yes"}
