"""CPU of the audit record on the caller's thread, before and after issue 28 (item 2).

What ``SqlToolInvocationRecorder.record`` does before the journal's write and fsync:
clean the record (``clean_invocation``) and encode its journal line (``encode``). Both
versions run in this process, interleaved, on the same records (5 evidence blocks with
~1 KB of shown text each, ~15 KB of retrieval details with a rerank trace, as a real
lookup records them): the code before is the module text at a git revision
(``--before``, default the commit before the change), loaded from ``git show``. Prints
the medians of CPU time per record and their ratio; no database, no disk.

    .venv/bin/python benchmarks/bench_record_path.py [--before 835e24c] [--rounds 7]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import types
import zlib
from dataclasses import replace
from pathlib import Path

from bench_audit import make_record

from lookup_knowledge.adapters.audit import codec
from lookup_knowledge.adapters.audit.journal_format import encode
from lookup_knowledge.application.ports import ToolInvocation

ROOT = Path(__file__).resolve().parents[1]


def old_codec(revision: str) -> types.ModuleType:
    source = subprocess.run(
        ["git", "-C", str(ROOT), "show", f"{revision}:src/adapters/audit/codec.py"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    module = types.ModuleType("codec_before")
    exec(compile(source, "codec_before.py", "exec"), module.__dict__)
    return module


def old_encode(module: types.ModuleType, clean: ToolInvocation) -> str:
    """``journal_format.encode`` as it was: the standard library's json."""
    document = {"v": 1, "db": "sqlite", "invocation": module.to_json(clean, cleaned=True)}
    body = json.dumps(document, ensure_ascii=True, separators=(",", ":"), allow_nan=False)
    return f"{zlib.crc32(body.encode('ascii')):08x} {body}\n"


def realistic(n: int) -> ToolInvocation:
    record = make_record(f"record-path-{n}", n)
    text = "Serum levels were measured in 412 patients over 18 months; " * 16
    details = dict(record.retrieval_details)
    details["retrievalTrace"] = {
        "passes": [
            {"filter": None, "hits": 20, "usable": 20, "durationMs": 3.2, "ids": list(range(20))}
        ],
        "timingsMs": {"embed": 6.1, "search": 4.2, "rerank": 0.3, "total": 12.0},
        "candidates": [
            {"document_id": f"doc-{i}#chunk-0", "score": 0.5 + i / 100} for i in range(20)
        ],
    }
    # What the post-processor's trace holds for each of the 20 candidates (~5 KB, ~60
    # containers): the shape a SciFact lookup records.
    details["rerankTrace"] = [
        {
            "document_id": f"doc-{i}#chunk-0",
            "relevance": 0.33 - i / 100,
            "strength": 0.02 - i / 2000,
            "finalScore": 0.33 - i / 100,
            "rankBefore": i + 1,
            "rankAfter": i + 1,
            "adjustments": [
                {
                    "rule": "relevance",
                    "weight": 1.0,
                    "contribution": 0.33 - i / 100,
                    "detail": f"cosine score {0.33 - i / 100:.6f}",
                }
            ],
            "outcome": "returned" if i < 5 else "cut",
        }
        for i in range(20)
    ]
    return replace(
        record,
        retrieval_details=details,
        evidence=tuple(replace(e, shown_text=f"{text} ({e.rank})") for e in record.evidence),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", default="835e24c")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--records", type=int, default=500)
    args = parser.parse_args()
    before = old_codec(args.before)
    records = [realistic(n) for n in range(args.records)]
    assert before.clean_invocation(records[0]) == codec.clean_invocation(records[0])
    line_bytes = len(encode(codec.clean_invocation(records[0]), cleaned=True, database="sqlite"))

    def run_before() -> None:
        for record in records:
            old_encode(before, before.clean_invocation(record))

    def run_after() -> None:
        for record in records:
            encode(codec.clean_invocation(record), cleaned=True, database="sqlite")

    times: dict[str, list[float]] = {"before": [], "after": []}
    for r in range(args.rounds):
        order = [("before", run_before), ("after", run_after)]
        for name, run in order if r % 2 == 0 else reversed(order):
            cpu = time.process_time()
            run()
            times[name].append((time.process_time() - cpu) / len(records) * 1e6)
    b, a = statistics.median(times["before"]), statistics.median(times["after"])
    print(
        f"clean + encode of one record ({line_bytes} byte journal line), CPU per record, "
        f"median of {args.rounds} interleaved rounds of {args.records}; load average "
        f"{os.getloadavg()[0]:.2f} on {os.cpu_count()} cpus"
    )
    print(f"  before ({args.before}): {b:7.1f} us")
    print(f"  after:            {a:7.1f} us   ({a / b:.2f}x)")


if __name__ == "__main__":
    sys.exit(main())
