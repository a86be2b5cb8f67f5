"""What ONNX Runtime's thread pool costs the search that follows an embed.

Two embedders of the bundled MiniLM model in one process: ``ours`` (spinning off, the
default thread count, see ``adapters/embedders/onnx.py``) and ``ort-default`` (a plain
``SessionOptions()``: workers spin-wait after each run, one thread per core). The two
are measured in alternating rounds, each after a 0.5 s rest, so both see the same
machine:

- CPU burnt while the caller sleeps 10 ms right after ``embed_query`` (process CPU
  time over the sleep; ~0 when nothing spins);
- a Milvus Lite dense search (the sample corpus collection) right after an embed
  against the same search after the same 0.1 s gap without the embed.

    .venv/bin/python benchmarks/bench_embedder_threads.py [--rounds 200]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from lookup_knowledge.adapters.embedders import OnnxMiniLMEmbedder
from lookup_knowledge.adapters.embedders.onnx import default_threads
from lookup_knowledge.adapters.milvus import schema as fields

QUERIES = [
    "PG-53300 too many connections",
    "how do I rotate the API keys",
    "kafka consumer lag keeps growing",
    "refund an invoice paid twice",
    "TLS handshake fails after certificate renewal",
]


class OrtDefaultEmbedder(OnnxMiniLMEmbedder):
    """The same model with ONNX Runtime's default session options (what main had)."""

    def _session_options(self, onnxruntime: Any) -> Any:
        return onnxruntime.SessionOptions()


def _sample_collection(folder: Path) -> tuple[Any, str]:
    """The sample corpus ingested into a Milvus Lite file under ``folder``."""
    from lookup_knowledge.adapters.api import create_app
    from lookup_knowledge.adapters.config import load_settings
    from lookup_knowledge.sample_corpus import corpus_path

    settings = load_settings(overrides={"data-dir": str(folder)}).settings
    with create_app(settings) as app:
        app.ingest(corpus_path())
    from pymilvus import MilvusClient

    client = MilvusClient(settings.milvus_uri)
    client.load_collection(settings.milvus.collection)
    return client, settings.milvus.collection


def _cpu_in_sleep(embedder: OnnxMiniLMEmbedder, query: str) -> float:
    embedder.embed_query(query)
    cpu0 = time.process_time()
    time.sleep(0.010)
    return (time.process_time() - cpu0) * 1000.0


def _search_ms(client: Any, collection: str, vector: list[float]) -> float:
    started = time.perf_counter()
    client.search(
        collection, data=[vector], anns_field=fields.DENSE, limit=20, output_fields=[fields.PK]
    )
    return (time.perf_counter() - started) * 1000.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=200)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="bench-threads-"))
    client, collection = _sample_collection(folder)
    systems: dict[str, OnnxMiniLMEmbedder] = {
        "ours": OnnxMiniLMEmbedder(),
        "ort-default": OrtDefaultEmbedder(),
    }
    for embedder in systems.values():
        embedder.load()
        embedder.embed_query("warm up")
    vector = systems["ours"].embed_query(QUERIES[0])
    for _ in range(20):
        _search_ms(client, collection, vector)
    burnt: dict[str, list[float]] = {name: [] for name in systems}
    after_embed: dict[str, list[float]] = {name: [] for name in systems}
    after_idle: dict[str, list[float]] = {name: [] for name in systems}
    embed_ms: dict[str, list[float]] = {name: [] for name in systems}
    for r in range(args.rounds):
        query = QUERIES[r % len(QUERIES)]
        for name, embedder in systems.items():
            time.sleep(0.5 if r % 20 == 0 else 0.1)  # the other system's threads settle
            burnt[name].append(_cpu_in_sleep(embedder, query))
            time.sleep(0.1)
            started = time.perf_counter()
            embedder.embed_query(query)
            embed_ms[name].append((time.perf_counter() - started) * 1000.0)
            after_embed[name].append(_search_ms(client, collection, vector))
            time.sleep(0.1)  # the same gap before the search, without the embed
            after_idle[name].append(_search_ms(client, collection, vector))
    print(
        f"{args.rounds} rounds; intra-op threads: ours {default_threads()}, ort-default all cores"
    )
    print(
        "| embedder | embed_query p50 | CPU ms in a 10 ms sleep after embed (p50 / mean) "
        "| search p50 after embed | search p50 after idle | after embed / after idle |"
    )
    print("|---|---|---|---|---|---|")
    for name in systems:
        a, i = statistics.median(after_embed[name]), statistics.median(after_idle[name])
        print(
            f"| {name} | {statistics.median(embed_ms[name]):.2f} ms "
            f"| {statistics.median(burnt[name]):.2f} / {statistics.fmean(burnt[name]):.2f} "
            f"| {a:.2f} ms | {i:.2f} ms | {a / i:.2f}x |"
        )
    ours, ort = (
        statistics.median(after_embed["ours"]),
        statistics.median(after_embed["ort-default"]),
    )
    print(f"search after embed, ours / ort-default: {ours / ort:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
