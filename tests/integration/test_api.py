"""The Python API as a backend embeds it: real adapters (in-memory search, SQLite audit),
concurrency, asyncio, and provider overrides with fakes."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from lookup_knowledge import create_app
from lookup_knowledge.adapters.api import LookupApp
from lookup_knowledge.adapters.config import load_settings
from lookup_knowledge.adapters.container import Container
from lookup_knowledge.application.ports import (
    InvocationFilter,
    KnowledgeSearchHit,
    KnowledgeSearchRequest,
)
from lookup_knowledge.domain.errors import InvalidInputError, LookupKnowledgeError
from tests.fakes import FakeSearch, InMemoryRecorder, chunk


def _docs(root: Path) -> Path:
    folder = root / "kb"
    (folder / "database").mkdir(parents=True)
    (folder / "network").mkdir()
    (folder / "database" / "pool.md").write_text(
        "# Connection pool\n\n## PG-53300\n\nToo many connections: raise pool_size in "
        "PgBouncer and check max_connections.\n\n## Replication\n\nReplication lag above 16 MB "
        "pages the database on-call.\n",
        encoding="utf-8",
    )
    (folder / "network" / "dns.md").write_text(
        "# DNS\n\nInternal zones resolve through 10.20.0.53; TTL is 60 seconds.\n",
        encoding="utf-8",
    )
    return folder


@pytest.fixture
def app(tmp_path: Path) -> LookupApp:
    lookup_app = create_app(
        overrides={
            "data-dir": str(tmp_path / "data"),
            "search.backend": "memory",
            "embedder.provider": "hashing",
            "rag.min-relevance": 0.0,
        }
    )
    folder = _docs(tmp_path)
    lookup_app.ingest([folder], root=folder)
    yield lookup_app
    lookup_app.close()


def test_lookup_then_verify(app: LookupApp) -> None:
    result = app.lookup("PG-53300 too many connections", session_id="api", step_id="1")
    assert result["found"]
    ids = [b["document_id"] for b in result["evidenceBlocks"]]
    assert ids[0].startswith("kb/database/pool.md#chunk-")
    report = app.verify_citations("api", [ids[0], "nope#chunk-1"])
    assert report.valid_ids == (ids[0],)
    assert report.unknown == ("nope#chunk-1",)
    assert report.conclusive


def test_concurrent_lookups_from_threads_are_all_recorded_gap_free(app: LookupApp) -> None:
    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(
            pool.map(
                lambda i: app.lookup(f"dns question {i}", session_id="threads", step_id=str(i)),
                range(24),
            )
        )
    assert all(r["found"] for r in results)
    page = app.audit.list_invocations(InvocationFilter(session_id="threads", limit=100))
    assert sorted(i.seq for i in page.items) == list(range(1, 25))
    assert {i.id for i in page.items} == {r["invocationId"] for r in results}


def test_alookup_does_not_block_the_event_loop(tmp_path: Path) -> None:
    release = threading.Event()

    class BlockingSearch(FakeSearch):
        def search(self, request: KnowledgeSearchRequest) -> list[KnowledgeSearchHit]:
            # Only a running event loop can set this: a blocked loop would time out here.
            assert release.wait(timeout=30), "the event loop was blocked"
            return super().search(request)

    settings = load_settings(
        overrides={
            "data-dir": str(tmp_path),
            "embedder.provider": "hashing",
            "audit.enabled": False,
        }
    ).settings
    container = Container(settings=settings)
    container.search.override(BlockingSearch([chunk("a", 0, 0.9)]))
    lookup_app = create_app(settings, container=container)

    async def main() -> tuple[dict[str, object], int]:
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            for _ in range(5):
                await asyncio.sleep(0)
                ticks += 1
            release.set()

        result, _ = await asyncio.gather(lookup_app.alookup("q", session_id="s"), ticker())
        return result, ticks

    try:
        result, ticks = asyncio.run(main())
    finally:
        lookup_app.close()
    assert result["found"]
    assert ticks == 5


def test_providers_are_overridden_with_fakes(tmp_path: Path) -> None:
    settings = load_settings(
        overrides={"data-dir": str(tmp_path), "embedder.provider": "hashing"}
    ).settings
    container = Container(settings=settings)
    fake_search = FakeSearch([chunk("doc", 0, 0.9), chunk("doc", 1, 0.8)])
    fake_recorder = InMemoryRecorder()
    container.search.override(fake_search)
    container.recorder.override(fake_recorder)
    with create_app(settings, container=container) as lookup_app:
        result = lookup_app.lookup("anything", session_id="s", mode="dense")
    assert [b["document_id"] for b in result["evidenceBlocks"]] == ["doc#chunk-0", "doc#chunk-1"]
    assert fake_search.requests[0].top_k == 20
    assert [r.id for r in fake_recorder.records] == [result["invocationId"]]


def test_a_closed_app_refuses_work_and_close_is_idempotent(app: LookupApp) -> None:
    app.close()
    app.close()
    with pytest.raises(LookupKnowledgeError, match="closed"):
        app.lookup("q", session_id="s")


def test_bad_mode_is_a_typed_error(app: LookupApp) -> None:
    with pytest.raises(InvalidInputError, match="unknown search mode"):
        app.lookup("q", session_id="s", mode="fuzzy")


def test_tool_schemas_are_exported() -> None:
    from lookup_knowledge import anthropic_tool_schema, openai_tool_schema

    assert openai_tool_schema()["function"]["name"] == "lookup_knowledge"
    assert anthropic_tool_schema()["name"] == "lookup_knowledge"


def test_close_waits_for_lookups_in_flight_so_their_records_are_kept(tmp_path: Path) -> None:
    entered, release = threading.Event(), threading.Event()

    class SlowSearch(FakeSearch):
        def search(self, request: KnowledgeSearchRequest) -> list[KnowledgeSearchHit]:
            entered.set()
            assert release.wait(timeout=30)
            return super().search(request)

    settings = load_settings(
        overrides={"data-dir": str(tmp_path), "embedder.provider": "hashing"}
    ).settings
    container = Container(settings=settings)
    container.search.override(SlowSearch([chunk("a", 0, 0.9)]))
    lookup_app = create_app(settings, container=container)
    results: list[dict[str, object]] = []
    worker = threading.Thread(
        target=lambda: results.append(lookup_app.lookup("q", session_id="closing"))
    )
    worker.start()
    assert entered.wait(timeout=30)
    closer = threading.Thread(target=lookup_app.close)
    closer.start()
    closer.join(timeout=0.2)
    assert closer.is_alive(), "close() must wait for the lookup in flight"
    release.set()
    worker.join(timeout=30)
    closer.join(timeout=30)
    assert results[0]["found"]
    with create_app(settings) as reopened:
        page = reopened.audit.list_invocations(InvocationFilter(session_id="closing"))
    assert [i.id for i in page.items] == [results[0]["invocationId"]]


def test_audit_disabled_touches_no_audit_database(tmp_path: Path) -> None:
    settings = load_settings(
        overrides={
            "data-dir": str(tmp_path),
            "embedder.provider": "hashing",
            "search.backend": "memory",
            "audit.enabled": False,
            # unreachable: starting the SQL backend anyway would fail create_app
            "audit.database-url": "postgresql+psycopg://nobody@127.0.0.1:9/none",
        }
    ).settings
    with create_app(settings) as lookup_app:
        result = lookup_app.lookup("anything", session_id="s")
    assert result["found"] is False
    assert not (tmp_path / "audit.db").exists()
    assert not (tmp_path / "audit-journal").exists()


# --------------------------------------------------------------------------- asyncio, health


def test_the_async_api_ingests_verifies_checks_and_closes(tmp_path: Path) -> None:
    folder = _docs(tmp_path)

    async def host() -> None:
        async with create_app(
            overrides={
                "data-dir": str(tmp_path / "data"),
                "search.backend": "memory",
                "embedder.provider": "hashing",
                "rag.min-relevance": 0.0,
            }
        ) as app:
            report = await app.aingest([folder], root=folder)
            assert report.added == 2
            result = await app.alookup("PG-53300 too many connections", session_id="async")
            cited = [b["document_id"] for b in result["evidenceBlocks"]][:1]
            verdict = await app.averify_citations("async", [*cited, "nope#chunk-0"])
            assert verdict.valid_ids == tuple(cited)
            assert verdict.unknown == ("nope#chunk-0",)
            health = await app.ahealth()
            assert health.ok, health.as_dict()
        with pytest.raises(LookupKnowledgeError, match="closed"):
            await app.alookup("again", session_id="async")

    asyncio.run(host())


def test_health_names_what_is_down(tmp_path: Path) -> None:
    from tests.support.tcp_proxy import closed_port

    port = closed_port()
    app = create_app(
        overrides={
            "data-dir": str(tmp_path / "data"),
            "milvus.uri": f"http://127.0.0.1:{port}",
            "milvus.timeout-s": 1,
            "embedder.provider": "hashing",
        }
    )
    try:
        health = app.health()
        search, audit, spool = health.components
        assert not health.ok
        assert (search.name, search.ok) == ("knowledge search", False)
        assert "search_unavailable" in search.detail
        assert (audit.ok, spool.ok) == (True, True)
    finally:
        app.close()


def test_health_with_the_audit_store_switched_off(tmp_path: Path) -> None:
    app = create_app(
        overrides={
            "data-dir": str(tmp_path / "data"),
            "search.backend": "memory",
            "embedder.provider": "hashing",
            "audit.enabled": False,
        }
    )
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# A\n\nSomething to search.\n", encoding="utf-8")
    with app:
        app.ingest([docs])  # an empty knowledge base is not ready (health: "empty")
        health = app.health()
        assert health.ok
        assert "disabled" in health.components[1].detail
