"""Lookup latency as the collection grows: dense, sparse and hybrid on Milvus Lite.

For each size (default 5k, 20k, 100k chunks) builds (once, cached under
benchmarks/results/) a sealed Milvus Lite collection of synthetic chunks through
``MilvusKnowledgeStore`` (``_synthetic.py``: 384-dim vectors, Zipf-distributed words,
so the BM25 index is the product's own), then times, interleaved query by query:

- the bare engine calls: the dense index beside the Lite file (HNSW, ``dense_index.py``),
  pymilvus ``search`` on the dense field (Lite's own search, what dense used before),
  and the full-text index beside the Lite file (BM25);
- ``LookupKnowledge`` (audit off, query embedding excluded: a lookup table stands in
  for the model) in dense, sparse and hybrid mode (hybrid as the product runs it on
  Lite, its two lists one after the other, and with the BM25 list on a worker thread).

Prints p50 per size and mode, lookup/bare, hybrid/dense and sparse/dense, dense growth
against the smallest size, and the dense index's recall@50 against exact search (every
vector of the collection) over the same queries, untimed. ``--server`` also times the dense lookup on the PyPI
Milvus server (2.3.5, dense only; ``.[milvus-server]``) on the same rows and prints
the size from which the server answers faster than Lite.

    .venv/bin/python benchmarks/bench_scaling.py [--sizes 5000,20000,100000,1000000] [--queries 100] [--server]
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from _synthetic import DIM, Query, TableEmbedder, build, percentile, queries

from lookup_knowledge.adapters.milvus import (
    MilvusConnection,
    MilvusKnowledgeSearch,
    MilvusKnowledgeStore,
)
from lookup_knowledge.adapters.milvus import schema as fields
from lookup_knowledge.adapters.milvus.lite_dense import index_ef, lite_dense
from lookup_knowledge.adapters.runtime import DisabledRecorder, InMemorySessionState, SystemClock
from lookup_knowledge.adapters.text import SnowballJiebaAnalyzer
from lookup_knowledge.application.lookup import LookupConfig, LookupKnowledge
from lookup_knowledge.application.query_transformer import QueryTransformer
from lookup_knowledge.domain.model import SearchMode
from lookup_knowledge.domain.settings import RetrievalSettings

RESULTS = Path(__file__).resolve().parent / "results"
RETRIEVE_K, RETURN_N = 20, 10
EF = 256
RECALL_AT = 50
RECALL_QUERIES = 50


def use_case(
    search: MilvusKnowledgeSearch, table: dict[str, list[float]], mode: SearchMode
) -> LookupKnowledge:
    return LookupKnowledge(
        search=search,
        transformer=QueryTransformer({}),
        recorder=DisabledRecorder(),
        session_state=InMemorySessionState(),
        clock=SystemClock(),
        embedder=TableEmbedder(table),
        config=LookupConfig(
            retrieval=RetrievalSettings(
                retrieve_k=RETRIEVE_K, return_n=RETURN_N, min_relevance=0.0
            ),
            mode=mode,
        ),
    )


def lookup_case(uc: LookupKnowledge) -> Callable[[Query], None]:
    def run(query: Query) -> None:
        result = uc.execute(query.text, session_id="bench")
        if result.error_code:
            raise SystemExit(f"lookup failed: {result.message}")

    return run


def open_collection(uri: str, rows: int) -> tuple[MilvusConnection, str]:
    collection = f"scaling_{rows}"
    connection = MilvusConnection(uri, timeout_s=600.0)
    store = MilvusKnowledgeStore(connection, collection=collection)
    if store.count() != rows:
        store.drop_collection()
        print(f"building {rows} rows at {uri} (cached for later runs) ...", file=sys.stderr)
        seconds = build(store, rows)
        print(f"  built and sealed in {seconds:.0f}s", file=sys.stderr)
    return connection, collection


def time_cases(
    cases: dict[str, Callable[[Query], None]], qs: list[Query], warmup: int
) -> dict[str, float]:
    """p50 ms per case, the cases interleaved query by query in alternating order."""
    timings: dict[str, list[float]] = {name: [] for name in cases}
    items = list(cases.items())
    for index, query in enumerate(qs):
        for name, fn in items if index % 2 == 0 else list(reversed(items)):
            started = time.perf_counter()
            fn(query)
            elapsed = (time.perf_counter() - started) * 1000.0
            if index >= warmup:
                timings[name].append(elapsed)
        if index % 10 == 0:
            print(f"\r  query {index + 1}/{len(qs)}", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    return {name: percentile(values, 0.5) for name, values in timings.items()}


def measure_lite(rows: int, count: int, warmup: int) -> dict[str, float]:
    RESULTS.mkdir(parents=True, exist_ok=True)
    connection, collection = open_collection(str(RESULTS / f"scaling_{rows}.db"), rows)
    try:
        qs = queries(rows, count + warmup)
        table = {q.text: q.vector for q in qs}
        analyzer = SnowballJiebaAnalyzer()
        search = MilvusKnowledgeSearch(connection, collection=collection, search_ef=EF)
        concurrent = MilvusKnowledgeSearch(
            connection, collection=collection, search_ef=EF, concurrent_hybrid=True
        )
        client = connection.client()
        index = search._collection.fulltext()
        assert index is not None, "Milvus Lite without the full-text index"
        dense_index = lite_dense(search._collection)
        assert dense_index is not None, "Milvus Lite without the dense index"
        started = time.perf_counter()
        dense_index.count()  # opened (read from its file, or rebuilt) before timing
        print(f"  dense index open: {time.perf_counter() - started:.1f}s", file=sys.stderr)
        light = [fields.PK, *fields.LIGHT_FIELDS]

        def bare_index(query: Query) -> None:
            dense_index.search(query.vector, RETRIEVE_K, ef=index_ef(EF, RETRIEVE_K))

        def bare_dense(query: Query) -> None:
            client.search(
                collection,
                data=[query.vector],
                anns_field=fields.DENSE,
                limit=RETRIEVE_K,
                output_fields=light,
                search_params={"metric_type": "COSINE", "params": {"ef": EF}},
            )

        def bare_sparse(query: Query) -> None:
            index.search(analyzer.analyse(query.text), RETRIEVE_K)

        cases = {
            "bare dense index": bare_index,
            "bare dense": bare_dense,
            "bare sparse": bare_sparse,
            "dense": lookup_case(use_case(search, table, SearchMode.DENSE)),
            "sparse": lookup_case(use_case(search, table, SearchMode.SPARSE)),
            "hybrid": lookup_case(use_case(search, table, SearchMode.HYBRID)),
            "hybrid concurrent": lookup_case(use_case(concurrent, table, SearchMode.HYBRID)),
        }
        out = time_cases(cases, qs, warmup)
        recalls: list[float] = []
        lite_recalls: list[float] = []
        for query in qs[:RECALL_QUERIES]:  # Lite's own search at 100k: ~0.3 s each
            exact = {key for key, _s in dense_index.exact(query.vector, RECALL_AT)}
            found = {
                key
                for key, _s in dense_index.search(
                    query.vector, RECALL_AT, ef=index_ef(EF, RECALL_AT)
                )
            }
            lite = client.search(
                collection,
                data=[query.vector],
                anns_field=fields.DENSE,
                limit=RECALL_AT,
                output_fields=[fields.PK],
                search_params={"metric_type": "COSINE", "params": {"ef": EF}},
            )[0]
            lite_keys = {str(hit.get(fields.PK, hit.get("id"))) for hit in lite}
            recalls.append(len(found & exact) / max(len(exact), 1))
            lite_recalls.append(len(lite_keys & exact) / max(len(exact), 1))
        out["recall"] = sum(recalls) / len(recalls)
        out["lite recall"] = sum(lite_recalls) / len(lite_recalls)
        return out
    finally:
        connection.close()


def _port_in_use(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def measure_server(sizes: Sequence[int], count: int, warmup: int) -> dict[int, float]:
    """Dense lookup p50 on the PyPI Milvus server (2.3.5) at each size."""
    import milvus  # type: ignore[import-untyped]

    if _port_in_use(2380):
        raise SystemExit("another embedded Milvus holds 127.0.0.1:2380 (its etcd peer port)")
    server: Any = milvus.MilvusServer(milvus.MilvusServerConfig())
    server.set_base_dir(tempfile.mkdtemp(prefix="bench-scaling-server-", dir=RESULTS))
    server.start()
    out: dict[int, float] = {}
    try:
        uri = f"http://127.0.0.1:{server.listen_port}"
        for rows in sizes:
            connection, collection = open_collection(uri, rows)
            try:
                qs = queries(rows, count + warmup)
                table = {q.text: q.vector for q in qs}
                search = MilvusKnowledgeSearch(connection, collection=collection, search_ef=EF)
                uc = use_case(search, table, SearchMode.DENSE)
                out[rows] = time_cases({"dense": lookup_case(uc)}, qs, warmup)["dense"]
            finally:
                connection.close()
    finally:
        try:
            server.stop()
        except subprocess.TimeoutExpired:  # a loaded machine: it exits after its grace time
            server.server_proc.kill()
    return out


def crossover(
    sizes: Sequence[int], lite: dict[int, float], server: dict[int, float], factor: float
) -> str:
    """The size from which Lite's dense lookup costs ``factor`` times the server's or
    more (linear between measured sizes, as Lite's cost is)."""
    previous: int | None = None
    for rows in sizes:
        if lite[rows] >= factor * server[rows]:
            if previous is None:
                return f"<= {rows:,} chunks"
            a = lite[previous] - factor * server[previous]
            b = lite[rows] - factor * server[rows]
            at = previous + (rows - previous) * (-a) / (b - a)
            return f"~{int(round(at, -3)):,} chunks"
        previous = rows
    return f"> {sizes[-1]:,} chunks"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="5000,20000,100000")
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--server", action="store_true", help="also the PyPI Milvus server")
    args = parser.parse_args()
    os.environ.setdefault("HAYSTACK_TELEMETRY_ENABLED", "False")
    sizes = [int(s) for s in args.sizes.split(",")]

    server: dict[int, float] = {}
    if args.server:
        try:
            server = measure_server(sizes, args.queries, args.warmup)
        except (
            SystemExit,
            RuntimeError,
            TimeoutError,
            OSError,
            subprocess.SubprocessError,
        ) as error:
            print(f"the Milvus server could not be measured: {error}", file=sys.stderr)
    results = {rows: measure_lite(rows, args.queries, args.warmup) for rows in sizes}
    print(
        f"\nMilvus Lite, synthetic {DIM}-dim chunks, retrieve-k {RETRIEVE_K}, return-n "
        f"{RETURN_N}, HNSW ef {EF} (the index beside Lite: {index_ef(EF, RETURN_N)}), audit off, "
        f"query embedding excluded, {args.queries} "
        f"queries (+{args.warmup} warm-up) per size, p50 ms"
    )
    print(
        "| chunks | dense | sparse | hybrid | hybrid concurrent | bare dense index | bare Lite "
        "dense | bare sparse (tantivy) | dense lookup/bare index | hybrid/dense | sparse/dense "
        f"| recall@{RECALL_AT} | Lite's own recall@{RECALL_AT} (ef {EF}) |"
    )
    print("|---" * 13 + "|")
    for rows in sizes:
        r = results[rows]
        print(
            f"| {rows:,} | {r['dense']:.1f} | {r['sparse']:.1f} | {r['hybrid']:.1f} | "
            f"{r['hybrid concurrent']:.1f} | {r['bare dense index']:.2f} | {r['bare dense']:.1f} "
            f"| {r['bare sparse']:.1f} | {r['dense'] / r['bare dense index']:.2f} | "
            f"{r['hybrid'] / r['dense']:.2f} | {r['sparse'] / r['dense']:.2f} | "
            f"{r['recall']:.4f} | {r['lite recall']:.4f} |"
        )
    first, last = sizes[0], sizes[-1]
    print(
        f"dense lookup at {last:,} / at {first:,}: "
        f"{results[last]['dense'] / results[first]['dense']:.1f}x "
        f"(bare index {results[last]['bare dense index'] / results[first]['bare dense index']:.1f}x"
        f", Lite's own search {results[last]['bare dense'] / results[first]['bare dense']:.1f}x)",
        flush=True,
    )
    if server:
        print(
            "| chunks | Lite dense lookup | server dense lookup | Lite / server |\n|---|---|---|---|"
        )
        for rows in sizes:
            lite_ms, server_ms = results[rows]["dense"], server[rows]
            print(f"| {rows:,} | {lite_ms:.1f} | {server_ms:.1f} | {lite_ms / server_ms:.1f} |")
        lite_dense = {rows: results[rows]["dense"] for rows in sizes}
        for factor in (1.0, 2.0, 3.0):
            at = crossover(sizes, lite_dense, server, factor)
            print(f"Lite's dense lookup costs >= {factor:g}x the server's from {at}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
