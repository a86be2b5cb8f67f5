"""The answer checker on the labelled claim set: precision/recall per verdict, and latency.

    .venv/bin/python benchmarks/answer_check_set.py            # Milvus Lite + SQLite, temp dir

Each case of ``benchmarks/data/answer_check_cases.json`` runs its lookups in a session of
its own through ``LookupApp`` (the real pipeline over the bundled sample corpus, the
default embedder), cites the returned block that contains its anchor, and checks the
answer with ``app.check_answer`` (recorded in the audit store). No document_id is written
in the set: chunking and ids may change, the anchors find the blocks.

Latency: ``check_answer`` per claim (reading the session's evidence, checking, writing the
verdicts), against ``verify_citations`` of the same ids in the same run as the baseline.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import tempfile
import time
import uuid
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CASES = ROOT / "benchmarks" / "data" / "answer_check_cases.json"
VERDICTS = ("supported", "unsupported", "contradicted", "uncited", "invalid_citation")


@dataclass
class CaseResult:
    id: str
    kind: str
    expect: str
    got: str
    reasons: tuple[str, ...]
    check_id: str
    session_id: str
    check_ms: float
    verify_ms: float
    unrecorded_ms: float


def load_cases(path: Path = CASES) -> list[dict[str, Any]]:
    cases: list[dict[str, Any]] = json.loads(path.read_text(encoding="utf-8"))["cases"]
    return cases


def _find(app: Any, session: str, query: str, anchor: str) -> str:
    result = app.lookup(query, session_id=session)
    for block in result["evidenceBlocks"]:
        if anchor in block["content"]:
            return str(block["document_id"])
    shown = [b["document_id"] for b in result["evidenceBlocks"]]
    raise LookupError(f"no returned block contains {anchor!r} for {query!r}: {shown}")


def run_case(app: Any, case: dict[str, Any], session_prefix: str = "label") -> CaseResult:
    session = f"{session_prefix}-{case['id']}-{uuid.uuid4().hex[:8]}"
    cited = _find(app, session, case["query"], case["anchor"])
    if "cite_query" in case:
        cited = _find(app, session, case["cite_query"], case["cite_anchor"])
    if "cite_literal" in case:
        cited = case["cite_literal"]
    answer = case["answer"].replace("{cite}", f"[{cited}]")
    t0 = time.perf_counter()
    check = app.check_answer(session, answer)
    check_ms = (time.perf_counter() - t0) * 1000.0
    t0 = time.perf_counter()
    app.verify_citations(session, [cited])
    verify_ms = (time.perf_counter() - t0) * 1000.0
    t0 = time.perf_counter()
    app.check_answer(session, answer, persist=False)
    unrecorded_ms = (time.perf_counter() - t0) * 1000.0
    if len(check.claims) != 1:
        raise AssertionError(f"case {case['id']}: {len(check.claims)} claims in {answer!r}")
    (claim,) = check.claims
    return CaseResult(
        id=case["id"],
        kind=case["kind"],
        expect=case["expect"],
        got=claim.verdict.value,
        reasons=claim.reasons,
        check_id=check.id,
        session_id=session,
        check_ms=check_ms,
        verify_ms=verify_ms,
        unrecorded_ms=unrecorded_ms,
    )


def precision_recall(results: list[CaseResult], verdict: str) -> tuple[float, float, int, int]:
    """(precision, recall, predicted, labelled) of one verdict."""
    predicted = [r for r in results if r.got == verdict]
    labelled = [r for r in results if r.expect == verdict]
    hits = sum(1 for r in predicted if r.expect == verdict)
    precision = hits / len(predicted) if predicted else 1.0
    recall = hits / len(labelled) if labelled else 1.0
    return precision, recall, len(predicted), len(labelled)


def build_app(data_dir: Path) -> Any:
    from lookup_knowledge import create_app
    from lookup_knowledge.sample_corpus import corpus_path

    app = create_app(overrides={"data-dir": str(data_dir)})
    corpus = corpus_path()
    app.ingest([corpus], root=corpus)
    return app


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", help="reuse this data directory (default: a temp dir)")
    args = parser.parse_args()
    cases = load_cases()
    with tempfile.TemporaryDirectory(prefix="lk-answer-check-") as tmp:
        t0 = time.perf_counter()
        app = build_app(Path(args.data_dir) if args.data_dir else Path(tmp) / "data")
        setup_s = time.perf_counter() - t0
        try:
            for case in cases[:3]:  # warm-up: caches, first connections
                run_case(app, case, "warmup")
            results = [run_case(app, case) for case in cases]
        finally:
            app.close()
    print(f"{len(results)} labelled claims; ingest + start {setup_s:.1f} s")
    print(f"labels: {dict(Counter(r.expect for r in results))}")
    print()
    print(f"{'verdict':<18}{'precision':>10}{'recall':>8}{'predicted':>11}{'labelled':>10}")
    for verdict in VERDICTS:
        p, r, n_pred, n_lab = precision_recall(results, verdict)
        print(f"{verdict:<18}{p:>10.3f}{r:>8.3f}{n_pred:>11}{n_lab:>10}")
    flagged = [r for r in results if r.got != "supported"]
    positive = [r for r in results if r.expect != "supported"]
    hits = sum(1 for r in flagged if r.expect != "supported")
    print(
        f"{'not supported':<18}{hits / len(flagged) if flagged else 1.0:>10.3f}"
        f"{hits / len(positive) if positive else 1.0:>8.3f}{len(flagged):>11}{len(positive):>10}"
    )
    print()
    print("confusion (label -> verdict):")
    confusion = Counter((r.expect, r.got) for r in results)
    for (expect, got), n in sorted(confusion.items()):
        print(f"  {expect:<18} -> {got:<18} {n}")
    wrong = [r for r in results if r.got != r.expect]
    if wrong:
        print("\nmisses:")
        for r in wrong:
            print(f"  {r.id} ({r.kind}): expected {r.expect}, got {r.got}; {'; '.join(r.reasons)}")
    by_kind: dict[str, list[CaseResult]] = {}
    for r in results:
        by_kind.setdefault(r.kind, []).append(r)
    print("\naccuracy by kind:")
    for kind, items in sorted(by_kind.items()):
        right = sum(1 for r in items if r.got == r.expect)
        print(f"  {kind:<22} {right}/{len(items)}")

    def p95(values: list[float]) -> float:
        ordered = sorted(values)
        return ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)]

    check = [r.check_ms for r in results]
    unrecorded = [r.unrecorded_ms for r in results]
    verify = [r.verify_ms for r in results]
    print("\nlatency per claim (one-claim answers; SQLite; no embedder):")
    for name, values in (
        ("check_answer (read evidence, check, record)", check),
        ("check_answer(persist=False)", unrecorded),
        ("baseline: verify_citations of the same id", verify),
    ):
        print(
            f"  {name:<46} median {statistics.median(values):6.2f} ms   p95 {p95(values):6.2f} ms"
        )
    print(
        f"  ratio check_answer / verify_citations (medians): "
        f"{statistics.median(check) / statistics.median(verify):.1f}x"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
