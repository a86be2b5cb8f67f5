"""BM25 on Milvus Lite through the tantivy index beside the file (``fulltext.py``):
the same rows as the collection through replace, delete and sync, the same filters,
and crash safety (a process killed between the Milvus write and the index write)."""

from __future__ import annotations

from pathlib import Path

import pytest

from lookup_knowledge.adapters.embedders import HashingEmbedder
from lookup_knowledge.adapters.files import FileDocumentSource, MarkdownChunker
from lookup_knowledge.adapters.milvus import (
    MilvusConnection,
    MilvusKnowledgeSearch,
    MilvusKnowledgeStore,
)
from lookup_knowledge.adapters.milvus import store as milvus_store
from lookup_knowledge.adapters.milvus.fulltext import FULLTEXT_DIR, FullTextIndex
from lookup_knowledge.adapters.runtime import SystemClock
from lookup_knowledge.application.ingest import IngestDocuments
from lookup_knowledge.application.ports import KnowledgeSearchRequest
from lookup_knowledge.domain.errors import IngestError
from lookup_knowledge.domain.model import SearchMode
from tests.support.files import long_markdown, write
from tests.support.killed_ingest import ingest_killed_before_index


def _ingest(store: MilvusKnowledgeStore) -> IngestDocuments:
    return IngestDocuments(
        store=store,
        chunker=MarkdownChunker(chunk_size=200, chunk_overlap=30),
        clock=SystemClock(),
        embedder=HashingEmbedder(64),
    )


def _sparse(
    search: MilvusKnowledgeSearch, text: str, *, top_k: int = 50, category: str | None = None
) -> list[str]:
    hits = search.search(
        KnowledgeSearchRequest(
            query_text=text, mode=SearchMode.SPARSE, top_k=top_k, category_filter=category
        )
    )
    return [hit.id for hit in hits]


def _all_keys(store: MilvusKnowledgeStore) -> set[str]:
    client = store._connection.client()
    rows = client.query(
        store.collection_name,
        filter="chunk_index >= 0",
        output_fields=["evidence_key"],
        consistency_level="Strong",
    )
    return {row["evidence_key"] for row in rows}


def _index(store: MilvusKnowledgeStore) -> FullTextIndex:
    index = store._collection.fulltext()
    assert index is not None
    return index


@pytest.fixture
def kb(tmp_path: Path) -> Path:
    root = tmp_path / "kb"
    write(root, "runbooks/kafka.md", long_markdown("Kafka lag", 5, "kafka consumer lag"))
    write(
        root,
        "runbooks/disk.md",
        "---\ntitle: Disk full\ncategory: storage\n---\n# Disk\n\nFree the kafka disk space.\n",
    )
    write(root, "faq/billing.md", long_markdown("Billing FAQ", 2, "invoice monthly"))
    return root


def test_sparse_on_lite_is_answered_by_the_index_beside_the_file_with_the_same_rows(
    store: MilvusKnowledgeStore, search: MilvusKnowledgeSearch, kb: Path, lite_uri: str
) -> None:
    _ingest(store).execute(FileDocumentSource(kb), sync=True)
    index = _index(store)
    assert index.root == Path(lite_uri).resolve() / FULLTEXT_DIR / store.collection_name
    assert index.count() == store.count()

    hits = search.search(
        KnowledgeSearchRequest(
            query_text="Kafka consumers lagging", mode=SearchMode.SPARSE, top_k=10
        )
    )
    assert hits
    assert all(hit.id.startswith("kb/runbooks/kafka.md#chunk-") for hit in hits[:3])
    best = hits[0]
    assert best.score > 0
    assert best.metadata["doc_id"] == "kb/runbooks/kafka.md"
    assert best.content is not None
    assert "kafka" in best.content.lower()
    # The same analysis as the documents: "lagging" is stemmed like "lag".
    assert _sparse(search, "lagging") == _sparse(search, "lag")


def test_the_category_filter_applies_exactly_as_in_milvus(
    store: MilvusKnowledgeStore, search: MilvusKnowledgeSearch, kb: Path
) -> None:
    _ingest(store).execute(FileDocumentSource(kb), sync=True)
    unfiltered = _sparse(search, "kafka disk")
    assert any(key.startswith("kb/runbooks/disk.md") for key in unfiltered)
    assert any(key.startswith("kb/runbooks/kafka.md") for key in unfiltered)
    assert _sparse(search, "kafka disk", category="storage") == [
        key for key in unfiltered if key.startswith("kb/runbooks/disk.md")
    ]
    assert _sparse(search, "kafka disk", category="Storage") == []  # exact, as Milvus' ==


def test_replace_delete_and_sync_leave_the_index_holding_the_collection_rows(
    store: MilvusKnowledgeStore, search: MilvusKnowledgeSearch, kb: Path
) -> None:
    ingest = _ingest(store)
    ingest.execute(FileDocumentSource(kb), sync=True)
    before = _sparse(search, "kafka consumer lag")
    assert len([k for k in before if k.startswith("kb/runbooks/kafka.md")]) > 2

    write(kb, "runbooks/kafka.md", "# Kafka lag\n\nRestart the zookeeper ensemble.\n")
    (kb / "faq" / "billing.md").unlink()
    report = ingest.execute(FileDocumentSource(kb), sync=True)
    assert (report.updated, report.deleted) == (1, 1)
    assert report.chunks_deleted > 0

    assert _index(store).count() == store.count() == len(_all_keys(store))
    assert _sparse(search, "zookeeper ensemble") == ["kb/runbooks/kafka.md#chunk-0"]
    assert _sparse(search, "invoice monthly") == []
    assert set(_sparse(search, "kafka")) <= _all_keys(store)


def test_ingest_says_once_that_a_lite_collection_outgrew_lite(
    store: MilvusKnowledgeStore, kb: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ingest = _ingest(store)
    first = ingest.execute(FileDocumentSource(kb / "faq"), sync=True)
    assert first.notices == ()
    monkeypatch.setattr(milvus_store, "LITE_SERVER_ADVICE_ROWS", store.count() + 1)
    crossing = ingest.execute(FileDocumentSource(kb / "runbooks"), sync=True)
    assert len(crossing.notices) == 1
    assert f"holds {store.count():,} chunks" in crossing.notices[0]
    assert "milvus.uri=http://" in crossing.notices[0]
    assert crossing.as_dict()["notices"] == list(crossing.notices)
    write(kb, "runbooks/more.md", long_markdown("More", 3, "more words"))
    later = ingest.execute(FileDocumentSource(kb / "runbooks"), sync=True)
    assert later.chunks_written > 0
    assert later.notices == ()


def test_a_failed_milvus_write_is_repaired_from_milvus_before_the_next_search(
    store: MilvusKnowledgeStore, search: MilvusKnowledgeSearch, kb: Path
) -> None:
    ingest = _ingest(store)
    ingest.execute(FileDocumentSource(kb), sync=True)
    index = _index(store)
    client = store._connection.client()
    real_upsert = client.upsert

    def upsert_then_fail(*args: object, **kwargs: object) -> object:
        real_upsert(*args, **kwargs)  # the rows reach Milvus, the index never hears of them
        raise OSError("connection reset after the write")

    write(kb, "runbooks/disk.md", "# Disk\n\nRotate the journald logs weekly.\n")
    client.upsert = upsert_then_fail
    try:
        with pytest.raises(IngestError):
            ingest.execute(FileDocumentSource(kb), sync=True)
    finally:
        client.upsert = real_upsert
    assert (index.root / "pending.jsonl").exists()
    assert "kb/runbooks/disk.md#chunk-0" in _sparse(search, "journald logs")
    assert index.count() == store.count()


def test_a_missing_index_is_rebuilt_from_milvus_on_open(
    lite_uri: str, collection: str, kb: Path
) -> None:
    connection = MilvusConnection(lite_uri, timeout_s=30.0)
    try:
        store = MilvusKnowledgeStore(connection, collection=collection)
        _ingest(store).execute(FileDocumentSource(kb), sync=True)
        root = _index(store).root
        expected = store.count()
    finally:
        connection.close()
    FullTextIndex.remove(root)
    connection = MilvusConnection(lite_uri, timeout_s=30.0)
    try:
        search = MilvusKnowledgeSearch(connection, collection=collection)
        assert _sparse(search, "invoice monthly")
        assert (root / "meta.json").exists()
        store = MilvusKnowledgeStore(connection, collection=collection)
        assert _index(store).count() == expected
    finally:
        connection.close()


def test_a_process_killed_between_the_milvus_write_and_the_index_write_is_repaired_on_open(
    collection: str, kb: Path, tmp_path: Path
) -> None:
    lite_uri = str(tmp_path / "killed.db")  # its own file: the child process opens it
    connection = MilvusConnection(lite_uri, timeout_s=30.0)
    try:
        store = MilvusKnowledgeStore(connection, collection=collection)
        _ingest(store).execute(FileDocumentSource(kb), sync=True)
        root = _index(store).root
    finally:
        connection.close()  # the child process needs the Lite folder

    write(kb, "runbooks/kafka.md", "# Kafka lag\n\nRestart the zookeeper ensemble.\n")
    ingest_killed_before_index(FullTextIndex, lite_uri, collection, kb, tmp_path)
    assert (root / "pending.jsonl").exists()  # the journal says what was interrupted

    connection = MilvusConnection(lite_uri, timeout_s=30.0)
    try:
        search = MilvusKnowledgeSearch(connection, collection=collection)
        store = MilvusKnowledgeStore(connection, collection=collection)
        found = _sparse(search, "zookeeper ensemble")
        assert found == ["kb/runbooks/kafka.md#chunk-0"]
        assert not (root / "pending.jsonl").exists()
        assert _index(store).count() == store.count()
        # What Milvus holds of the interrupted document is what BM25 finds of it.
        kafka = {k for k in _all_keys(store) if k.startswith("kb/runbooks/kafka.md")}
        assert {k for k in _sparse(search, "kafka lag restart") if k in kafka} <= kafka
    finally:
        connection.close()


def test_hybrid_gives_the_same_hits_with_its_bm25_list_on_a_worker_thread(
    store: MilvusKnowledgeStore, connection: MilvusConnection, collection: str, kb: Path
) -> None:
    _ingest(store).execute(FileDocumentSource(kb), sync=True)
    embedder = HashingEmbedder(64)
    request = KnowledgeSearchRequest(
        query_text="kafka consumer lag",
        mode=SearchMode.HYBRID,
        top_k=8,
        query_vector=embedder.embed_query("kafka consumer lag"),
        embedder=embedder.identity,
    )
    results = []
    for concurrent in (False, True):
        search = MilvusKnowledgeSearch(
            connection, collection=collection, concurrent_hybrid=concurrent
        )
        try:
            hits = search.search(request)
        finally:
            search.close()
        results.append([(hit.id, hit.score, hit.component_scores) for hit in hits])
    assert results[0]
    assert results[0] == results[1]
