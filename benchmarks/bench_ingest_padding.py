"""Ingest with the ONNX embedder: padding and time, embed batches in document order
against batches sorted by token length across the write batch (what ingest does).

Ingests a sample of the SciFact corpus (``../shared/datasets/scifact``) with the
default chunker and the bundled MiniLM embedder into an in-memory store (embedding is
~95 % of an ingest; the store is not what is compared). ``document order`` is main's
batching before issue 15 (embed calls of ``embedder.batch-size`` chunks as the
documents came), reproduced by an embedder whose ``token_lengths`` are all equal;
``length-sorted`` is the current code. The runs alternate (A B B A) in one process;
every ``session.run`` is wrapped to count the tokens fed and the padding among them.

    .venv/bin/python benchmarks/bench_ingest_padding.py [--docs 800]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lookup_knowledge.adapters.config import load_settings
from lookup_knowledge.adapters.embedders import OnnxMiniLMEmbedder
from lookup_knowledge.adapters.evaluation.beir import BeirCorpusSource, read_corpus_ids
from lookup_knowledge.adapters.files.chunking import MarkdownChunker
from lookup_knowledge.adapters.memory import InMemoryKnowledgeBase
from lookup_knowledge.adapters.runtime import SystemClock
from lookup_knowledge.application.ingest import IngestConfig, IngestDocuments

SCIFACT = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "scifact"


class _CountingSession:
    def __init__(self, session: Any) -> None:
        self._session = session
        self.fed = 0
        self.padding = 0

    def run(self, outputs: Any, feeds: dict[str, Any]) -> Any:
        mask = feeds["attention_mask"]
        self.fed += int(mask.size)
        self.padding += int(mask.size - mask.sum())
        return self._session.run(outputs, feeds)

    def get_inputs(self) -> Any:
        return self._session.get_inputs()


class DocumentOrderEmbedder(OnnxMiniLMEmbedder):
    """Equal lengths for every text: ingest's stable sort keeps document order."""

    def token_lengths(self, texts: Sequence[str]) -> list[int]:
        return [0] * len(texts)


def _counted(embedder: OnnxMiniLMEmbedder) -> _CountingSession:
    loaded = embedder._ensure_loaded(documents=True)  # ingest's session
    counting = _CountingSession(loaded.session)
    loaded.session = counting
    return counting


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=int, default=800)
    parser.add_argument("--dataset", type=Path, default=SCIFACT)
    args = parser.parse_args()
    corpus = next(p for p in args.dataset.glob("corpus.jsonl*"))
    ids = frozenset(read_corpus_ids(corpus)[: args.docs])
    settings = load_settings(environ={}).settings
    chunker = MarkdownChunker(
        chunk_size=settings.ingest.chunk_size, chunk_overlap=settings.ingest.chunk_overlap
    )
    config = IngestConfig(
        embed_batch_size=settings.embedder.batch_size, write_batch_size=settings.ingest.batch_size
    )
    systems = {
        "document order": DocumentOrderEmbedder(batch_size=settings.embedder.batch_size),
        "length-sorted": OnnxMiniLMEmbedder(batch_size=settings.embedder.batch_size),
    }
    counters = {name: _counted(e) for name, e in systems.items()}
    seconds: dict[str, list[float]] = {name: [] for name in systems}
    chunks: dict[str, int] = {}
    for name in ["document order", "length-sorted", "length-sorted", "document order"]:
        ingest = IngestDocuments(
            store=InMemoryKnowledgeBase(),
            chunker=chunker,
            clock=SystemClock(),
            embedder=systems[name],
            settings=config,
        )
        started = time.perf_counter()
        report = ingest.execute(BeirCorpusSource(corpus, doc_ids=ids))
        seconds[name].append(time.perf_counter() - started)
        chunks[name] = report.chunks_written
        time.sleep(1.0)
    print(
        f"SciFact sample: {len(ids)} documents, {chunks['length-sorted']} chunks, "
        f"embed batch {config.embed_batch_size}, write batch {config.write_batch_size}"
    )
    print(
        "| batching | tokens fed per run | padding tokens per run | padding share | ingest s (mean of 2) |"
    )
    print("|---|---|---|---|---|")
    for name, counter in counters.items():
        fed, pad = counter.fed // 2, counter.padding // 2
        print(
            f"| {name} | {fed:,} | {pad:,} | {pad / fed:.1%} | {statistics.fmean(seconds[name]):.1f} |"
        )
    a, b = counters["document order"], counters["length-sorted"]
    print(
        f"tokens fed, document order / length-sorted: {a.fed / b.fed:.2f}x; ingest time "
        f"{statistics.fmean(seconds['document order']) / statistics.fmean(seconds['length-sorted']):.2f}x"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
