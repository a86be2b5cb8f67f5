"""MCP over HTTP with the SDK's default client (``mcp.Client(url)``, which negotiates the
stateless per-request protocol): every call is its own audit session, and check_answer
finds the sessions of an answer from the ids it cites, among the caller's own only."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client

from lookup_knowledge.adapters.api import LookupApp, create_app
from lookup_knowledge.adapters.mcp_server import CALL_SESSION_PREFIX
from lookup_knowledge.application.ports import InvocationFilter
from tests.integration.test_mcp_http import serve  # noqa: F401 - fixture

ACME_TOKEN = "acme-token-stateless-1"
GLOBEX_TOKEN = "globex-token-stateless-2"
FAILOVER = "how do I fail over the primary PostgreSQL database"
FLUSH = "how do I flush the Redis cache"


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def _write_corpus(root: Path) -> Path:
    (root / "database").mkdir(parents=True)
    (root / "database" / "failover.md").write_text(
        "# Database failover\n\nTo fail over the primary PostgreSQL database, run "
        "`pg_ctl promote` on the replica and repoint the db-primary DNS record.\n",
        encoding="utf-8",
    )
    (root / "cache").mkdir()
    (root / "cache" / "flush.md").write_text(
        "# Cache flush\n\nTo flush the Redis cache, run redis-cli FLUSHALL on the cache host.\n",
        encoding="utf-8",
    )
    return root


@pytest.fixture
def app(tmp_path: Path) -> Iterator[LookupApp]:
    built = create_app(
        overrides={
            "data-dir": str(tmp_path / "data"),
            "embedder.provider": "hashing",
            "search.backend": "memory",
            "server.principals": {
                _digest(ACME_TOKEN): {"tenant": "acme", "user": "a"},
                _digest(GLOBEX_TOKEN): {"tenant": "globex", "user": "g"},
            },
        }
    )
    corpus = _write_corpus(tmp_path / "kb")
    built.ingest([corpus], root=corpus, public=True)
    yield built
    built.close()


def _client(url: str, token: str) -> Client:
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    return Client(streamable_http_client(url, http_client=http))  # the default mode


def _sentence(block: dict[str, Any]) -> str:
    """An answer sentence built on a block: its first line of text, cited."""
    text = next(line for line in block["content"].splitlines() if line and line[0] != "#")
    return f"{text.strip().rstrip('.')} [{block['document_id']}]."


async def _lookups_then_check(
    url: str, token: str, queries: list[str], checker_token: str | None = None
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    async with _client(url, token) as client:
        found = []
        for query in queries:
            result = await client.call_tool("lookup_knowledge", {"query": query})
            assert result.structured_content is not None
            found.append(dict(result.structured_content))
    answer = " ".join(_sentence(f["evidenceBlocks"][0]) for f in found)
    async with _client(url, checker_token or token) as client:
        checked = await client.call_tool("check_answer", {"answer": answer})
    assert checked.structured_content is not None
    return found, dict(checked.structured_content)


def _sessions(app: LookupApp) -> list[str]:
    app.flush()
    return [i.session_id for i in app.audit.list_invocations(InvocationFilter(limit=50)).items]


def test_a_lookup_and_the_check_of_its_answer_land_in_one_session_with_the_default_client(
    app: LookupApp,
    serve: Any,  # noqa: F811
) -> None:
    url = serve()
    found, check = anyio.run(_lookups_then_check, url, ACME_TOKEN, [FAILOVER])
    assert found[0]["found"]
    [lookup_session] = _sessions(app)
    assert lookup_session.startswith(CALL_SESSION_PREFIX)  # no session: one per call
    assert check["verdict"] == "supported"
    assert check["sessionId"] == lookup_session
    assert [c["status"] for c in check["claims"][0]["citations"]] == ["valid"]
    assert app.answer_checks.get_check(check["checkId"]).session_id == lookup_session


def test_a_check_counts_the_evidence_of_every_lookup_its_answer_cites(
    app: LookupApp,
    serve: Any,  # noqa: F811
) -> None:
    url = serve()
    found, check = anyio.run(_lookups_then_check, url, ACME_TOKEN, [FAILOVER, FLUSH])
    assert {f["evidenceBlocks"][0]["document_id"] for f in found} == {
        "kb/database/failover.md#chunk-0",
        "kb/cache/flush.md#chunk-0",
    }
    assert len(set(_sessions(app))) == 2  # two calls, two sessions
    assert check["verdict"] == "supported"
    statuses = [c["status"] for claim in check["claims"] for c in claim["citations"]]
    assert statuses == ["valid", "valid"]
    assert check["sessionId"] in _sessions(app)


def test_a_check_never_reads_or_names_another_principals_session(
    app: LookupApp,
    serve: Any,  # noqa: F811
) -> None:
    url = serve()
    found, check = anyio.run(_lookups_then_check, url, ACME_TOKEN, [FAILOVER], GLOBEX_TOKEN)
    [acme_session] = _sessions(app)
    assert found[0]["found"]
    assert check["sessionId"] != acme_session
    assert check["verdict"] != "supported"
    assert [c["status"] for c in check["claims"][0]["citations"]] == ["unknown"]
    assert acme_session not in str(check)
    # Nothing recorded in acme's session by globex's check.
    assert all(c.session_id != acme_session for c in _checks(app)), (
        "a check of another principal was recorded in acme's session"
    )


def _checks(app: LookupApp) -> list[Any]:
    from lookup_knowledge.application.ports import AnswerCheckFilter

    return list(app.answer_checks.list_checks(AnswerCheckFilter()))
