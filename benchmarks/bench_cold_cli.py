"""Cold read commands against the bare import of their own dependencies.

Each command is a new process, as a person at a terminal or a script runs it: the
console script ``lookup-knowledge`` of this virtualenv on a data directory holding one
recorded session (the default configuration: Milvus Lite and the ONNX model, neither of
which a read command should start). The baseline is ``python -c "import sqlalchemy,
typer, rich"``, what ``audit list`` cannot do without. Rounds are interleaved (baseline,
then each command) so a load that comes and goes touches all alike; the figures are
medians of wall time and of CPU time (user + system, less sensitive to other jobs on
the machine), and each command's ratio to the baseline.

    .venv/bin/python benchmarks/bench_cold_cli.py [--rounds 9] [--data-dir DIR]
        [--lookup-data-dir DIR]

Target (issue 27): cold ``audit list`` <= 2x the baseline on a quiet machine. Issue 28:
cold ``lookup`` (the sample corpus in Milvus Lite, the ONNX model) <= 2x its own
baseline, ``python -c "import pymilvus, onnxruntime, sqlalchemy"``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BIN = Path(sys.executable).parent
CLI = str(BIN / "lookup-knowledge")
BASELINE = (
    "bare import: sqlalchemy, typer, rich",
    [sys.executable, "-c", "import sqlalchemy, typer, rich"],
)
# What a lookup cannot do without (issue 28): the Milvus client, the model runtime and the
# audit store's SQL toolkit.
LOOKUP_BASELINE = (
    "bare import: pymilvus, onnxruntime, sqlalchemy",
    [sys.executable, "-c", "import pymilvus, onnxruntime, sqlalchemy"],
)
LOOKUP = "lookup (Milvus Lite, ONNX)"

RECORD = """
import sys
from lookup_knowledge import create_app
from lookup_knowledge.sample_corpus import corpus_path

overrides = {"data-dir": sys.argv[1], "search.backend": "memory", "embedder.provider": "hashing"}
with create_app(overrides=overrides) as app:
    app.ingest([corpus_path()], root=corpus_path())
    result = app.lookup("webhook endpoints per account", session_id="bench-cold")
    print(result["evidenceBlocks"][0]["document_id"])
"""


def _record(data_dir: Path) -> str:
    """One recorded lookup (in-memory search, so the data dir holds only the audit)."""
    done = subprocess.run(
        [sys.executable, "-c", RECORD, str(data_dir)],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip().splitlines()[-1]


def _ingest_sample(data_dir: Path, env: dict[str, str]) -> None:
    """The sample corpus in Milvus Lite with the default (ONNX) embedder, once."""
    from lookup_knowledge.sample_corpus import corpus_path

    if (data_dir / "milvus.db").exists():
        return
    subprocess.run(
        [CLI, "--data-dir", str(data_dir), "ingest", str(corpus_path())],
        stdout=subprocess.DEVNULL,
        env=env,
        check=True,
    )


def _run(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one process."""
    start = time.perf_counter()
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - start
    process.returncode = os.waitstatus_to_exitcode(status)
    stderr = process.stderr.read().decode() if process.stderr else ""
    if process.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(argv)} failed ({process.returncode}): {stderr}")
    return wall, usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--data-dir", type=Path, default=None)
    parser.add_argument(
        "--lookup-data-dir",
        type=Path,
        default=None,
        help="a data dir holding the sample corpus in Milvus Lite (ingested when empty)",
    )
    args = parser.parse_args()
    folder = args.data_dir or Path(tempfile.mkdtemp(prefix="bench-cold-cli-")) / "data"
    cited = _record(folder)
    # As a user's shell has it: byte-compiled files written and read (a sandbox that sets
    # PYTHONDONTWRITEBYTECODE would have every command compile this package's source,
    # and not the baseline's, whose files pip compiled at install).
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("LOOKUP_KNOWLEDGE_") and k != "PYTHONDONTWRITEBYTECODE"
    }
    data = ["--data-dir", str(folder)]
    answer = f"An account can have up to 16 endpoints [{cited}]."
    lookup_data = args.lookup_data_dir or folder.parent / "lookup-data"
    _ingest_sample(lookup_data, env)
    query = "PG-53300 too many connections"
    commands = [
        LOOKUP_BASELINE,
        (LOOKUP, [CLI, "--data-dir", str(lookup_data), "lookup", query, "--session", "cold"]),
        BASELINE,
        ("audit list", [CLI, *data, "audit", "list", "--session", "bench-cold"]),
        ("audit stats", [CLI, *data, "audit", "stats"]),
        (
            "audit check-answer",
            [CLI, *data, "audit", "check-answer", "--session", "bench-cold", "--answer", answer],
        ),
        ("db current", [CLI, *data, "db", "current"]),
        ("config show", [CLI, *data, "config", "show"]),
        ("--help", [CLI, "--help"]),
    ]
    for _, argv in commands:  # once each first: byte-compiled files and the page cache
        _run(argv, env)
    walls: dict[str, list[float]] = {name: [] for name, _ in commands}
    cpus: dict[str, list[float]] = {name: [] for name, _ in commands}
    for _ in range(args.rounds):
        for name, argv in commands:
            wall, cpu = _run(argv, env)
            walls[name].append(wall)
            cpus[name].append(cpu)
    load = os.getloadavg()[0]
    base_wall = statistics.median(walls[BASELINE[0]])
    print(f"{args.rounds} interleaved rounds, medians; load average at the end {load:.2f}")
    print(f"{'command':48} {'wall s':>7} {'x base':>7} {'cpu s':>7} {'x base':>7}")
    for name, _ in commands:
        wall, cpu = statistics.median(walls[name]), statistics.median(cpus[name])
        base = LOOKUP_BASELINE[0] if name in (LOOKUP, LOOKUP_BASELINE[0]) else BASELINE[0]
        bw, bc = statistics.median(walls[base]), statistics.median(cpus[base])
        print(f"{name:48} {wall:7.3f} {wall / bw:7.2f} {cpu:7.3f} {cpu / bc:7.2f}")
    ratio = statistics.median(walls["audit list"]) / base_wall
    verdict = "met" if ratio <= 2.0 else "missed"
    print(f"cold audit list / bare import (wall): {ratio:.2f}x (target <= 2x: {verdict})")
    lookup_wall = statistics.median(walls[LOOKUP]) / statistics.median(walls[LOOKUP_BASELINE[0]])
    lookup_cpu = statistics.median(cpus[LOOKUP]) / statistics.median(cpus[LOOKUP_BASELINE[0]])
    verdict = "met" if lookup_wall <= 2.0 else "missed"
    print(
        f"cold lookup / bare import of pymilvus, onnxruntime, sqlalchemy: wall {lookup_wall:.2f}x "
        f"(target <= 2x: {verdict}), CPU {lookup_cpu:.2f}x"
    )


if __name__ == "__main__":
    main()
