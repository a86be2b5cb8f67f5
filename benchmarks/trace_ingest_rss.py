"""Where an ingest's memory goes: the SciFact ingest as the CLI runs it (malloc arenas
capped, mmap threshold fixed, Arrow on the C library's malloc, audit off), with a thread
that reads the process's RSS every 0.1 s and, on every new high of 4 MB or more, writes
one JSON line with the RSS and the stack of the thread doing the work (Milvus Lite's
server thread when one holds a ``milvus_lite`` frame, else the main thread); then the
peak (``ru_maxrss``).

    .venv/bin/python benchmarks/trace_ingest_rss.py [--embedder hashing] [--docs 0] \\
        [--out trace.jsonl]

``--embedder hashing`` with ``LOOKUP_KNOWLEDGE_EMBEDDER__HASHING__DIMENSION=384`` writes
rows of MiniLM's size without running a model (a minute instead of ten).
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path
from typing import IO

sys.path.insert(0, str(Path(__file__).resolve().parent))


def _rss_mb() -> float:
    with open("/proc/self/statm", encoding="ascii") as statm:
        return int(statm.read().split()[1]) * resource.getpagesize() / 2**20


def _stack(main_id: int) -> list[str]:
    frames = sys._current_frames()
    for frame in frames.values():
        lite = [f for f in traceback.extract_stack(frame) if "milvus_lite" in f.filename]
        if lite:
            return [f"{Path(f.filename).name}:{f.lineno} {f.name}" for f in lite[-8:]]
    main = frames.get(main_id)
    picked = traceback.extract_stack(main)[-10:] if main is not None else []
    return [f"{Path(f.filename).name}:{f.lineno} {f.name}" for f in picked]


def _trace(out: IO[str], started: float, main_id: int, stop: threading.Event) -> None:
    high = 0.0
    while not stop.wait(0.1):
        rss = _rss_mb()
        if rss >= high + 4:
            high = rss
            line = {"t": round(time.perf_counter() - started, 1), "rss_mb": round(rss)}
            out.write(json.dumps({**line, "stack": _stack(main_id)}) + "\n")
            out.flush()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--embedder", default="onnx-minilm", help="embedder.provider")
    parser.add_argument("--docs", type=int, default=0, help="corpus sample (0: all)")
    parser.add_argument("--out", type=Path, default=None, help="JSON lines (default: stdout)")
    args = parser.parse_args()

    from _scifact import open_scifact

    from lookup_knowledge.adapters.cli.memory import limit_malloc_arenas, tune_for_ingest

    limit_malloc_arenas()
    tune_for_ingest()  # as the ingest command does
    out = args.out.open("w", encoding="utf-8") if args.out else sys.stdout
    started, stop = time.perf_counter(), threading.Event()
    tracer = threading.Thread(
        target=_trace, args=(out, started, threading.get_ident(), stop), daemon=True
    )
    tracer.start()
    with tempfile.TemporaryDirectory(prefix="trace-ingest-rss-") as data_dir:
        app, *_ = open_scifact(
            data_dir=Path(data_dir),
            embedder=args.embedder,
            corpus_sample=args.docs or None,
            audit=False,
        )
        app.close()
    stop.set()
    tracer.join()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    seconds = time.perf_counter() - started
    out.write(json.dumps({"peak_mb": round(peak), "seconds": round(seconds, 1)}) + "\n")
    out.flush()


if __name__ == "__main__":
    main()
