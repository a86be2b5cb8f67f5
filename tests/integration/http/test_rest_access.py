"""The REST API with access control: the host (holder of the agent token) names the
principal of a lookup; verification reports forbidden citations."""

from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient

from lookup_knowledge import create_app
from lookup_knowledge.adapters.http import create_http_app
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
