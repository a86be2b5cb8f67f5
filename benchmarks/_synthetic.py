"""Synthetic chunks for the Milvus benchmarks, written through ``MilvusKnowledgeStore``.

Documents of 8 near-duplicate chunks each (unit vectors around a per-document
centroid, 384 dims), ~600-character texts of words drawn from a Zipf-like vocabulary
(so BM25 postings are as skewed as in real text), 8 categories. Rows go in through the
store's own ``upsert_chunks`` (the analysed ``bm25_text`` and, on Milvus Lite, the
full-text index beside the file, as an ingest writes them) and the collection is
sealed (flushed and indexed) before it is searched: a benchmark of unflushed rows
measures Lite's growing-segment path, 10-100x slower than what a user sees after an
ingest.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import numpy as np

from lookup_knowledge.adapters.milvus import MilvusKnowledgeStore
from lookup_knowledge.application.ports import ChunkRecord, Embedder

DIM = 384
CHUNKS_PER_DOC = 8
CATEGORIES = ["ops", "billing", "network", "storage", "security", "hr", "sales", "legal"]
VOCABULARY = 20_000
WORDS_PER_CHUNK = 90


class TableEmbedder(Embedder):
    """Query text -> a precomputed vector: the benchmark measures retrieval, not the model."""

    def __init__(self, table: dict[str, list[float]]) -> None:
        self._table = table

    @property
    def dimension(self) -> int:
        return DIM

    @property
    def name(self) -> str:
        return "bench-table"

    def embed_query(self, text: str) -> list[float]:
        return self._table[text]

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        return [self._table[t] for t in texts]


def unit(rows: np.ndarray) -> np.ndarray:
    return rows / np.linalg.norm(rows, axis=-1, keepdims=True)


def centroids(docs: int) -> np.ndarray:
    return unit(np.random.default_rng(7).standard_normal((docs, DIM)).astype(np.float32))


def vocabulary() -> np.ndarray:
    rng = np.random.default_rng(5)
    letters = list("abcdefghijklmnopqrstuvwxyz")
    words = {"".join(rng.choice(letters, size=int(rng.integers(4, 10)))) for _ in range(VOCABULARY)}
    return np.array(sorted(words))


def _zipf(rng: np.random.Generator, size: tuple[int, ...], n: int) -> np.ndarray:
    ranks = rng.zipf(1.15, size=size)
    return np.where(ranks <= n, ranks - 1, rng.integers(0, n, size=size))


def chunk_words(rows: int) -> np.ndarray:
    """Word indexes of every chunk (rows x WORDS_PER_CHUNK), deterministic."""
    rng = np.random.default_rng(11)
    vocab_size = len(vocabulary())
    return _zipf(rng, (rows, WORDS_PER_CHUNK), vocab_size)


def doc_id(d: int) -> str:
    return f"doc-{d:06d}.md"


def build(store: MilvusKnowledgeStore, rows: int, batch: int = 2000) -> float:
    """Write ``rows`` synthetic chunks and seal the collection; returns seconds taken."""
    store.ensure_collection(DIM)
    vocab = vocabulary()
    words = chunk_words(rows)
    cents = centroids(rows // CHUNKS_PER_DOC + 1)
    rng = np.random.default_rng(13)
    now = datetime.now(UTC)
    started = time.perf_counter()
    for start in range(0, rows, batch):
        n = min(batch, rows - start)
        ids = np.arange(start, start + n)
        docs = ids // CHUNKS_PER_DOC
        noise = rng.standard_normal((n, DIM)).astype(np.float32) * 0.04
        vectors = unit(cents[docs] + noise)
        records = []
        for i in range(n):
            d, c = int(docs[i]), int(ids[i] % CHUNKS_PER_DOC)
            name = doc_id(d)
            records.append(
                ChunkRecord(
                    evidence_key=f"{name}#chunk-{c}",
                    doc_id=name,
                    chunk_index=c,
                    text=" ".join(vocab[words[start + i]]),
                    category=CATEGORIES[d % len(CATEGORIES)],
                    source=f"kb/{name}",
                    title=f"Document {d}",
                    breadcrumb=f"Document {d} > Section {c}",
                    source_type="markdown",
                    content_hash=f"{d:064d}",
                    ingested_at=now,
                    vector=tuple(vectors[i].tolist()),
                    source_name="bench",
                )
            )
        store.upsert_chunks(records)
        print(f"\r  built {start + n}/{rows} rows", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    store.seal()  # flush + index every segment, as an ingest ends
    return time.perf_counter() - started


@dataclass(frozen=True, slots=True)
class Query:
    text: str
    vector: list[float]


def queries(rows: int, count: int, seed: int = 23) -> list[Query]:
    """Queries about random chunks: 4 of the chunk's words and a vector near its document."""
    vocab = vocabulary()
    words = chunk_words(rows)
    docs = rows // CHUNKS_PER_DOC
    cents = centroids(docs + 1)
    rng = np.random.default_rng(seed)
    out: list[Query] = []
    for _ in range(count):
        row = int(rng.integers(0, rows))
        d = row // CHUNKS_PER_DOC
        picked = rng.choice(words[row], size=4, replace=False)
        vector = unit(cents[d] + rng.standard_normal(DIM).astype(np.float32) * 0.05)
        out.append(Query(" ".join(vocab[picked]), vector.tolist()))
    return out


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]
