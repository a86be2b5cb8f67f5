"""The REST API with access control: an agent token's principal comes from its entry in
``server.principals``; only a trusted host (or the tokenless loopback server) names the
principal of a lookup, and sees forbidden citations."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from lookup_knowledge import create_app
from lookup_knowledge.adapters.api import LookupApp
from lookup_knowledge.adapters.config import load_settings
from lookup_knowledge.adapters.http import create_http_app
from lookup_knowledge.application.ports import InvocationFilter
from lookup_knowledge.domain.errors import ConfigurationError
from tests.support.http import LOCAL


def test_the_principal_in_the_body_decides_what_is_seen(tmp_path: Path) -> None:
    app = create_app(
        overrides={
            "data-dir": str(tmp_path / "data"),
            "search.backend": "memory",
            "embedder.provider": "hashing",
            "rag.min-relevance": 0.0,
            "access.mode": "enforced",
        }
    )
    try:
        for tenant in ("acme", "globex"):
            folder = tmp_path / tenant / "kb"
            folder.mkdir(parents=True)
            (folder / f"{tenant}.md").write_text(
                f"# Plan\n\nThe resolver plan ({tenant}-marker).\n", "utf-8"
            )
            app.ingest([folder], tenant=tenant)
        client = TestClient(create_http_app(app), base_url=LOCAL)
        body = {"query": "resolver plan", "session_id": "r-acme"}
        seen = client.post("/v1/lookup", json={**body, "principal": {"tenant": "acme"}}).json()
        assert seen["evidenceBlocks"]
        assert all("acme-marker" in b["content"] for b in seen["evidenceBlocks"])
        anonymous = client.post("/v1/lookup", json={**body, "session_id": "r-anon"}).json()
        assert anonymous["found"] is False
        bad = client.post("/v1/lookup", json={**body, "principal": {"tenant": " acme"}})
        assert bad.status_code == 400
        verdict = client.post(
            "/v1/verify", json={"session_id": "r-acme", "document_ids": ["kb/globex.md#chunk-0"]}
        ).json()
        assert verdict["forbidden"] == ["kb/globex.md#chunk-0"]
        assert verdict["unknown"] == []
        assert verdict["all_valid"] is False
    finally:
        app.close()


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def _app(tmp_path: Path, **extra: object) -> LookupApp:
    return create_app(
        overrides={
            "data-dir": str(tmp_path / "data"),
            "search.backend": "memory",
            "embedder.provider": "hashing",
            "rag.min-relevance": 0.0,
            **extra,
        }
    )


def test_an_agent_token_may_not_name_a_principal_in_the_body(tmp_path: Path) -> None:
    app = _app(tmp_path, **{"server.agent-token": "agent-1", "server.auditor-token": "aud-1"})
    try:
        client = TestClient(create_http_app(app), base_url=LOCAL)
        answered = client.post(
            "/v1/lookup",
            headers={"Authorization": "Bearer agent-1"},
            json={"query": "plan", "session_id": "s-1", "principal": {"tenant": "globex"}},
        )
        assert answered.status_code == 403
        assert answered.json()["code"] == "forbidden"
        app.flush()
        assert app.audit.list_invocations(InvocationFilter(limit=10)).items == ()
    finally:
        app.close()


def test_a_token_in_the_deprecated_mcp_principals_authenticates_rest_for_its_principal(
    tmp_path: Path,
) -> None:
    app = _app(
        tmp_path,
        **{
            "access.mode": "enforced",
            "mcp.principals": {_digest("acme-token"): {"tenant": "acme", "user": "bot"}},
        },
    )
    try:
        for tenant in ("acme", "globex"):
            folder = tmp_path / tenant / "kb"
            folder.mkdir(parents=True)
            (folder / "plan.md").write_text(f"# Plan\n\nThe resolver plan ({tenant}-marker).\n")
            app.ingest([folder], tenant=tenant)
        client = TestClient(create_http_app(app), base_url=LOCAL)
        seen = client.post(
            "/v1/lookup",
            headers={"Authorization": "Bearer acme-token"},
            json={"query": "resolver plan", "session_id": "s-acme"},
        )
        assert seen.status_code == 200, seen.text
        assert "acme-marker" in seen.text
        assert "globex-marker" not in seen.text
        app.flush()
        (record,) = app.audit.list_invocations(InvocationFilter(limit=10)).items
        assert (record.principal_tenant, record.principal_user) == ("acme", "bot")
    finally:
        app.close()


def test_enforced_access_refuses_an_agent_token_that_maps_to_no_principal(tmp_path: Path) -> None:
    app = _app(tmp_path, **{"access.mode": "enforced", "server.agent-token": "agent-1"})
    try:
        with pytest.raises(ConfigurationError, match=r"server\.principals"):
            create_http_app(app)
        listed = {_digest("agent-1"): {"tenant": "acme"}}
        create_http_app(
            app,
            load_settings(
                overrides={
                    "access.mode": "enforced",
                    "server.agent-token": "agent-1",
                    "server.principals": listed,
                }
            ).settings,
        )
    finally:
        app.close()
