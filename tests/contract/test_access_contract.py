"""Access control, one suite for every engine (the in-memory base, Milvus Lite, the PyPI
Milvus 2.3 server for dense): two tenants ingest the same doc paths through the real
ingest use case; every lookup of each tenant returns only its own chunks (and public
ones), in every mode the engine has, with the unfiltered retry, engine grouping and late
materialisation; and the engine's own filter does it (the application's
defence-in-depth check never has to drop a hit)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import pytest

from lookup_knowledge.adapters.embedders import HashingEmbedder
from lookup_knowledge.adapters.files import MarkdownChunker
from lookup_knowledge.adapters.memory import InMemoryKnowledgeBase
from lookup_knowledge.adapters.milvus import (
    MilvusConnection,
    MilvusKnowledgeSearch,
    MilvusKnowledgeStore,
)
from lookup_knowledge.application.ingest import IngestDocuments, StaticDocumentSource
from lookup_knowledge.application.lookup import LookupConfig, LookupOptions
from lookup_knowledge.application.ports import (
    KnowledgeSearchPort,
    KnowledgeStore,
    SourceDocument,
)
from lookup_knowledge.domain.access import (
    AccessMode,
    AccessScope,
    DocumentAccess,
    Principal,
    storage_key,
)
from lookup_knowledge.domain.model import SearchMode
from lookup_knowledge.domain.settings import RetrievalSettings
from tests.fakes import FakeClock, make_lookup
from tests.support.xdist import PYPI_MILVUS

EMBEDDER = HashingEmbedder(64)
TENANTS = ("acme", "globex")
DOMAINS = {"database": ["postgres", "pgbouncer"]}


@dataclass
class Engine:
    name: str
    search: KnowledgeSearchPort
    store: KnowledgeStore
    closers: list[Callable[[], None]] = field(default_factory=list)

    def close(self) -> None:
        for close in reversed(self.closers):
            close()


def _documents(tenant: str) -> list[SourceDocument]:
    marker = f"{tenant}-marker"
    docs = [
        SourceDocument(
            doc_id="kb/network/dns.md",
            text=f"# DNS\n\nInternal zones resolve through the resolver ({marker}).\n",
            category="network",
        ),
        SourceDocument(
            doc_id="kb/network/firewall.md",
            text=f"# Firewall\n\nChange requests need two approvals ({marker}).\n\n"
            f"## Rollback\n\nRoll the firewall back through the resolver runbook ({marker}).\n",
            category="network",
        ),
    ]
    if tenant == "globex":  # only globex has a database document: acme's retry runs
        docs.append(
            SourceDocument(
                doc_id="kb/database/pool.md",
                text=f"# Pool\n\nPgBouncer pool size for postgres ({marker}).\n",
                category="database",
            )
        )
    return docs


def _ingest(store: KnowledgeStore) -> None:
    ingest = IngestDocuments(
        store=store,
        chunker=MarkdownChunker(chunk_size=120, chunk_overlap=0),
        clock=FakeClock(),
        embedder=EMBEDDER,
    )
    for tenant in TENANTS:
        report = ingest.execute(
            StaticDocumentSource(_documents(tenant), access=DocumentAccess(tenant)), sync=True
        )
        assert not report.failures
    public = SourceDocument(doc_id="public/handbook.md", text="# Handbook\n\nresolver basics.\n")
    ingest.execute(
        StaticDocumentSource([public], access=DocumentAccess(public=True), source_name="pub")
    )
    store.seal()


def _milvus(name: str, uri: str) -> Engine:
    collection = f"acl_{uuid.uuid4().hex[:12]}"
    connection = MilvusConnection(uri, timeout_s=30.0)
    store = MilvusKnowledgeStore(connection, collection=collection)
    search = MilvusKnowledgeSearch(connection, collection=collection, consistency_level="Strong")
    closers: list[Callable[[], None]] = [connection.close]
    if not connection.is_lite:
        closers.append(store.drop_collection)
    return Engine(name, search, store, closers)


@pytest.fixture(
    scope="module",
    params=[
        "memory",
        "milvus-lite",
        PYPI_MILVUS,
    ],
)
def engine(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Engine]:
    if request.param == "memory":
        kb = InMemoryKnowledgeBase()
        made = Engine("memory", kb, kb, [kb.close])
    elif request.param == "milvus-lite":
        made = _milvus("milvus-lite", str(tmp_path_factory.mktemp("acl-lite") / "acl.db"))
    else:
        made = _milvus("milvus-pypi-2.3", request.getfixturevalue("pypi_milvus_uri"))
    try:
        _ingest(made.store)
        yield made
    finally:
        made.close()


def _modes(engine: Engine) -> list[SearchMode]:
    return sorted(engine.search.capabilities().modes)


CONFIGS = {
    "plain": {},
    "grouped": {"engine_grouping": True},
    "late": {"late_materialisation": True},
}


@pytest.mark.parametrize("config_name", list(CONFIGS))
@pytest.mark.parametrize("query", ["dns resolver", "firewall rollback", "postgres pgbouncer"])
def test_each_tenant_gets_only_its_own_chunks(engine: Engine, config_name: str, query: str) -> None:
    for mode in _modes(engine):
        config = LookupConfig(
            access_mode=AccessMode.ENFORCED,
            mode=mode,
            retrieval=RetrievalSettings(return_n=10, min_relevance=0.0),
            **CONFIGS[config_name],  # type: ignore[arg-type]
        )
        fx = make_lookup(engine.search, config=config, embedder=EMBEDDER, domains=DOMAINS)
        for me, other in (("acme", "globex"), ("globex", "acme")):
            result = fx.lookup.execute(
                query, session_id=me, options=LookupOptions(principal=Principal(me))
            )
            assert result.error_code is None, result.message
            texts = [b.content for b in result.evidence_blocks]
            if not (mode is SearchMode.SPARSE and me == "acme" and query.startswith("postgres")):
                assert texts, (engine.name, mode, query, me)  # (acme has no such words)
            assert all(f"{me}-marker" in t or "basics" in t for t in texts), texts
            assert not any(f"{other}-marker" in t for t in texts)
            trace = result.retrieval_trace
            assert trace["access"]["droppedByCheck"] == 0  # the engine filtered, not the check
            if me == "acme" and query.startswith("postgres"):
                assert trace["fallbackReason"] == "filtered_pass_empty"  # the retry ran
                assert len(trace["passes"]) == 2


def test_fetch_content_and_document_access_follow_the_scope(engine: Engine) -> None:
    acme_key = storage_key("acme", "kb/network/dns.md#chunk-0")
    globex_key = storage_key("globex", "kb/network/dns.md#chunk-0")
    acme = AccessScope(AccessMode.ENFORCED, Principal("acme"))
    fetched = engine.search.fetch_content([acme_key, globex_key], acme)
    assert set(fetched) == {acme_key}
    assert "acme-marker" in fetched[acme_key]
    nobody = AccessScope(AccessMode.ENFORCED, None)
    assert engine.search.fetch_content([acme_key, globex_key], nobody) == {}
    held = engine.search.document_access(["kb/network/dns.md#chunk-0"])
    assert sorted(a.tenant for a in held["kb/network/dns.md#chunk-0"]) == ["acme", "globex"]


def test_ingest_keeps_each_tenants_copy_of_a_path(engine: Engine) -> None:
    documents = engine.store.documents()
    assert storage_key("acme", "kb/network/dns.md") in documents
    assert storage_key("globex", "kb/network/dns.md") in documents
    assert storage_key("acme", "kb/database/pool.md") not in documents


def test_a_sync_of_one_tenant_never_deletes_the_others(engine: Engine) -> None:
    if engine.name == "milvus-pypi-2.3":
        pytest.skip("the write path is the same as Lite's; one server round is enough")
    ingest = IngestDocuments(
        store=engine.store,
        chunker=MarkdownChunker(chunk_size=120, chunk_overlap=0),
        clock=FakeClock(),
        embedder=EMBEDDER,
    )
    # acme's source yields the same documents again: nothing of globex's goes.
    report = ingest.execute(
        StaticDocumentSource(_documents("acme"), access=DocumentAccess("acme")), sync=True
    )
    assert report.deleted == 0
    assert storage_key("globex", "kb/database/pool.md") in engine.store.documents()
