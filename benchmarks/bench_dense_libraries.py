"""HNSW libraries for the dense index beside Milvus Lite: FAISS, hnswlib, usearch.

On the synthetic chunk vectors of the scaling benchmark (``_synthetic.py``: 384-dim
unit vectors, 8 near-duplicate chunks per document) at one size, each library builds an
HNSW index (M 16, efConstruction 200, inner product over unit vectors = cosine) on one
thread, then answers the same queries with ef 256 and limit 50. Printed per library:
build seconds, search p50 (ms, one query at a time, as a lookup sends it), recall@50
against exact (numpy) search, the process's RSS growth while it held the index and the
size of the index written to disk. FAISS is installed with milvus-lite; hnswlib and
usearch are measured when importable (``pip install hnswlib usearch``).

    .venv/bin/python benchmarks/bench_dense_libraries.py [--rows 100000] [--queries 200]
"""

from __future__ import annotations

import argparse
import gc
import os
import resource
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from _synthetic import CHUNKS_PER_DOC, DIM, centroids, percentile, queries, unit

M, EF_CONSTRUCTION, EF, LIMIT = 16, 200, 256, 50


def vectors(rows: int) -> np.ndarray:
    """The scaling benchmark's chunk vectors (same generator, same seed)."""
    cents = centroids(rows // CHUNKS_PER_DOC + 1)
    rng = np.random.default_rng(13)
    out = np.empty((rows, DIM), dtype=np.float32)
    for start in range(0, rows, 2000):
        n = min(2000, rows - start)
        docs = np.arange(start, start + n) // CHUNKS_PER_DOC
        noise = rng.standard_normal((n, DIM)).astype(np.float32) * 0.04
        out[start : start + n] = unit(cents[docs] + noise)
    return out


def rss_mb() -> float:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6


Searcher = Callable[[np.ndarray], np.ndarray]


def faiss_case(data: np.ndarray, folder: Path) -> tuple[Searcher, int]:
    import faiss

    faiss.omp_set_num_threads(1)
    index = faiss.IndexHNSWFlat(DIM, M, faiss.METRIC_INNER_PRODUCT)
    index.hnsw.efConstruction = EF_CONSTRUCTION
    index.add(data)
    index.hnsw.efSearch = EF
    path = folder / "faiss.index"
    faiss.write_index(index, str(path))
    params = faiss.SearchParametersHNSW(efSearch=EF)

    def search(query: np.ndarray) -> np.ndarray:
        _d, ids = index.search(query[None, :], LIMIT, params=params)
        return ids[0]

    return search, path.stat().st_size


def exact_case(data: np.ndarray, folder: Path) -> tuple[Searcher, int]:
    """No graph: one matrix-vector product and a partial sort, what the index beside Lite
    does when a request may see at most ``EXACT_ROWS`` rows (``dense_index.py``)."""

    def search(query: np.ndarray) -> np.ndarray:
        scores = data @ query
        top = np.argpartition(-scores, LIMIT - 1)[:LIMIT]
        return top[np.argsort(-scores[top], kind="stable")]

    return search, 0


def hnswlib_case(data: np.ndarray, folder: Path) -> tuple[Searcher, int]:
    import hnswlib

    index = hnswlib.Index(space="ip", dim=DIM)
    index.init_index(max_elements=len(data), M=M, ef_construction=EF_CONSTRUCTION)
    index.set_num_threads(1)
    index.add_items(data, np.arange(len(data)))
    index.set_ef(EF)
    path = folder / "hnswlib.index"
    index.save_index(str(path))

    def search(query: np.ndarray) -> np.ndarray:
        ids, _d = index.knn_query(query, k=LIMIT)
        return np.asarray(ids[0])

    return search, path.stat().st_size


def usearch_case(data: np.ndarray, folder: Path) -> tuple[Searcher, int]:
    from usearch.index import Index

    index = Index(
        ndim=DIM, metric="ip", dtype="f32", connectivity=M, expansion_add=EF_CONSTRUCTION,
        expansion_search=EF,
    )  # fmt: skip
    index.add(np.arange(len(data)), data, threads=1)
    path = folder / "usearch.index"
    index.save(str(path))

    def search(query: np.ndarray) -> np.ndarray:
        return np.asarray(index.search(query, LIMIT, threads=1).keys)

    return search, path.stat().st_size


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=200)
    args = parser.parse_args()
    data = vectors(args.rows)
    qs = np.asarray([q.vector for q in queries(args.rows, args.queries)], dtype=np.float32)
    exact = np.argsort(-(qs @ data.T), axis=1)[:, :LIMIT]
    cases = {
        "exact (numpy)": exact_case,
        "faiss": faiss_case,
        "hnswlib": hnswlib_case,
        "usearch": usearch_case,
    }
    print(
        f"{args.rows:,} synthetic {DIM}-dim unit vectors, HNSW M {M} efConstruction "
        f"{EF_CONSTRUCTION}, one thread; {args.queries} queries, ef {EF}, limit {LIMIT}"
    )
    print("| library | build s | search p50 ms | recall@50 | RSS growth MB | on disk MB |")
    print("|---|---|---|---|---|---|")
    for name, case in cases.items():
        gc.collect()
        before = rss_mb()
        with tempfile.TemporaryDirectory() as folder:
            started = time.perf_counter()
            try:
                search, size = case(data, Path(folder))
            except ImportError:
                print(f"| {name} | not installed | | | | |")
                continue
            built = time.perf_counter() - started
            grown = rss_mb() - before
            times, recalls = [], []
            for q, truth in zip(qs, exact, strict=True):
                started = time.perf_counter()
                found = search(q)
                times.append((time.perf_counter() - started) * 1000)
                recalls.append(len(set(found.tolist()) & set(truth.tolist())) / LIMIT)
            print(
                f"| {name} | {built:.1f} | {percentile(times, 0.5):.2f} | "
                f"{float(np.mean(recalls)):.4f} | {grown:.0f} | {size / 1e6:.0f} |",
                flush=True,
            )
            del search
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1000
    print(f"peak RSS of the whole run {peak:.0f} MB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
