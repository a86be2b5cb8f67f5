"""Shared by bench_pipeline_overhead.py and bench_peer.py: the SciFact eval collection.

Both benchmarks use the collection ``lookup-knowledge eval run`` builds
(``eval_scifact_<embedder>`` under benchmarks/results/eval-data by default): opening it
runs the same idempotent ingest, so a collection the eval already built is reused as
is (nothing re-embedded) and a missing one is built once.
"""

from __future__ import annotations

import math
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from lookup_knowledge.adapters.api import LookupApp, create_app
from lookup_knowledge.adapters.config import load_settings
from lookup_knowledge.adapters.container import Container
from lookup_knowledge.adapters.evaluation.beir import BeirDataset, eval_collection_name, load_beir
from lookup_knowledge.application.ingest import IngestProgress

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
DATASETS = ROOT.parent / "shared" / "datasets"
DEFAULT_DATA_DIR = RESULTS / "eval-data"


def open_scifact(
    *,
    data_dir: Path,
    embedder: str,
    split: str = "train",
    limit_queries: int | None = None,
    corpus_sample: int | None = None,
    audit: bool = True,
) -> tuple[LookupApp, Container, BeirDataset, str]:
    """A LookupApp on the SciFact eval collection (ingested if needed), its container (a
    benchmark compares the use case with hand-wired variants of it), the dataset and the
    collection name."""
    folder = DATASETS / "scifact"
    if not folder.is_dir():
        sys.exit(f"SciFact not found at {folder} (see the dataset's SOURCE.md)")
    beir = load_beir(folder, split=split, limit_queries=limit_queries, corpus_sample=corpus_sample)
    collection = eval_collection_name(beir, embedder)
    settings = load_settings(
        overrides={
            "data-dir": str(data_dir),
            "embedder.provider": embedder,
            "milvus.collection": collection,
            "audit.enabled": audit,
        }
    ).settings
    container = Container(settings=settings)
    app = create_app(settings, container=container)
    started = time.perf_counter()

    def progress(event: IngestProgress) -> None:
        if not sys.stderr.isatty():
            return
        total = event.documents_total or 0
        print(
            f"\r  ingest {event.phase}: {event.documents_done}/{total} documents, "
            f"{event.chunks_written} chunks written",
            end="",
            file=sys.stderr,
            flush=True,
        )

    report = app.ingest_source(beir.dataset.corpus, sync=True, progress=progress)
    app.seal_knowledge_store()  # fresh rows in growing segments are searched far slower
    print(
        f"\r  collection {collection}: {report.documents_seen} documents, "
        f"{report.unchanged} unchanged, {report.added + report.updated} (re)written, "
        f"{report.chunks_written} chunks written in {time.perf_counter() - started:.1f} s",
        file=sys.stderr,
    )
    return app, container, beir, collection


def percentile(values: Sequence[float], p: float) -> float:
    """Nearest-rank percentile."""
    ordered = sorted(values)
    index = max(0, min(len(ordered) - 1, math.ceil(p / 100 * len(ordered)) - 1))
    return ordered[index]


def stats(values: Sequence[float]) -> tuple[float, float, float]:
    return percentile(values, 50), percentile(values, 95), statistics.fmean(values)
