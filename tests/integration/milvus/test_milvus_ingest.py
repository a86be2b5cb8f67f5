"""IngestDocuments over Milvus Lite: idempotence, replacement, sync, identity on rows."""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from lookup_knowledge.adapters.files import FileDocumentSource, MarkdownChunker
from lookup_knowledge.adapters.milvus import MilvusKnowledgeSearch, MilvusKnowledgeStore
from lookup_knowledge.adapters.runtime import SystemClock
from lookup_knowledge.application.ingest import IngestDocuments, IngestProgress
from lookup_knowledge.application.ports import ChunkRecord, KnowledgeSearchRequest, SourceDocument
from lookup_knowledge.domain.errors import IngestError, UnsupportedSearchMode
from lookup_knowledge.domain.model import SearchMode
from tests.support.files import long_markdown, write

ROW_FIELDS = [
    "evidence_key",
    "doc_id",
    "chunk_index",
    "category",
    "source",
    "title",
    "breadcrumb",
    "source_type",
    "text",
    "content_hash",
    "ingested_at",
    "source_name",
]


def rows(store: MilvusKnowledgeStore, fields: Sequence[str] = ROW_FIELDS) -> list[dict[str, Any]]:
    client = store._connection.client()
    return list(
        client.query(store.collection_name, filter="chunk_index >= 0", output_fields=list(fields))
    )


def keys_by_doc(store: MilvusKnowledgeStore) -> dict[str, list[str]]:
    out: dict[str, list[str]] = defaultdict(list)
    for row in rows(store, ["evidence_key", "doc_id"]):
        out[row["doc_id"]].append(row["evidence_key"])
    return {k: sorted(v) for k, v in out.items()}


@pytest.fixture
def kb(tmp_path: Path) -> Path:
    root = tmp_path / "kb"
    write(root, "runbooks/kafka.md", long_markdown("Kafka lag", 5, "kafka consumer lag"))
    write(
        root,
        "runbooks/disk.md",
        "---\ntitle: Disk full\ntype: runbook\ncategory: storage\n---\n# Disk\n\nFree space.\n",
    )
    write(root, "faq/billing.md", long_markdown("Billing FAQ", 2, "invoice monthly"))
    write(root, "notes.txt", "# not a heading in a text file\nplain words here\n")
    return root


def test_ingesting_the_same_folder_twice_writes_nothing_the_second_time(
    ingest: IngestDocuments, store: MilvusKnowledgeStore, kb: Path
) -> None:
    first = ingest.execute(FileDocumentSource(kb), sync=True)
    assert (first.documents_seen, first.added, first.updated, first.unchanged) == (4, 4, 0, 0)
    assert first.chunks_written == store.count() > 4
    before = {r["evidence_key"]: r["ingested_at"] for r in rows(store)}

    second = ingest.execute(FileDocumentSource(kb), sync=True)
    assert (second.documents_seen, second.added, second.updated, second.unchanged) == (4, 0, 0, 4)
    assert (second.chunks_written, second.chunks_deleted, second.deleted) == (0, 0, 0)
    assert second.wrote_nothing
    assert {r["evidence_key"]: r["ingested_at"] for r in rows(store)} == before


def test_a_changed_document_is_replaced_without_stale_chunks(
    ingest: IngestDocuments, store: MilvusKnowledgeStore, kb: Path
) -> None:
    ingest.execute(FileDocumentSource(kb))
    old_keys = keys_by_doc(store)["kb/runbooks/kafka.md"]
    assert len(old_keys) >= 5

    write(kb, "runbooks/kafka.md", "# Kafka lag\n\nShort now: restart the consumer.\n")
    report = ingest.execute(FileDocumentSource(kb))
    assert (report.updated, report.unchanged, report.added) == (1, 3, 0)
    assert report.chunks_written == 1
    assert report.chunks_deleted == len(old_keys) - 1
    assert keys_by_doc(store)["kb/runbooks/kafka.md"] == ["kb/runbooks/kafka.md#chunk-0"]
    (row,) = [r for r in rows(store) if r["doc_id"] == "kb/runbooks/kafka.md"]
    assert "Short now" in row["text"]
    assert (
        store.document_hashes(["kb/runbooks/kafka.md"])["kb/runbooks/kafka.md"]
        == row["content_hash"]
    )


def test_sync_deletes_documents_that_disappeared_and_only_with_sync(
    ingest: IngestDocuments, store: MilvusKnowledgeStore, kb: Path
) -> None:
    ingest.execute(FileDocumentSource(kb))
    (kb / "faq" / "billing.md").unlink()

    plain = ingest.execute(FileDocumentSource(kb))
    assert plain.deleted == 0
    assert "kb/faq/billing.md" in keys_by_doc(store)

    synced = ingest.execute(FileDocumentSource(kb), sync=True)
    assert synced.deleted == 1
    assert synced.chunks_deleted >= 2
    assert "kb/faq/billing.md" not in keys_by_doc(store)
    assert set(keys_by_doc(store)) == {
        "kb/runbooks/kafka.md",
        "kb/runbooks/disk.md",
        "kb/notes.txt",
    }


def test_sync_of_a_subfolder_leaves_the_rest_alone(
    ingest: IngestDocuments, store: MilvusKnowledgeStore, kb: Path
) -> None:
    ingest.execute(FileDocumentSource(kb))
    (kb / "runbooks" / "disk.md").unlink()
    report = ingest.execute(FileDocumentSource(kb / "runbooks", root=kb), sync=True)
    assert (report.documents_seen, report.deleted) == (1, 1)
    assert set(keys_by_doc(store)) == {"kb/runbooks/kafka.md", "kb/faq/billing.md", "kb/notes.txt"}


def test_sync_refuses_to_empty_the_store_from_an_empty_source(
    ingest: IngestDocuments, store: MilvusKnowledgeStore, kb: Path, tmp_path: Path
) -> None:
    ingest.execute(FileDocumentSource(kb))
    count = store.count()
    empty = tmp_path / "empty"
    empty.mkdir()
    # Another folder is another source: its sync never touches kb's documents.
    assert ingest.execute(FileDocumentSource(empty), sync=True).deleted == 0
    # The same source, emptied (a wrong path given as kb): refused unless allowed.
    with pytest.raises(IngestError, match="refusing"):
        ingest.execute(FileDocumentSource(empty, source_name="kb"), sync=True)
    assert store.count() == count
    report = ingest.execute(
        FileDocumentSource(empty, source_name="kb"), sync=True, allow_empty_sync=True
    )
    assert report.deleted == 4
    assert store.count() == 0


def test_an_unreadable_file_is_reported_and_survives_sync(
    ingest: IngestDocuments, store: MilvusKnowledgeStore, kb: Path
) -> None:
    ingest.execute(FileDocumentSource(kb))
    (kb / "faq" / "billing.md").write_bytes(b"\xff\xfe not utf-8 \xc3\x28")
    report = ingest.execute(FileDocumentSource(kb), sync=True)
    assert [(f.doc_id, "UTF-8" in f.reason) for f in report.failures] == [
        ("kb/faq/billing.md", True)
    ]
    assert report.deleted == 0
    assert "kb/faq/billing.md" in keys_by_doc(store)


def test_every_row_carries_the_identity_fields(
    ingest: IngestDocuments, store: MilvusKnowledgeStore, kb: Path
) -> None:
    ingest.execute(FileDocumentSource(kb))
    all_rows = rows(store, [*ROW_FIELDS, "dense_vector"])
    assert all_rows
    by_doc: dict[str, list[int]] = defaultdict(list)
    for row in all_rows:
        assert row["evidence_key"] == f"{row['doc_id']}#chunk-{row['chunk_index']}"
        assert row["text"].strip()
        assert row["title"]
        assert row["source"]
        assert row["source_type"]
        assert len(row["content_hash"]) == 64
        assert row["ingested_at"] > 1_600_000_000_000
        assert len(row["dense_vector"]) == 64
        by_doc[row["doc_id"]].append(row["chunk_index"])
    for doc_id, indexes in by_doc.items():
        assert sorted(indexes) == list(range(len(indexes))), doc_id
    disk = next(r for r in all_rows if r["doc_id"] == "kb/runbooks/disk.md")
    assert (disk["category"], disk["title"], disk["source_type"]) == (
        "storage",
        "Disk full",
        "runbook",
    )
    kafka = [r for r in all_rows if r["doc_id"] == "kb/runbooks/kafka.md"]
    assert {r["category"] for r in kafka} == {"runbooks"}
    assert any(r["breadcrumb"] == "Kafka lag > Section 3" for r in kafka)
    notes = next(r for r in all_rows if r["doc_id"] == "kb/notes.txt")
    assert (notes["category"], notes["source_type"], notes["breadcrumb"]) == ("", "text", "")


def test_progress_is_reported_through_the_callback(ingest: IngestDocuments, kb: Path) -> None:
    events: list[IngestProgress] = []
    ingest.execute(FileDocumentSource(kb), sync=True, progress=events.append)
    phases = [e.phase for e in events]
    assert phases[-1] == "done"
    assert {"scan", "write", "sync"} <= set(phases)
    assert events[-1].documents_done == events[-1].documents_total == 4
    assert events[-1].chunks_written > 0
    done = [e.documents_done for e in events]
    assert done == sorted(done)


class _DiesOnWrite(MilvusKnowledgeStore):
    """A store whose process 'dies' on its n-th write (upsert or delete)."""

    def __init__(self, *args: Any, die_at: int, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.die_at = die_at
        self.writes = 0

    def _tick(self) -> None:
        self.writes += 1
        if self.writes == self.die_at:
            raise IngestError("simulated crash")

    def upsert_chunks(self, records: Sequence[ChunkRecord]) -> int:
        self._tick()
        return super().upsert_chunks(records)

    def delete_chunks_except(self, doc_ids: Sequence[str], keep_keys: Sequence[str]) -> int:
        self._tick()
        return super().delete_chunks_except(doc_ids, keep_keys)


@pytest.mark.parametrize("die_at", [1, 2, 3, 4])
def test_a_run_that_dies_mid_write_is_repaired_by_the_next_run(
    connection: Any,
    collection: str,
    store: MilvusKnowledgeStore,
    kb: Path,
    embedder: Any,
    die_at: int,
) -> None:
    chunker = MarkdownChunker(chunk_size=200, chunk_overlap=30)
    good = IngestDocuments(store=store, chunker=chunker, clock=SystemClock(), embedder=embedder)
    good.execute(FileDocumentSource(kb))
    # One changed and one new document, both several chunks long: the run writes
    # pending head of the new one, the other chunks, the stale delete, the heads.
    write(kb, "runbooks/kafka.md", long_markdown("Kafka lag", 2, "rewritten text"))
    write(kb, "runbooks/new.md", long_markdown("New runbook", 3, "brand new"))
    dying = IngestDocuments(
        store=_DiesOnWrite(connection, collection=collection, die_at=die_at),
        chunker=chunker,
        clock=SystemClock(),
        embedder=embedder,
    )
    with pytest.raises(IngestError, match="simulated crash"):
        dying.execute(FileDocumentSource(kb))
    # Both change again (shorter) before the next run: leftovers would now be stale.
    write(kb, "runbooks/kafka.md", long_markdown("Kafka lag", 1, "short again"))
    write(kb, "runbooks/new.md", long_markdown("New runbook", 1, "short new"))

    repaired = good.execute(FileDocumentSource(kb))
    assert repaired.added + repaired.updated == 2
    assert repaired.unchanged == 3
    loaded = {
        d.doc_id: d for d in FileDocumentSource(kb).documents() if isinstance(d, SourceDocument)
    }
    for doc_id in ("kb/runbooks/kafka.md", "kb/runbooks/new.md"):
        stored = {r["chunk_index"]: r for r in rows(store) if r["doc_id"] == doc_id}
        expected = chunker.chunk(loaded[doc_id])
        assert sorted(stored) == [c.chunk_index for c in expected], doc_id
        assert [stored[c.chunk_index]["text"] for c in expected] == [c.text for c in expected]
        assert len({r["content_hash"] for r in stored.values()}) == 1
    assert good.execute(FileDocumentSource(kb)).wrote_nothing


def test_a_document_emptied_out_loses_its_rows(
    ingest: IngestDocuments, store: MilvusKnowledgeStore, kb: Path
) -> None:
    ingest.execute(FileDocumentSource(kb))
    write(kb, "runbooks/disk.md", "---\ntitle: Disk full\n---\n\n")
    report = ingest.execute(FileDocumentSource(kb))
    assert report.empty == 1
    assert "kb/runbooks/disk.md" not in keys_by_doc(store)


def test_a_sparse_only_store_needs_no_embedder(
    store: MilvusKnowledgeStore, search: MilvusKnowledgeSearch, kb: Path
) -> None:
    ingest = IngestDocuments(
        store=store, chunker=MarkdownChunker(chunk_size=200, chunk_overlap=30), clock=SystemClock()
    )
    report = ingest.execute(FileDocumentSource(kb))
    assert report.added == 4
    assert search.capabilities().modes == frozenset({SearchMode.SPARSE})
    hits = search.search(KnowledgeSearchRequest("kafka consumer lag", 3, SearchMode.SPARSE))
    assert hits
    assert hits[0].identity.doc_id == "kb/runbooks/kafka.md"
    with pytest.raises(UnsupportedSearchMode, match="without an embedder"):
        search.search(
            KnowledgeSearchRequest("kafka", 3, SearchMode.DENSE, query_vector=(0.1,) * 64)
        )


def test_a_load_that_meets_a_half_written_index_is_retried_without_a_traceback(
    ingest: IngestDocuments,
    store: MilvusKnowledgeStore,
    kb: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    """Lite's background builder may be writing a segment's index when ``seal`` loads the
    collection; the load fails ("read error in ...idx") and is retried. Lite's servicer
    and pymilvus log that failure with a traceback on their own: it must not reach
    stderr (it failed CI once), and the retry must still happen."""
    import logging

    from milvus_lite.engine.collection import Collection

    real_load = Collection.load
    calls: list[int] = []

    def flaky_load(self: Collection) -> None:
        if not any(seg.num_rows for seg in self._segment_cache.values()):
            real_load(self)  # creating the collection loads it too
            return
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError(
                "Error in faiss::read_index_up: read error in /x/data_000002.dense_vector"
                ".hnsw.idx: 0 != 1 (Resource temporarily unavailable)"
            )
        real_load(self)

    seen: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record)

    keep = Keep(logging.DEBUG)
    logging.getLogger().addHandler(keep)
    monkeypatch.setattr(Collection, "load", flaky_load)
    try:
        report = ingest.execute(FileDocumentSource(kb))
        quiet = not [r for r in seen if "read error" in r.getMessage()]
        # Any other load failure is still logged by the libraries (only this one is quiet).
        logging.getLogger("milvus_lite.adapter.grpc.servicer").error("LoadCollection failed: x")
    finally:
        logging.getLogger().removeHandler(keep)

    assert report.failed == 0
    assert len(calls) >= 2
    assert quiet
    assert seen[-1].getMessage() == "LoadCollection failed: x"
    captured = capfd.readouterr()
    assert "Traceback" not in captured.err
    assert "read error" not in captured.err


def test_an_index_file_a_crash_left_short_is_rebuilt_not_fatal(
    kb: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Lite writes index files in place: a process killed while writing one leaves it
    short, and every later load failed ("read error in ...idx"), so no lookup could be
    answered again. The damaged file is derived data: it is removed and rebuilt."""
    import glob

    from lookup_knowledge.adapters.embedders import HashingEmbedder
    from lookup_knowledge.adapters.milvus import MilvusConnection, lite_load

    monkeypatch.setattr(lite_load.time, "sleep", lambda _s: None)
    uri = str(tmp_path / "crash" / "knowledge.db")
    embedder = HashingEmbedder(64)
    first = MilvusConnection(uri, timeout_s=30.0)
    IngestDocuments(
        store=MilvusKnowledgeStore(first, collection="kb"),
        chunker=MarkdownChunker(chunk_size=200, chunk_overlap=30),
        clock=SystemClock(),
        embedder=embedder,
    ).execute(FileDocumentSource(kb))
    first.close()
    dense = [p for p in glob.glob(f"{uri}/**/indexes/*.idx", recursive=True) if "dense" in p]
    assert dense
    with open(dense[0], "r+b") as handle:
        handle.truncate(Path(dense[0]).stat().st_size // 2)

    again = MilvusConnection(uri, timeout_s=30.0)
    try:
        search = MilvusKnowledgeSearch(again, collection="kb")
        request = KnowledgeSearchRequest(
            query_text="kafka consumer lag",
            query_vector=embedder.embed_query("kafka consumer lag"),
            top_k=3,
            mode=SearchMode.DENSE,
        )
        with caplog.at_level(logging.WARNING):
            hits = search.search(request)
    finally:
        again.close()
    assert hits
    assert any("is damaged" in r.getMessage() for r in caplog.records)
    assert Path(dense[0]).stat().st_size > 0  # rebuilt by Lite
    assert "Traceback" not in capfd.readouterr().err


def _counting_flushes(store: MilvusKnowledgeStore, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    client = store._connection.client()
    flushed: list[str] = []
    real = client.flush

    def flush(name: str, **kwargs: Any) -> Any:
        flushed.append(name)
        return real(name, **kwargs)

    monkeypatch.setattr(client, "flush", flush)
    return flushed


def test_lite_is_flushed_during_ingest_once_its_unflushed_rows_pass_the_budget(
    connection: Any,
    collection: str,
    embedder: Any,
    search: MilvusKnowledgeSearch,
    kb: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    store = MilvusKnowledgeStore(
        connection, collection=collection, write_batch_size=3, lite_flush_bytes=2_000
    )
    flushed = _counting_flushes(store, monkeypatch)
    ingest = IngestDocuments(
        store=store,
        chunker=MarkdownChunker(chunk_size=200, chunk_overlap=30),
        clock=SystemClock(),
        embedder=embedder,
    )
    report = ingest.execute(FileDocumentSource(kb))
    written = len(rows(store))
    assert report.chunks_written == written
    # every ~2 kB of rows, then the seal's: more than one flush, fewer than one per batch
    assert 2 < len(flushed) <= written // 3 + 1
    hits = search.search(KnowledgeSearchRequest("kafka consumer lag", 3, SearchMode.SPARSE))
    assert hits[0].identity.doc_id == "kb/runbooks/kafka.md"
    assert ingest.execute(FileDocumentSource(kb)).unchanged == 4


def test_a_small_ingest_on_lite_flushes_once_when_it_is_sealed(
    store: MilvusKnowledgeStore, ingest: IngestDocuments, kb: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    flushed = _counting_flushes(store, monkeypatch)
    ingest.execute(FileDocumentSource(kb))
    assert flushed == [store.collection_name]
