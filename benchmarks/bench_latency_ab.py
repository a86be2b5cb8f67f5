"""Lookup latency of two checkouts, mode by mode, on one BEIR collection (issue 13).

Issue 13's latency target: each mode's latency reported beside its quality, and no mode
slower than 1.5x the code before the issue at equal settings. This runs the ``eval`` CLI
of two checkouts (each with its own ``.venv`` and its own data directory, ingested
once) in alternating rounds, so machine load hits both alike: per round and depth, one
``eval run --preset modes --skip-ingest`` of each checkout, in the order A B in odd
rounds and B A in even ones. Every run is its own process with the same settings
(``--return-n``/``--retrieve-k`` per depth, the same embedder, audit recording as in the
eval, i.e. on, into the data directory's SQLite store).

Figures per run and mode, read from the run's JSON report: latency p50/p95 (the audit
store's recorded ``duration_ms``: query embedding, search, post-processing, projection;
not the audit write itself, in both versions) and nDCG@10. From the audit store's
``started_at`` of consecutive queries it also takes the wall time per query (the gap
from one lookup's start to the next one's: everything above plus the audit write and
the eval loop). The summary gives, per depth and mode, the medians over rounds and the
new/old ratio of each round's p50 (and p95), median over rounds.

The script imports nothing from the project (the two checkouts may differ), so any
Python 3.11+ runs it. Typical use, from the new checkout's root::

    git worktree add --detach ../wt-old 2b3408f && (cd ../wt-old && scripts/bootstrap dev,eval)
    .venv/bin/python benchmarks/bench_latency_ab.py --old ../wt-old --new . \\
        --old-data /tmp/ab/old --new-data /tmp/ab/new --ingest --rounds 3

``--ingest`` first runs one full eval per checkout (it ingests the corpus: about 10
minutes of ONNX embedding each on 2 cores), one after the other; drop it to reuse the
data directories.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import sqlite3
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATASET = ROOT.parent / "shared" / "datasets" / "scifact"
DEPTHS = {"eval": (20, 50), "agent": (5, 20)}  # return-n, retrieve-k
MODES = ("dense", "sparse", "hybrid")
NDCG = "nDCG@10"


@dataclass
class Run:
    version: str
    depth: str
    round: int
    run_id: str
    load_before: float
    load_after: float
    seconds: float
    queries: int = 0
    p50: dict[str, float] = field(default_factory=dict)
    p95: dict[str, float] = field(default_factory=dict)
    ndcg: dict[str, float] = field(default_factory=dict)
    wall_p50: dict[str, float] = field(default_factory=dict)
    wall_p95: dict[str, float] = field(default_factory=dict)
    embed_p50: dict[str, float] = field(default_factory=dict)
    search_p50: dict[str, float] = field(default_factory=dict)


def nearest_rank(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, math.ceil(p / 100 * len(ordered)) - 1))]


def eval_command(
    repo: Path, data: Path, out: Path, args: argparse.Namespace, depth: str, ingest: bool
) -> list[str]:
    return_n, retrieve_k = DEPTHS[depth]
    cmd = [
        str(repo / ".venv" / "bin" / "lookup-knowledge"),
        *("eval", "run", str(args.dataset), "--split", args.split, "--preset", "modes"),
        *("--embedder", args.embedder, "--data-dir", str(data), "--out", str(out)),
        *("--return-n", str(return_n), "--retrieve-k", str(retrieve_k), "--chart", "none"),
    ]
    if repo.resolve() == args.new.resolve():
        for setting in args.new_set:
            cmd += ["--set", setting]
    if not ingest:
        cmd += ["--skip-ingest", "--collection", args.collection]
        if args.limit_queries:
            cmd += ["--limit-queries", str(args.limit_queries)]
    return ["nice", "-n", str(args.nice), *cmd] if args.nice else cmd


def recorded(data: Path, session: str) -> tuple[list[float], dict[str, float]]:
    """From one audit session (SQLite): the gaps (ms) between consecutive lookups'
    starts, and the p50 of each stage in the retrieval trace's ``timingsMs``."""
    db = data / "audit.db"
    if not db.exists():
        return [], {}
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        rows = conn.execute(
            "SELECT started_at, retrieval_details FROM tool_invocation"
            " WHERE session_id = ? ORDER BY seq",
            (session,),
        ).fetchall()
    starts = [datetime.fromisoformat(str(r[0])) for r in rows]
    stages: dict[str, list[float]] = {}
    for _start, details in rows:
        timings = json.loads(details or "{}").get("retrievalTrace", {}).get("timingsMs", {})
        for stage in ("embed", "search"):
            if stage in timings:
                stages.setdefault(stage, []).append(float(timings[stage]))
    gaps = [(b - a).total_seconds() * 1000.0 for a, b in itertools.pairwise(starts)]
    return gaps, {k: nearest_rank(v, 50) for k, v in stages.items()}


def run_once(
    version: str, repo: Path, data: Path, args: argparse.Namespace, depth: str, rnd: int
) -> Run:
    out = args.out / f"{version}-{depth}-r{rnd}"
    out.mkdir(parents=True, exist_ok=True)
    before = set(out.glob("*.json"))
    cmd = eval_command(repo, data, out, args, depth, ingest=rnd == 0)
    load_before = os.getloadavg()[0]
    t = time.perf_counter()
    with (out / "stdout.txt").open("w") as so, (out / "stderr.txt").open("w") as se:
        proc = subprocess.run(cmd, cwd=repo, stdout=so, stderr=se, check=False)
    seconds = time.perf_counter() - t
    if proc.returncode != 0:
        sys.exit(f"{version} {depth} round {rnd} failed ({proc.returncode}): see {out}")
    (report_path,) = set(out.glob("*.json")) - before
    report = json.loads(report_path.read_text(encoding="utf-8"))
    run = Run(version, depth, rnd, report["runId"], load_before, os.getloadavg()[0], seconds)
    for conf in report["configurations"]:
        name = conf["name"]
        run.p50[name] = conf["latencyP50Ms"]
        run.p95[name] = conf["latencyP95Ms"]
        run.ndcg[name] = conf["metrics"][NDCG]
        run.queries = conf["queries"]
        gaps, stages = recorded(data, conf["sessionId"])
        if "embed" in stages:
            run.embed_p50[name] = stages["embed"]
        if "search" in stages:
            run.search_p50[name] = stages["search"]
        if gaps:
            run.wall_p50[name] = nearest_rank(gaps, 50)
            run.wall_p95[name] = nearest_rank(gaps, 95)
    print(
        f"round {rnd} {depth:5} {version}: "
        + "  ".join(f"{m} {run.p50[m]:.1f}/{run.p95[m]:.1f}" for m in MODES)
        + f"  ms p50/p95  (load {load_before:.1f}->{run.load_after:.1f}, {seconds:.0f} s)",
        flush=True,
    )
    return run


def _median(runs: list[Run], attr: str, mode: str) -> float:
    return statistics.median(float(getattr(r, attr)[mode]) for r in runs)


def _pair(old: list[Run], new: list[Run], attr: str, mode: str) -> str:
    if not all(mode in getattr(r, attr) for r in old + new):
        return "-"
    return f"{_median(old, attr, mode):.1f} / {_median(new, attr, mode):.1f}"


def _ratio(old: list[Run], new: list[Run], attr: str, mode: str) -> float:
    """new/old of the same round, median over rounds."""
    return statistics.median(
        float(getattr(n, attr)[mode]) / float(getattr(o, attr)[mode])
        for o, n in zip(old, new, strict=True)
    )


def summary(runs: list[Run], depths: list[str]) -> str:
    lines = [
        "| depth | mode | old p50 | old p95 | new p50 | new p95 | new/old p50 | new/old p95 "
        "| wall p50 old / new | embed p50 old / new | search p50 old / new "
        "| nDCG@10 old | nDCG@10 new | queries (nDCG) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for depth in depths:
        timed = [r for r in runs if r.depth == depth and r.round > 0]
        old = sorted((r for r in timed if r.version == "old"), key=lambda r: r.round)
        new = sorted((r for r in timed if r.version == "new"), key=lambda r: r.round)
        # quality from the run with the most queries at this depth (the ingest run if any)
        at_depth = [r for r in runs if r.depth == depth]
        q_old = max((r for r in at_depth if r.version == "old"), key=lambda r: r.queries)
        q_new = max((r for r in at_depth if r.version == "new"), key=lambda r: r.queries)
        for m in MODES:
            lines.append(
                f"| {depth} | {m} | {_median(old, 'p50', m):.1f} | {_median(old, 'p95', m):.1f} "
                f"| {_median(new, 'p50', m):.1f} | {_median(new, 'p95', m):.1f} "
                f"| {_ratio(old, new, 'p50', m):.2f}x | {_ratio(old, new, 'p95', m):.2f}x "
                f"| {_pair(old, new, 'wall_p50', m)} | {_pair(old, new, 'embed_p50', m)} "
                f"| {_pair(old, new, 'search_p50', m)} "
                f"| {q_old.ndcg[m]:.4f} | {q_new.ndcg[m]:.4f} | {q_old.queries} / {q_new.queries} |"
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--old", type=Path, required=True, help="checkout A (with .venv)")
    parser.add_argument("--new", type=Path, required=True, help="checkout B (with .venv)")
    parser.add_argument("--old-data", type=Path, required=True)
    parser.add_argument("--new-data", type=Path, required=True)
    parser.add_argument("--dataset", type=Path, default=DEFAULT_DATASET)
    parser.add_argument("--split", default="train")
    parser.add_argument("--embedder", default="onnx-minilm")
    parser.add_argument("--collection", default="eval_scifact_onnx_minilm")
    parser.add_argument(
        "--new-set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a setting for checkout B's runs only (repeatable), e.g. to match A's",
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--depths", default="eval,agent", help="comma-separated: eval, agent")
    parser.add_argument("--ingest", action="store_true", help="ingest each checkout first")
    parser.add_argument(
        "--limit-queries", type=int, default=0, help="timed rounds run the first N queries only"
    )
    parser.add_argument("--nice", type=int, default=10, help="nice level (0: none)")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "latency-ab")
    args = parser.parse_args()
    args.dataset = args.dataset.resolve()
    args.out = args.out.resolve()
    depths = [d.strip() for d in args.depths.split(",") if d.strip()]
    if unknown := set(depths) - DEPTHS.keys():
        parser.error(f"unknown depths: {sorted(unknown)}")
    versions = {
        "old": (args.old.resolve(), args.old_data.resolve()),
        "new": (args.new.resolve(), args.new_data.resolve()),
    }
    for name, (repo, _data) in versions.items():
        cmd = ["git", "-C", str(repo), "log", "-1", "--format=%h %s"]
        head = subprocess.run(cmd, capture_output=True, text=True, check=False).stdout
        print(f"{name}: {repo} at {head.strip()[:100]}")
    runs: list[Run] = []
    if args.ingest:  # one after the other: two ONNX ingests in parallel halve each other
        for name, (repo, data) in versions.items():
            runs.append(run_once(name, repo, data, args, depths[0], 0))
    for rnd in range(1, args.rounds + 1):
        order = ("old", "new") if rnd % 2 else ("new", "old")
        for depth in depths:
            for name in order:
                repo, data = versions[name]
                runs.append(run_once(name, repo, data, args, depth, rnd))
    table = summary(runs, depths)
    print(table)
    (args.out / "summary.md").write_text(table + "\n", encoding="utf-8")
    (args.out / "runs.json").write_text(
        json.dumps([vars(r) for r in runs], indent=2) + "\n",
        encoding="utf-8",
    )


if __name__ == "__main__":
    main()
