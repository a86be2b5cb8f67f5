"""HTTP overhead: ``POST /v1/lookup`` through ``lookup-knowledge serve`` against the
in-process ``LookupApp.lookup``, with the same concurrency (default 8 clients x 200
lookups each) on the bundled sample corpus (Milvus Lite, SQLite audit).

1. In process: 8 threads call ``app.lookup`` on one ``LookupApp``.
2. Over HTTP: the app is closed, ``lookup-knowledge serve`` starts as its own process on
   the same data directory (loopback, a free port), and 8 threads each with their own
   keep-alive connection (httpx) post the same lookups.

Each client has its own session; afterwards every session must hold exactly its
lookups with seq 1..n (read back through ``GET /v1/invocations``). Printed: requests/s,
p50/p95 latency per call, and HTTP / in-process as ratios.

    .venv/bin/python benchmarks/bench_http.py [--clients 8] [--lookups 200] [--embedder onnx-minilm]
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

from lookup_knowledge import create_app
from lookup_knowledge.sample_corpus import corpus_path

CLI = str(Path(sys.executable).with_name("lookup-knowledge"))


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, round(p / 100 * len(ordered) + 0.5) - 1))]


def run_clients(
    clients: int, lookups: int, call: Callable[[int, int], None]
) -> tuple[float, list[float]]:
    """Wall seconds for all calls, and each call's latency in ms."""
    latencies: list[float] = []
    lock = threading.Lock()
    start = threading.Barrier(clients)

    def client(n: int) -> None:
        mine = []
        start.wait()
        for i in range(lookups):
            t0 = time.perf_counter()
            call(n, i)
            mine.append((time.perf_counter() - t0) * 1000)
        with lock:
            latencies.extend(mine)

    t0 = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        list(pool.map(client, range(clients)))
    return time.perf_counter() - t0, latencies


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--lookups", type=int, default=200)
    parser.add_argument("--embedder", default="onnx-minilm")
    parser.add_argument("--data-dir", type=Path, default=None)
    args = parser.parse_args()
    data_dir = args.data_dir or Path(tempfile.mkdtemp(prefix="bench-http-"))
    corpus = corpus_path()
    overrides = {
        "data-dir": str(data_dir),
        "embedder.provider": args.embedder,
        "rag.domains-file": str(corpus / "domains.yaml"),
    }
    questions = [q["query"] for q in json.loads((corpus / "questions.json").read_text("utf-8"))]
    run = uuid.uuid4().hex[:8]

    def query(n: int, i: int) -> str:
        return questions[(n * 7 + i) % len(questions)]

    with create_app(overrides=overrides) as app:
        categories = sorted(
            p for p in corpus.iterdir() if p.is_dir() and not p.name.startswith("_")
        )
        app.ingest(categories, root=corpus, sync=True)
        for i in range(20):  # warm-up: model, caches
            app.lookup(query(0, i), session_id=f"warmup-{run}")

        def in_process(n: int, i: int) -> None:
            app.lookup(query(n, i), session_id=f"bench-inproc-{run}-{n}", step_id=str(i))

        local_s, local_ms = run_clients(args.clients, args.lookups, in_process)

    env_cmd = [CLI, "--data-dir", str(data_dir), "serve", "--port", "0"]
    server = subprocess.Popen(
        env_cmd,
        env={
            "LOOKUP_KNOWLEDGE_RAG__DOMAINS_FILE": str(corpus / "domains.yaml"),
            "LOOKUP_KNOWLEDGE_EMBEDDER__PROVIDER": args.embedder,
            "PATH": "/usr/bin:/bin",
        },
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stderr is not None
        url = re.search(r"(http://\S+?)/?$", server.stderr.readline().strip())
        assert url, "serve printed no URL"
        base = url.group(1)
        for _ in range(300):
            try:
                if httpx.get(f"{base}/readyz", timeout=5).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        local = threading.local()

        def over_http(n: int, i: int) -> None:
            if not hasattr(local, "client"):
                local.client = httpx.Client(base_url=base, timeout=120)
            body = {"query": query(n, i), "session_id": f"bench-http-{run}-{n}", "step_id": str(i)}
            response = local.client.post("/v1/lookup", json=body)
            response.raise_for_status()

        with httpx.Client(base_url=base, timeout=60) as warm:
            for i in range(20):
                warm.post("/v1/lookup", json={"query": query(0, i), "session_id": f"warmup-{run}"})
        http_s, http_ms = run_clients(args.clients, args.lookups, over_http)

        # every call recorded once, gap-free per session
        with httpx.Client(base_url=base, timeout=60) as audit:
            for kind in ("inproc", "http"):
                for n in range(args.clients):
                    sid = f"bench-{kind}-{run}-{n}"
                    seqs: list[int] = []
                    offset: int | None = 0
                    while offset is not None:
                        page = audit.get(
                            "/v1/invocations",
                            params={"session": sid, "limit": 1000, "offset": offset},
                        ).json()
                        seqs += [item["seq"] for item in page["items"]]
                        offset = page["next_offset"]
                    assert sorted(seqs) == list(range(1, args.lookups + 1)), (sid, len(seqs))
    finally:
        server.terminate()
        server.wait(60)

    total = args.clients * args.lookups
    rows = [
        ("in-process LookupApp.lookup", total / local_s, local_ms),
        ("HTTP POST /v1/lookup (serve)", total / http_s, http_ms),
    ]
    print(
        f"{args.clients} clients x {args.lookups} lookups, embedder {args.embedder}, Milvus Lite + SQLite"
    )
    print(f"{'path':32} {'req/s':>8} {'p50 ms':>8} {'p95 ms':>8}")
    for name, rate, ms in rows:
        print(f"{name:32} {rate:8.1f} {percentile(ms, 50):8.1f} {percentile(ms, 95):8.1f}")
    print(
        f"HTTP / in-process: throughput {rows[1][1] / rows[0][1]:.2f}x, "
        f"p50 {percentile(http_ms, 50) / percentile(local_ms, 50):.2f}x, "
        f"p95 {percentile(http_ms, 95) / percentile(local_ms, 95):.2f}x"
    )
    print(
        f"audit: {2 * args.clients} sessions x {args.lookups} invocations, seq 1..{args.lookups} each: ok"
    )


if __name__ == "__main__":
    main()
