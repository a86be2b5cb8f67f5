"""Lookup latency through the real LookupKnowledge pipeline, late materialisation on vs off.

Builds (once, cached under benchmarks/results/) a Milvus Lite collection of synthetic
chunks through ``MilvusKnowledgeStore`` and seals it (flushed and indexed, as an ingest
ends: ``_synthetic.py``; before, the rows stayed in Lite's growing segment and the first
run measured that, 532 ms instead of 49 ms). Then runs the same queries through ``LookupKnowledge`` with
``late_materialisation`` on and off, interleaved, and prints p50/p95/mean latency and
the ratio. Query embedding is excluded (a fixed lookup table stands in for the model).

    .venv/bin/python benchmarks/bench_milvus_lookup.py --rows 100000
    .venv/bin/python benchmarks/bench_milvus_lookup.py --rows 20000 --uri http://127.0.0.1:19530
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np
from _synthetic import CHUNKS_PER_DOC, DIM, TableEmbedder, build, centroids, percentile, unit

from lookup_knowledge.adapters.milvus import (
    MilvusConnection,
    MilvusKnowledgeSearch,
    MilvusKnowledgeStore,
)
from lookup_knowledge.adapters.runtime import DisabledRecorder, InMemorySessionState, SystemClock
from lookup_knowledge.application.lookup import LookupConfig, LookupKnowledge
from lookup_knowledge.application.query_transformer import QueryTransformer
from lookup_knowledge.domain.model import SearchMode
from lookup_knowledge.domain.settings import RetrievalSettings

RESULTS = Path(__file__).resolve().parent / "results"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000, help="chunks in the collection")
    parser.add_argument("--uri", help="Milvus URI (default: a cached Lite file in results/)")
    parser.add_argument("--token", default=None)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--mode", choices=[m.value for m in SearchMode], default="dense")
    parser.add_argument("--grouping", action="store_true", help="engine-side grouping by doc")
    parser.add_argument("--rebuild", action="store_true")
    parser.add_argument(
        "--consistency",
        default="Bounded",
        help="read consistency of the lookups (Strong waits for a server's time tick)",
    )
    args = parser.parse_args()

    RESULTS.mkdir(parents=True, exist_ok=True)
    uri = args.uri or str(RESULTS / f"bench_lookup_{args.rows}.db")
    collection = f"bench_lookup_{args.rows}"
    connection = MilvusConnection(uri, token=args.token, timeout_s=120.0)
    store = MilvusKnowledgeStore(connection, collection=collection)
    print(f"Milvus {connection.capabilities().version} at {connection.uri}", file=sys.stderr)
    if args.rebuild:
        store.drop_collection()
    count = store.count()
    if count != args.rows:
        if count:
            store.drop_collection()
        print(f"building {args.rows} rows (cached for later runs) ...", file=sys.stderr)
        seconds = build(store, args.rows)
        print(f"  built in {seconds:.1f}s ({args.rows / seconds:.0f} rows/s)", file=sys.stderr)
    load_started = time.perf_counter()
    store.count()  # loads the collection
    print(f"collection ready ({time.perf_counter() - load_started:.1f}s)", file=sys.stderr)

    docs = args.rows // CHUNKS_PER_DOC
    cents = centroids(docs)
    rng = np.random.default_rng(23)
    table: dict[str, list[float]] = {}
    queries: list[str] = []
    for q in range(args.queries + args.warmup):
        d = int(rng.integers(0, docs))
        text = f"question {q} about document {d} section words"
        table[text] = unit(cents[d] + rng.standard_normal(DIM).astype(np.float32) * 0.05).tolist()
        queries.append(text)

    search = MilvusKnowledgeSearch(
        connection, collection=collection, consistency_level=args.consistency
    )
    mode = SearchMode(args.mode)

    def use_case(late: bool) -> LookupKnowledge:
        return LookupKnowledge(
            search=search,
            transformer=QueryTransformer({}),
            recorder=DisabledRecorder(),
            session_state=InMemorySessionState(),
            clock=SystemClock(),
            embedder=TableEmbedder(table),
            config=LookupConfig(
                retrieval=RetrievalSettings(
                    retrieve_k=20, return_n=5, max_chunks_per_document=2, min_relevance=0.0
                ),
                mode=mode,
                late_materialisation=late,
                engine_grouping=args.grouping,
            ),
        )

    cases = {
        "late materialisation ON ": use_case(True),
        "late materialisation OFF": use_case(False),
    }
    timings: dict[str, list[float]] = {name: [] for name in cases}
    search_ms: dict[str, list[float]] = {name: [] for name in cases}
    fetch_ms: dict[str, list[float]] = {name: [] for name in cases}
    returned: dict[str, list[int]] = {name: [] for name in cases}
    for index, text in enumerate(queries):
        order = list(cases.items()) if index % 2 == 0 else list(reversed(cases.items()))
        for name, uc in order:  # interleaved, alternating order: same conditions for both
            started = time.perf_counter()
            result = uc.execute(text, session_id="bench")
            elapsed = (time.perf_counter() - started) * 1000.0
            if result.error_code:
                raise SystemExit(f"lookup failed: {result.message}")
            if index < args.warmup:
                continue
            timings[name].append(elapsed)
            stage = result.retrieval_trace["timingsMs"]
            search_ms[name].append(stage.get("search", 0.0))
            fetch_ms[name].append(stage.get("materialise", 0.0))
            returned[name].append(len(result.evidence_blocks))
        if index % 20 == 0:
            print(f"\r  query {index + 1}/{len(queries)}", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)

    print(
        f"\nLookupKnowledge over {args.rows} chunks, Milvus {connection.capabilities().version}, "
        f"consistency={args.consistency}, mode={mode.value}, retrieve_k=20, return_n=5, cap=2, grouping={args.grouping}, "
        f"{args.queries} queries (+{args.warmup} warm-up), query embedding excluded"
    )
    print(
        f"{'':26}{'p50 ms':>9}{'p95 ms':>9}{'mean ms':>9}{'search p50':>12}{'fetch p50':>11}{'blocks':>8}"
    )
    p50: dict[str, float] = {}
    for name, values in timings.items():
        p50[name] = percentile(values, 0.5)
        print(
            f"{name:26}{p50[name]:9.1f}{percentile(values, 0.95):9.1f}"
            f"{statistics.fmean(values):9.1f}{percentile(search_ms[name], 0.5):12.1f}"
            f"{percentile(fetch_ms[name], 0.5):11.1f}{statistics.fmean(returned[name]):8.1f}"
        )
    on, off = p50["late materialisation ON "], p50["late materialisation OFF"]
    print(
        f"ratio p50 OFF/ON: {off / on:.2f}x  (late materialisation saves {off - on:.1f} ms at p50)"
    )
    connection.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
