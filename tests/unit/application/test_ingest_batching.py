"""Ingest embeds a write batch's chunks across documents in order of their length (less
padding per embed batch), and every row still gets the vector of its own text."""

from __future__ import annotations

from collections.abc import Sequence

from lookup_knowledge.adapters.embedders import HashingEmbedder
from lookup_knowledge.adapters.files.chunking import MarkdownChunker
from lookup_knowledge.adapters.memory import InMemoryKnowledgeBase
from lookup_knowledge.application.ingest import (
    IngestConfig,
    IngestDocuments,
    StaticDocumentSource,
    embedding_input,
)
from lookup_knowledge.application.ports import ChunkRecord, SourceDocument
from tests.fakes import FakeClock


class RecordingEmbedder(HashingEmbedder):
    """Counts words as its "tokens" and records every batch it is asked to embed."""

    def __init__(self) -> None:
        super().__init__(16)
        self.batches: list[list[str]] = []

    def token_lengths(self, texts: Sequence[str]) -> list[int]:
        return [len(text.split()) for text in texts]

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        self.batches.append(list(texts))
        return super().embed_documents(texts)


def _documents() -> list[SourceDocument]:
    # Each document mixes short and long sections, so document order is not length order.
    docs = []
    for d in range(6):
        sections = [
            f"## Part {s}\n\n"
            + " ".join(f"w{d}x{s}y{k}" for k in range(3 + ((d * 7 + s * 5) % 11) * 9))
            for s in range(4)
        ]
        docs.append(
            SourceDocument(
                doc_id=f"doc-{d}.md",
                text="\n\n".join(sections),
                source=f"doc-{d}.md",
                title=f"D{d}",
            )
        )
    return docs


def test_embed_batches_are_sorted_by_length_across_documents_and_rows_keep_their_vectors() -> None:
    embedder = RecordingEmbedder()
    store = InMemoryKnowledgeBase()
    ingest = IngestDocuments(
        store=store,
        chunker=MarkdownChunker(chunk_size=80, chunk_overlap=0),
        clock=FakeClock(),
        embedder=embedder,
        settings=IngestConfig(embed_batch_size=4, write_batch_size=10_000),
    )
    report = ingest.execute(StaticDocumentSource(_documents()))
    assert report.added == 6

    lengths = [[len(t.split()) for t in batch] for batch in embedder.batches]
    flat = [n for batch in lengths for n in batch]
    assert flat == sorted(flat), "one write batch is embedded shortest first"
    assert len(set(flat)) > 3, "the corpus has chunks of several lengths"
    keys_by_text = {
        embedding_input(c): c.doc_id for d in _documents() for c in ingest._chunker.chunk(d)
    }
    assert any(len({keys_by_text[t] for t in batch}) > 1 for batch in embedder.batches), (
        "an embed batch mixes documents"
    )

    reference = HashingEmbedder(16)
    records = store.records()
    assert len(records) == len(flat)
    for record in records:
        chunk_input = f"{record.breadcrumb or record.title}\n{record.text}"
        assert record.vector == tuple(reference.embed_query(chunk_input)), record.evidence_key


class UpsertSizes(InMemoryKnowledgeBase):
    def __init__(self) -> None:
        super().__init__()
        self.sizes: list[int] = []

    def upsert_chunks(self, records: Sequence[ChunkRecord]) -> int:
        self.sizes.append(len(records))
        return super().upsert_chunks(records)


def test_a_sort_window_wider_than_a_write_batch_is_written_in_write_batches() -> None:
    embedder = RecordingEmbedder()
    store = UpsertSizes()
    ingest = IngestDocuments(
        store=store,
        chunker=MarkdownChunker(chunk_size=80, chunk_overlap=0),
        clock=FakeClock(),
        embedder=embedder,
        settings=IngestConfig(embed_batch_size=4, write_batch_size=3, sort_window=12),
    )
    report = ingest.execute(StaticDocumentSource(_documents()))
    assert report.chunks_written == store.count()
    assert max(store.sizes) <= 3, store.sizes
    # Each window (>= 12 chunks, then what is left) is embedded shortest first on its own.
    lengths = [len(t.split()) for batch in embedder.batches for t in batch]
    runs, current = [], [lengths[0]]
    for n in lengths[1:]:
        if n < current[-1]:
            runs.append(current)
            current = []
        current.append(n)
    runs.append(current)
    assert len(runs) > 1, "several windows"
    assert all(len(r) >= 12 for r in runs[:-1]), [len(r) for r in runs]
