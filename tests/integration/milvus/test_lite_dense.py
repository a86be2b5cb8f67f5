"""Dense search on Milvus Lite through the HNSW index beside the file (``dense_index.py``,
``lite_dense.py``): the same hits as Lite's own search, text served by Lite, re-ingest
deletes reaching the index, and crash safety (a process killed between the Lite write
and the index write)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pytest

from lookup_knowledge.adapters.embedders import HashingEmbedder
from lookup_knowledge.adapters.files import FileDocumentSource
from lookup_knowledge.adapters.milvus import (
    MilvusConnection,
    MilvusKnowledgeSearch,
    MilvusKnowledgeStore,
)
from lookup_knowledge.adapters.milvus import lite_dense as lite_dense_module
from lookup_knowledge.adapters.milvus.dense_index import DENSE_DIR, DenseIndex
from lookup_knowledge.adapters.milvus.filters import in_list
from lookup_knowledge.adapters.milvus.fulltext import FULLTEXT_DIR
from lookup_knowledge.adapters.milvus.lite_dense import lite_dense
from lookup_knowledge.adapters.milvus.lite_point_read import lite_get
from lookup_knowledge.adapters.milvus.schema import LIGHT_FIELDS, PK, TEXT
from lookup_knowledge.application.ingest import IngestDocuments
from lookup_knowledge.application.ports import KnowledgeSearchRequest
from lookup_knowledge.domain.model import SearchMode
from tests.integration.milvus.test_lite_fulltext import _all_keys, _ingest
from tests.support.files import long_markdown, write
from tests.support.killed_ingest import ingest_killed_before_index

EMBEDDER = HashingEmbedder(64)


def _dense(
    search: MilvusKnowledgeSearch, text: str, *, top_k: int = 50, category: str | None = None
) -> list[str]:
    hits = search.search(
        KnowledgeSearchRequest(
            query_text=text,
            mode=SearchMode.DENSE,
            top_k=top_k,
            category_filter=category,
            query_vector=EMBEDDER.embed_query(text),
            embedder=EMBEDDER.identity,
        )
    )
    return [hit.id for hit in hits]


def _index(store: MilvusKnowledgeStore) -> DenseIndex:
    index = lite_dense(store._collection)
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


def test_dense_on_lite_is_answered_by_the_index_beside_the_file_with_lites_hits(
    store: MilvusKnowledgeStore,
    search: MilvusKnowledgeSearch,
    ingest: IngestDocuments,
    kb: Path,
    lite_uri: str,
) -> None:
    ingest.execute(FileDocumentSource(kb), sync=True)
    index = _index(store)
    assert index.root == Path(lite_uri).resolve() / DENSE_DIR / store.collection_name
    assert index.count() == store.count()
    assert (index.root / "index.bin").exists()  # written at seal

    request = KnowledgeSearchRequest(
        query_text="kafka consumer lag",
        mode=SearchMode.DENSE,
        top_k=100,
        query_vector=EMBEDDER.embed_query("kafka consumer lag"),
        embedder=EMBEDDER.identity,
    )
    hits = search.search(request)
    # Lite's own search of the same vector (every row: a small collection).
    lite = store._connection.client().search(
        store.collection_name,
        data=[list(request.query_vector or ())],
        anns_field="dense_vector",
        limit=100,
        output_fields=["evidence_key"],
        search_params={"metric_type": "COSINE", "params": {"ef": 256}},
    )[0]
    # The same rows and scores; rows whose scores tie (chunks with the same vector) may
    # come in either order (the index answers a small collection by exact search).
    assert [hit.score for hit in hits] == pytest.approx([float(h["distance"]) for h in lite])
    assert _by_score((hit.id, hit.score) for hit in hits) == _by_score(
        (str(h["evidence_key"]), float(h["distance"])) for h in lite
    )
    best = hits[0]
    assert best.content is not None  # the text comes from Lite, by primary key
    assert best.metadata["doc_id"] == best.id.split("#chunk-")[0]
    storage = _dense(search, "kafka disk", category="storage")
    assert storage
    assert all(key.startswith("kb/runbooks/disk.md") for key in storage)
    assert _dense(search, "kafka disk", category="Storage") == []  # exact, as Milvus' ==


def test_a_reingested_document_leaves_the_index_holding_the_collection_rows(
    store: MilvusKnowledgeStore, search: MilvusKnowledgeSearch, ingest: IngestDocuments, kb: Path
) -> None:
    ingest.execute(FileDocumentSource(kb), sync=True)
    before = set(_dense(search, "kafka consumer lag", top_k=100))
    assert len([k for k in before if k.startswith("kb/runbooks/kafka.md")]) > 2

    write(kb, "runbooks/kafka.md", "# Kafka lag\n\nRestart the zookeeper ensemble.\n")
    (kb / "faq" / "billing.md").unlink()
    report = ingest.execute(FileDocumentSource(kb), sync=True)
    assert (report.updated, report.deleted) == (1, 1)

    assert _index(store).count() == store.count() == len(_all_keys(store))
    assert set(_dense(search, "anything at all", top_k=100)) == _all_keys(store)


def test_a_process_killed_between_the_lite_write_and_the_index_write_is_rebuilt_consistent(
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
    write(kb, "runbooks/new.md", long_markdown("New runbook", 3, "fresh words"))
    ingest_killed_before_index(DenseIndex, lite_uri, collection, kb, tmp_path)
    assert (root / "pending.jsonl").exists()  # the journal says what was interrupted

    connection = MilvusConnection(lite_uri, timeout_s=30.0)
    try:
        search = MilvusKnowledgeSearch(connection, collection=collection)
        store = MilvusKnowledgeStore(connection, collection=collection)
        found = set(_dense(search, "zookeeper ensemble", top_k=200))
        assert not (root / "pending.jsonl").exists()  # repaired on open
        assert _index(store).count() == store.count()
        assert found == _all_keys(store)  # every row Lite holds, and nothing else
    finally:
        connection.close()


def test_lites_point_read_in_process_gives_the_rows_pymilvus_reads_over_grpc(
    store: MilvusKnowledgeStore, ingest: IngestDocuments, kb: Path
) -> None:
    ingest.execute(FileDocumentSource(kb), sync=True)
    keys = [*sorted(_all_keys(store))[::-1], "kb/no/such.md#chunk-0"]
    fields = [*LIGHT_FIELDS, TEXT]
    direct = lite_get(store._connection, store.collection_name, keys, fields)
    assert direct is not None  # the in-process path is taken on Lite
    over_grpc = store._connection.client().query(
        store.collection_name, filter=in_list(PK, keys), output_fields=fields
    )
    assert sorted(map(_items, direct)) == sorted(map(_items, over_grpc))
    assert len(direct) == len(keys) - 1  # a key Lite does not hold is left out
    assert all(set(row) == {PK, *fields} for row in direct)


def test_dense_hits_are_served_without_a_grpc_read_and_equal_those_read_over_grpc(
    search: MilvusKnowledgeSearch,
    ingest: IngestDocuments,
    kb: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ingest.execute(FileDocumentSource(kb), sync=True)
    request = KnowledgeSearchRequest(
        query_text="kafka consumer lag",
        mode=SearchMode.DENSE,
        top_k=20,
        include_content=True,
        query_vector=EMBEDDER.embed_query("kafka consumer lag"),
        embedder=EMBEDDER.identity,
    )
    search.search(request)  # opens (here: builds) the index beside the file, over gRPC
    client = search._collection.connection.client()
    with monkeypatch.context() as patch:
        patch.setattr(client, "query", _refused)  # a read over gRPC would fail the search
        direct = search.search(request)
    with monkeypatch.context() as patch:
        patch.setattr(lite_dense_module, "lite_get", lambda *args: None)
        over_grpc = search.search(request)
    assert direct
    assert [(h.id, h.score, h.content, h.metadata) for h in direct] == [
        (h.id, h.score, h.content, h.metadata) for h in over_grpc
    ]


def _refused(*args: object, **kwargs: object) -> object:
    raise AssertionError("read over gRPC")


def _items(row: dict[str, object]) -> list[tuple[str, str]]:
    return sorted((key, repr(value)) for key, value in row.items())


def _by_score(hits: Iterable[tuple[str, float]]) -> list[tuple[float, frozenset[str]]]:
    """Ids grouped by their score (rounded), best first: an order that ignores ties."""
    groups: dict[float, set[str]] = {}
    for key, score in hits:
        groups.setdefault(round(score, 5), set()).add(key)
    return [(score, frozenset(keys)) for score, keys in sorted(groups.items(), reverse=True)]


def test_warm_opens_the_indexes_beside_the_file_and_makes_none_for_a_collection_not_ingested(
    collection: str, kb: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    lite_uri = str(tmp_path / "warm.db")
    connection = MilvusConnection(lite_uri, timeout_s=30.0)
    try:
        MilvusKnowledgeSearch(connection, collection="never_ingested").warm()
        assert not (Path(lite_uri) / DENSE_DIR / "never_ingested").exists()
        assert not (Path(lite_uri) / FULLTEXT_DIR / "never_ingested").exists()
        store = MilvusKnowledgeStore(connection, collection=collection)
        _ingest(store).execute(FileDocumentSource(kb), sync=True)
        root = _index(store).root
    finally:
        connection.close()

    connection = MilvusConnection(lite_uri, timeout_s=30.0)  # a process starting afresh
    try:
        search = MilvusKnowledgeSearch(connection, collection=collection)
        search.warm()
        (root / "index.bin").unlink()  # read by the warm-up: the lookup needs it no more
        with caplog.at_level("WARNING"):
            found = set(_dense(search, "kafka consumer lag", top_k=200))
        assert found == _all_keys(MilvusKnowledgeStore(connection, collection=collection))
        assert "rebuilding" not in caplog.text
    finally:
        connection.close()
