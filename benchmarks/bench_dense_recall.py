"""Dense search recall against exact search on the SciFact eval collection, per HNSW ef.

For every SciFact train query (all-MiniLM-L6-v2 ONNX, as the product embeds it) the
exact top-k chunks are computed with numpy over every vector of the collection (cosine =
dot product of unit vectors), and compared with what Milvus returns for the same query:

- ``no params``: the request the adapter sent before (metric only; Lite's HNSW then
  searches with its default ef, a server with ef = limit);
- ``ef=N``: ``search_params={"params": {"ef": max(N, limit)}}``, what the adapter sends
  now (``milvus.search-ef``).

Reported per setting: recall@k (share of the exact top-k found), the share of queries
whose exact #1 chunk is in the top k, and search latency p50/p95 with its ratio to the
``no params`` baseline measured in the same run.

    .venv/bin/python benchmarks/bench_dense_recall.py [--limit 50] [--ef 64,128,256,512]
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import numpy as np
from _scifact import DEFAULT_DATA_DIR, open_scifact, percentile

from lookup_knowledge.adapters.milvus.schema import DENSE, PK


def _all_vectors(client: Any, collection: str) -> tuple[list[str], np.ndarray]:
    keys: list[str] = []
    rows: list[list[float]] = []
    iterator = client.query_iterator(
        collection, batch_size=2000, filter="", output_fields=[PK, DENSE]
    )
    while True:
        batch = iterator.next()
        if not batch:
            iterator.close()
            break
        for row in batch:
            keys.append(str(row[PK]))
            rows.append(row[DENSE])
    matrix = np.asarray(rows, dtype=np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    return keys, matrix


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit", type=int, default=50)
    parser.add_argument("--ef", default="64,128,256,512")
    parser.add_argument("--queries", type=int, default=None)
    parser.add_argument("--embedder", default="onnx-minilm")
    args = parser.parse_args()
    app, container, beir, collection = open_scifact(
        data_dir=DEFAULT_DATA_DIR, embedder=args.embedder, audit=False
    )
    try:
        connection = container.milvus_connection()
        client = connection.client()
        client.load_collection(collection)
        embedder = container.embedder()
        queries = [q.text for q in beir.dataset.queries][: args.queries]
        queries.append("Peroxynitrite is required for nitration of TCR/CD8.")  # issue 13
        vectors = np.asarray(embedder.embed_documents(queries), dtype=np.float32)
        keys, matrix = _all_vectors(client, collection)
        exact_order = np.argsort(-(vectors @ matrix.T), axis=1)[:, : args.limit]
        exact = [[keys[i] for i in row] for row in exact_order]
        settings: list[tuple[str, dict[str, Any]]] = [("no params", {})]
        settings += [(f"ef={ef}", {"ef": max(int(ef), args.limit)}) for ef in args.ef.split(",")]
        print(
            f"dense recall@{args.limit} against exact search: {len(queries)} SciFact train "
            f"queries (+1 from issue 13), collection {collection} ({len(keys)} chunks), "
            f"Milvus {connection.capabilities().version}"
        )
        print(
            f"{'setting':<12}{'recall':>9}{'#1 found':>10}{'p50 ms':>9}{'p95 ms':>9}{'p50 ratio':>11}"
        )
        baseline_p50: float | None = None
        for name, params in settings:
            search_params: dict[str, Any] = {"metric_type": "COSINE"}
            if params:
                search_params["params"] = params
            recalls, firsts, times = [], [], []
            issue_found = False
            for n, vector in enumerate(vectors):
                started = time.perf_counter()
                found = client.search(
                    collection,
                    data=[vector.tolist()],
                    anns_field=DENSE,
                    limit=args.limit,
                    search_params=search_params,
                    output_fields=[PK],
                )
                times.append((time.perf_counter() - started) * 1000)
                got = {str(h.get(PK, h.get("id"))) for h in found[0]}
                recalls.append(len(got & set(exact[n])) / len(exact[n]))
                firsts.append(exact[n][0] in got)
                if n == len(vectors) - 1:
                    issue_found = exact[n][0] in got
            p50 = statistics.median(times)
            baseline_p50 = baseline_p50 or p50
            print(
                f"{name:<12}{statistics.fmean(recalls):>9.4f}{statistics.fmean(firsts):>10.4f}"
                f"{p50:>9.2f}{percentile(times, 95):>9.2f}{p50 / baseline_p50:>10.2f}x"
                f"   issue-13 query's exact #1 {'found' if issue_found else 'MISSED'}"
            )
    finally:
        app.close()


if __name__ == "__main__":
    main()
