"""Peers side by side: lookup-knowledge against LangChain, LlamaIndex and Haystack on the
same vectors and texts, each system in its own process (and its own venv), fed the same
query vectors, interleaved query by query.

Systems (each returns 10 chunks per query; query embedding excluded everywhere):

- numpy brute-force cosine over the same vectors (the floor);
- pymilvus ``MilvusClient.search``, bare (HNSW, text and doc_id returned);
- LangChain ``Milvus.similarity_search`` (langchain-milvus);
- LlamaIndex retriever over ``MilvusVectorStore`` (needs pymilvus < 3, hence its own venv);
- Haystack ``MilvusEmbeddingRetriever.run`` and a Haystack pipeline (text embedder
  component -> retriever);
- lookup-knowledge through its public API (``create_app`` -> ``LookupApp.lookup_result``),
  dense, retrieve-k 20, return-n 10, cap 2, rerank on, with the audit on (the product
  path) and off.

How: a ``prepare`` step (a child process in this venv, so its ONNX threads and Milvus
Lite server are gone when timing starts) ingests SciFact with lookup-knowledge's own
ingest into the eval collection (``eval_scifact_onnx_minilm``, reused when it is there),
embeds the queries once with the product embedder and exports every chunk (id, doc_id,
text, vector) under the cache dir. Every worker (``peer_worker.py``) builds its own Milvus
Lite store from those rows with the same HNSW parameters and search ef as
lookup-knowledge (M 16, efConstruction 200, ef 256 by default), flushed and loaded before
the first search; lookup-knowledge's workers search a copy of the collection its ingest
built. The peers' venvs are created by this script under ``--venv-dir`` (default
``~/.cache/lookup-knowledge-bench/venvs``) with the pinned versions in ``PEERS``, once.
Then for each query every worker gets the same request over stdin, one at a time, in an
order rotated per query, with ``--gap-ms`` of idle time after each call, so no system
runs while another's threads are still busy. Latency is timed inside each worker around
the system's own call (no IPC). ``p50/LC`` is the ratio of the p50s to LangChain's;
``paired`` the median over queries of the ratio to LangChain's time for the same query
(measured within ~0.2 s of each other, so less exposed to load swings). nDCG@10 is
computed with ir-measures as in the eval (a document ranks at its best chunk).

    .venv/bin/python benchmarks/bench_peer.py [--queries 300] [--venv-dir DIR] [--systems a,b]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
K = 10
RETRIEVE_K = 20
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "lookup-knowledge-bench"
BASELINE = "langchain"


@dataclass(frozen=True)
class Peer:
    """A venv (pinned requirements) and the worker systems that run in it."""

    pins: tuple[str, ...]
    systems: tuple[str, ...]


#: Pins that resolve together on this machine's PyPI mirror (2026-12-01). LlamaIndex's
#: Milvus store needs pymilvus < 3; the others use the project's pymilvus 3.
_LITE = ("milvus-lite==3.2.2", "numpy==2.4.6")
PEERS: dict[str, Peer] = {
    "pymilvus": Peer(("pymilvus==3.0.2", *_LITE), ("numpy", "pymilvus")),
    "langchain": Peer(
        ("langchain-milvus==0.4.0", "langchain-core==1.8.3", "pymilvus==3.0.2", *_LITE),
        ("langchain",),
    ),
    "llamaindex": Peer(
        (
            "llama-index-vector-stores-milvus==1.2.0",
            "llama-index-core==0.14.25",
            "pymilvus==2.6.17",
            *_LITE,
        ),
        ("llamaindex",),
    ),
    "haystack": Peer(
        ("milvus-haystack==0.1.0", "haystack-ai==3.4.1", "pymilvus==3.0.2", *_LITE),
        ("haystack", "haystack-pipeline"),
    ),
}
#: Systems run with this interpreter (the project's venv, the checkout under test).
OWN = ("lookup-knowledge-audit-on", "lookup-knowledge-audit-off")
LABELS = {
    "numpy": "numpy brute-force cosine (the floor)",
    "pymilvus": "pymilvus search HNSW, bare",
    "haystack": "Haystack MilvusEmbeddingRetriever.run",
    "langchain": "LangChain Milvus.similarity_search",
    "llamaindex": "LlamaIndex retriever (MilvusVectorStore)",
    "lookup-knowledge-audit-off": "lookup-knowledge, audit off",
    "haystack-pipeline": "Haystack pipeline (embedder -> retriever)",
    "lookup-knowledge-audit-on": "lookup-knowledge, audit on",
}
ALL_SYSTEMS = tuple(LABELS)


def fail(message: str) -> None:
    print(f"bench_peer: {message}", file=sys.stderr)
    raise SystemExit(1)


# --------------------------------------------------------------------------- venvs


def ensure_venv(name: str, peer: Peer, venv_dir: Path) -> Path:
    """The peer's venv (created and installed once; reused while the pins are the same).
    Returns its python; exits with the pip output when the venv cannot be built."""
    key = hashlib.sha256("\n".join((sys.version, *peer.pins)).encode()).hexdigest()[:12]
    venv = venv_dir / f"{name}-{key}"
    python = venv / "bin" / "python"
    stamp = venv / ".bench-peer-installed"
    if stamp.is_file():
        return python
    print(f"  building the {name} venv at {venv}: {' '.join(peer.pins)}", file=sys.stderr)
    shutil.rmtree(venv, ignore_errors=True)
    venv_dir.mkdir(parents=True, exist_ok=True)
    steps = [
        [sys.executable, "-m", "venv", str(venv)],
        [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *peer.pins],
    ]
    for step in steps:
        done = subprocess.run(step, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            output = "\n".join(
                line
                for line in (done.stdout + done.stderr).splitlines()
                if not line.startswith("WARNING: Location 'file://")
            )
            tail = "\n".join(output.splitlines()[-25:])
            shutil.rmtree(venv, ignore_errors=True)
            fail(
                f"could not build the {name} venv ({' '.join(step[:4])} ... exited "
                f"{done.returncode}); its pinned requirements {list(peer.pins)} may not "
                f"resolve on this machine's package index:\n{tail}"
            )
    stamp.write_text("\n".join(peer.pins) + "\n", encoding="utf-8")
    return python


# --------------------------------------------------------------------------- prepare


def prepare(args: argparse.Namespace) -> None:
    """Child process: ingest (if needed), embed the queries, export the chunks."""
    import numpy as np
    from _scifact import open_scifact

    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    app, container, beir, collection = open_scifact(
        data_dir=args.data_dir,
        embedder="onnx-minilm",
        limit_queries=args.queries + args.warmup,
        corpus_sample=args.corpus_sample,
        audit=False,
    )
    with app:
        embedder = container.embedder()
        queries = list(beir.dataset.queries)
        query_vectors = np.asarray(
            [embedder.embed_query(q.text) for q in queries], dtype=np.float32
        )
        identity = embedder.identity
        settings = app.settings
        uri = settings.milvus_uri
    from pymilvus import MilvusClient

    client = MilvusClient(uri)
    client.load_collection(collection)
    rows: list[dict[str, Any]] = []
    iterator = client.query_iterator(
        collection,
        batch_size=1000,
        filter="",
        output_fields=["evidence_key", "doc_id", "text", "dense_vector"],
    )
    while batch := iterator.next():
        rows.extend(batch)
    iterator.close()
    client.close()
    rows.sort(key=lambda r: str(r["evidence_key"]))
    with (out / "chunks.jsonl").open("w", encoding="utf-8") as lines:
        for row in rows:
            record = {"id": row["evidence_key"], "doc_id": row["doc_id"], "text": row["text"]}
            lines.write(json.dumps(record, ensure_ascii=False) + "\n")
    np.save(out / "vectors.npy", np.asarray([r["dense_vector"] for r in rows], dtype=np.float32))
    np.save(out / "query_vectors.npy", query_vectors)
    with (out / "queries.jsonl").open("w", encoding="utf-8") as lines:
        for q in queries:
            lines.write(json.dumps({"id": q.query_id, "text": q.text}, ensure_ascii=False) + "\n")
    qrels = {q.query_id: dict(beir.dataset.qrels[q.query_id]) for q in queries}
    (out / "qrels.json").write_text(json.dumps(qrels), encoding="utf-8")
    index = settings.milvus.index
    meta = {
        "collection": collection,
        "chunks": len(rows),
        "documents": len({r["doc_id"] for r in rows}),
        "dimension": int(query_vectors.shape[1]),
        "k": K,
        "retrieve_k": RETRIEVE_K,
        "index_m": index.m,
        "index_ef_construction": index.ef_construction,
        "ef": settings.milvus.search_ef,
        "identity": {
            "provider": identity.provider,
            "model": identity.model,
            "dimension": identity.dimension,
            "normalised": identity.normalised,
        },
        "lookup_knowledge_milvus": str(Path(uri).resolve()),
        "milvus_lite": _version("milvus-lite"),
    }
    (out / "meta.json").write_text(json.dumps(meta, indent=1), encoding="utf-8")


def _version(distribution: str) -> str:
    from importlib.metadata import version

    return version(distribution)


# --------------------------------------------------------------------------- workers


class Worker:
    def __init__(self, system: str, python: Path, data: Path, work: Path) -> None:
        self.system = system
        env = {**os.environ, "HAYSTACK_TELEMETRY_ENABLED": "False", "PYTHONUNBUFFERED": "1"}
        env.pop("PYTHONPATH", None)
        self.log = (work.parent / f"{system}.log").open("w", encoding="utf-8")
        self.process = subprocess.Popen(
            [
                str(python),
                str(HERE / "peer_worker.py"),
                system,
                "--data",
                str(data),
                "--work",
                str(work),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log,
            text=True,
            env=env,
            cwd=str(work.parent),
        )
        self.build_s = 0.0

    def _read(self) -> dict[str, Any]:
        stdout: IO[str] = self.process.stdout  # type: ignore[assignment]
        line = stdout.readline()
        if not line:
            self.process.wait()
            fail(
                f"the {self.system} worker exited ({self.process.returncode}) before answering; "
                f"its log: {self.log.name}\n{_tail(Path(self.log.name))}"
            )
        message: dict[str, Any] = json.loads(line)
        if "error" in message:
            fail(f"{message['error']} (log: {self.log.name})")
        return message

    def wait_ready(self) -> None:
        self.build_s = float(self._read()["build_s"])

    def query(self, text: str, vector: list[float]) -> tuple[float, list[str]]:
        stdin: IO[str] = self.process.stdin  # type: ignore[assignment]
        stdin.write(json.dumps({"text": text, "vector": vector}) + "\n")
        stdin.flush()
        reply = self._read()
        return float(reply["ms"]), [str(d) for d in reply["docs"]]

    def stop(self) -> None:
        if self.process.stdin:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
        self.log.close()


def _tail(path: Path, lines: int = 25) -> str:
    try:
        return "\n".join(path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


# --------------------------------------------------------------------------- report


def percentile(values: Sequence[float], p: float) -> float:
    ordered = sorted(values)
    index = max(0, min(len(ordered) - 1, -(-len(ordered) * p // 100) - 1))
    return ordered[int(index)]


def quality(
    docs: dict[str, list[str]], qrels: dict[str, dict[str, int]]
) -> tuple[float, float, float]:
    from lookup_knowledge.adapters.evaluation.metrics import IrMeasuresMetrics
    from lookup_knowledge.application.evaluation import run_scores

    measured = list(docs)
    run = {qid: run_scores(list(dict.fromkeys(d))) for qid, d in docs.items() if d}
    scores = IrMeasuresMetrics().evaluate({q: qrels[q] for q in measured}, run, ["nDCG@10"])
    ndcg = statistics.fmean(scores[q]["nDCG@10"] for q in measured)
    distinct = statistics.fmean(len(set(d)) for d in docs.values())
    returned = statistics.fmean(len(d) for d in docs.values())
    return ndcg, distinct, returned


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--queries", type=int, default=300, help="measured queries (default 300)")
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--gap-ms", type=float, default=20.0, help="idle time after each call")
    parser.add_argument(
        "--data-dir", type=Path, default=ROOT / "benchmarks" / "results" / "eval-data"
    )
    parser.add_argument("--venv-dir", type=Path, default=CACHE / "venvs")
    parser.add_argument("--work-dir", type=Path, default=CACHE / "run")
    parser.add_argument(
        "--systems",
        default=",".join(ALL_SYSTEMS),
        help=f"comma-separated subset of: {', '.join(ALL_SYSTEMS)}",
    )
    parser.add_argument("--seed", type=int, default=15)
    parser.add_argument(
        "--corpus-sample",
        type=int,
        default=None,
        help="smoke test only: a sample of the corpus (own collection, figures not comparable)",
    )
    sub = parser.add_subparsers(dest="command")
    prep = sub.add_parser("prepare", help=argparse.SUPPRESS)
    prep.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    if args.command == "prepare":
        prepare(args)
        return

    systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    unknown = sorted(set(systems) - set(ALL_SYSTEMS))
    if unknown:
        print(f"bench_peer: unknown system(s) {', '.join(unknown)}", file=sys.stderr)
        raise SystemExit(2)
    if args.queries < 1:
        print("bench_peer: --queries must be >= 1", file=sys.stderr)
        raise SystemExit(2)

    pythons: dict[str, Path] = dict.fromkeys(OWN, Path(sys.executable))
    for name, peer in PEERS.items():
        if set(peer.systems) & set(systems):
            python = ensure_venv(name, peer, args.venv_dir)
            pythons.update(dict.fromkeys(peer.systems, python))

    work: Path = args.work_dir
    shutil.rmtree(work, ignore_errors=True)
    data = work / "data"
    started = time.perf_counter()
    done = subprocess.run(
        [
            sys.executable,
            str(Path(__file__).resolve()),
            "--queries",
            str(args.queries),
            "--warmup",
            str(args.warmup),
            "--data-dir",
            str(args.data_dir),
            *(["--corpus-sample", str(args.corpus_sample)] if args.corpus_sample else []),
            "prepare",
            "--out",
            str(data),
        ],
        check=False,
    )
    if done.returncode != 0:
        fail(f"preparing the SciFact data failed (exit {done.returncode}), see above")
    meta = json.loads((data / "meta.json").read_text(encoding="utf-8"))
    print(f"  prepared in {time.perf_counter() - started:.1f} s", file=sys.stderr)

    import numpy as np

    with (data / "queries.jsonl").open(encoding="utf-8") as lines:
        queries = [json.loads(line) for line in lines]
    vectors = [[float(x) for x in row] for row in np.load(data / "query_vectors.npy")]
    qrels: dict[str, dict[str, int]] = json.loads((data / "qrels.json").read_text(encoding="utf-8"))

    workers: dict[str, Worker] = {}
    try:
        for system in systems:  # one at a time: each build has the machine to itself
            t0 = time.perf_counter()
            worker = Worker(system, pythons[system], data, work / system)
            workers[system] = worker
            worker.wait_ready()
            print(
                f"  {system}: store built in {worker.build_s:.1f} s "
                f"(ready after {time.perf_counter() - t0:.1f} s)",
                file=sys.stderr,
            )
        latency: dict[str, list[float]] = {s: [] for s in systems}
        docs: dict[str, dict[str, list[str]]] = {s: {} for s in systems}
        order = list(systems)
        random.Random(args.seed).shuffle(order)
        gap = args.gap_ms / 1000
        time.sleep(1.0)
        for i, (query, vector) in enumerate(zip(queries, vectors, strict=True)):
            turn = order[i % len(order) :] + order[: i % len(order)]  # rotated per query
            for system in turn:
                ms, found = workers[system].query(query["text"], vector)
                if i >= args.warmup:
                    latency[system].append(ms)
                    docs[system][query["id"]] = found
                time.sleep(gap)
    finally:
        for worker in workers.values():
            worker.stop()

    measured = len(queries) - args.warmup
    print(
        f"peers side by side: {measured} SciFact train queries (after {args.warmup} warm-up), "
        f"{meta['chunks']} chunks of {meta['documents']} documents ({meta['collection']}), "
        f"Milvus Lite {meta['milvus_lite']}, HNSW M {meta['index_m']} efConstruction "
        f"{meta['index_ef_construction']} ef {meta['ef']}, {K} chunks per result, query "
        f"embedding excluded, one process per system, interleaved, {args.gap_ms:g} ms gap"
    )
    header = (
        f"{'system':44}{'p50 ms':>8}{'p95 ms':>8}{'mean ms':>9}{'p50/LC':>8}{'paired':>8}"
        f"{'nDCG@10':>9}{'chunks':>8}{'docs/result':>12}"
    )
    print(header)
    base = percentile(latency[BASELINE], 50) if BASELINE in latency else None
    figures: dict[str, tuple[float, float, float]] = {}
    for system in sorted(systems, key=lambda s: percentile(latency[s], 50)):
        values = latency[system]
        p50, p95, mean = percentile(values, 50), percentile(values, 95), statistics.fmean(values)
        ndcg, distinct, returned = quality(docs[system], qrels)
        figures[system] = (p50, ndcg, distinct)
        ratio = f"{p50 / base:7.2f}x" if base else f"{'-':>8}"
        paired = f"{'-':>8}"
        if base:  # same query, same moment: the per-query ratio's median is less noisy
            ratios = [a / b for a, b in zip(values, latency[BASELINE], strict=True)]
            paired = f"{statistics.median(ratios):7.2f}x"
        print(
            f"{LABELS[system]:44}{p50:8.2f}{p95:8.2f}{mean:9.2f}{ratio}{paired}{ndcg:9.4f}{returned:8.2f}{distinct:12.2f}"
        )
    _targets(figures)


def _targets(figures: dict[str, tuple[float, float, float]]) -> None:
    ours = figures.get("lookup-knowledge-audit-on")
    off = figures.get("lookup-knowledge-audit-off")
    peer = figures.get(BASELINE)
    if ours and off:
        print(f"audit on / audit off p50: {ours[0] / off[0]:.2f}x")
    if not (ours and peer):
        return
    checks = [
        ("p50 <= 1.0x LangChain", ours[0] <= peer[0], f"{ours[0] / peer[0]:.2f}x"),
        ("nDCG@10 >= LangChain", ours[1] >= peer[1], f"{ours[1]:.4f} vs {peer[1]:.4f}"),
        ("more distinct docs/result", ours[2] > peer[2], f"{ours[2]:.2f} vs {peer[2]:.2f}"),
    ]
    for other in ("llamaindex", "haystack", "haystack-pipeline"):
        if other in figures:
            p50 = figures[other][0]
            checks.append(
                (f"p50 below {LABELS[other]}", ours[0] < p50, f"{ours[0]:.2f} vs {p50:.2f} ms")
            )
    for label, ok, detail in checks:
        print(f"target (audit on) {label}: {'met' if ok else 'MISSED'} ({detail})")


if __name__ == "__main__":
    main()
