"""Ingest rate: IngestDocuments vs a raw pymilvus insert of the same rows.

Generates a synthetic Markdown corpus in memory (documents with headed sections of
~600 characters), runs it through ``IngestDocuments`` (chunking, hashing, batching,
upserts with the crash-safe write order) into one collection, then inserts exactly the
rows it wrote (same keys, texts and vectors) with plain ``client.insert`` batches into a
second collection of the same schema. The embedder is a fixed table lookup: its cost
is timed and reported separately and excluded from the chunks/s figures. A second,
unchanged ingest shows the idempotent re-run.

    .venv/bin/python benchmarks/bench_ingest.py --chunks 20000
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
import zlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from lookup_knowledge.adapters.files import MarkdownChunker
from lookup_knowledge.adapters.milvus import MilvusConnection, MilvusKnowledgeStore
from lookup_knowledge.adapters.milvus import schema as fields
from lookup_knowledge.adapters.runtime import SystemClock
from lookup_knowledge.application.ingest import (
    IngestConfig,
    IngestDocuments,
    StaticDocumentSource,
    embedding_input,
)
from lookup_knowledge.application.ports import Embedder, SourceDocument

DIM = 384
SECTIONS_PER_DOC = 6
RESULTS = Path(__file__).resolve().parent / "results"


class TimedFixedEmbedder(Embedder):
    """A deterministic vector per text (seeded by its CRC), with the time spent counted."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.cache: dict[str, list[float]] = {}

    @property
    def dimension(self) -> int:
        return DIM

    @property
    def name(self) -> str:
        return "bench-fixed"

    def _one(self, text: str) -> list[float]:
        vector = np.random.default_rng(zlib.crc32(text.encode())).standard_normal(DIM)
        result = (vector / np.linalg.norm(vector)).tolist()
        self.cache[text] = result
        return result

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        started = time.perf_counter()
        out = [self._one(t) for t in texts]
        self.seconds += time.perf_counter() - started
        return out


def corpus(chunks: int) -> list[SourceDocument]:
    rng = np.random.default_rng(5)
    vocab = [
        "".join(rng.choice(list("etaoinshrdlucmfw"), size=rng.integers(3, 9))) for _ in range(3000)
    ]
    docs: list[SourceDocument] = []
    for d in range(max(1, chunks // SECTIONS_PER_DOC)):
        parts = [f"# Document {d}\n"]
        for s in range(SECTIONS_PER_DOC):
            words = " ".join(vocab[i] for i in rng.integers(0, len(vocab), size=95))
            parts.append(f"## Section {s}\n\n{words[:560]}.\n")
        docs.append(
            SourceDocument(
                doc_id=f"kb/doc-{d:06d}.md",
                text="\n".join(parts),
                source=f"kb/doc-{d:06d}.md",
                title=f"Document {d}",
                category=f"cat-{d % 8}",
                source_type="markdown",
            )
        )
    return docs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=20_000, help="about this many chunks")
    parser.add_argument("--uri", help="Milvus URI (default: a fresh Lite file in results/)")
    parser.add_argument("--token", default=None)
    parser.add_argument("--batch", type=int, default=500, help="write batch (both paths)")
    args = parser.parse_args()

    RESULTS.mkdir(parents=True, exist_ok=True)
    uri = args.uri
    if uri is None:
        path = RESULTS / "bench_ingest.db"
        shutil.rmtree(path, ignore_errors=True)
        if path.exists():
            path.unlink()
        uri = str(path)
    connection = MilvusConnection(uri, token=args.token, timeout_s=120.0)
    print(f"Milvus {connection.capabilities().version} at {connection.uri}", file=sys.stderr)
    documents = corpus(args.chunks)
    chunker = MarkdownChunker(chunk_size=700, chunk_overlap=100)
    embedder = TimedFixedEmbedder()

    store = MilvusKnowledgeStore(
        connection, collection="bench_ingest_usecase", write_batch_size=args.batch
    )
    store.drop_collection()
    use_case = IngestDocuments(
        store=store,
        chunker=chunker,
        clock=SystemClock(),
        embedder=embedder,
        settings=IngestConfig(write_batch_size=args.batch),
    )
    started = time.perf_counter()
    report = use_case.execute(StaticDocumentSource(documents))
    total = time.perf_counter() - started
    embed = embedder.seconds
    written = report.chunks_written

    started = time.perf_counter()
    again = use_case.execute(StaticDocumentSource(documents))
    rerun = time.perf_counter() - started

    # The same rows, inserted raw.
    raw_store = MilvusKnowledgeStore(connection, collection="bench_ingest_raw")
    raw_store.drop_collection()
    raw_store.ensure_collection(DIM)
    client = connection.client()
    rows = []
    now_ms = int(time.time() * 1000)
    for doc in documents:
        for chunk in chunker.chunk(doc):
            rows.append(
                {
                    fields.PK: chunk.evidence_key,
                    fields.DOC_ID: doc.doc_id,
                    fields.CHUNK_INDEX: chunk.chunk_index,
                    fields.CATEGORY: doc.category,
                    fields.SOURCE: doc.source,
                    fields.TITLE: doc.title,
                    fields.BREADCRUMB: chunk.breadcrumb,
                    fields.SOURCE_TYPE: doc.source_type,
                    fields.TEXT: chunk.text,
                    fields.CONTENT_HASH: "0" * 64,
                    fields.INGESTED_AT: now_ms,
                    fields.DENSE: embedder.cache[embedding_input(chunk)],
                }
            )
    started = time.perf_counter()
    for start in range(0, len(rows), args.batch):
        client.insert("bench_ingest_raw", data=rows[start : start + args.batch], timeout=120)
    raw = time.perf_counter() - started
    assert raw_store.count() == len(rows) == written == store.count(), "row counts differ"

    print(
        f"\nIngest of {len(documents)} documents -> {written} chunks, Milvus "
        f"{connection.capabilities().version}, write batch {args.batch}, embedder excluded"
    )
    print(f"  IngestDocuments total            {total:8.2f} s")
    print(f"    of which embedding (fixed)     {embed:8.2f} s")
    print(
        f"    without embedding              {total - embed:8.2f} s  -> {written / (total - embed):8.0f} chunks/s"
    )
    print(f"  raw pymilvus insert, same rows   {raw:8.2f} s  -> {len(rows) / raw:8.0f} chunks/s")
    print(
        f"  ratio raw/IngestDocuments rate   {(written / raw) / (written / (total - embed)):8.2f}x"
    )
    print(
        f"  unchanged re-ingest              {rerun:8.2f} s  (added={again.added} "
        f"updated={again.updated} unchanged={again.unchanged} chunks_written={again.chunks_written})"
    )
    connection.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
