"""The answer checker on hand-written claims over SciFact train abstracts: caught / false
alarms per kind, "not supported" precision and recall, dev vs held-back cases, latency.

    .venv/bin/python -m benchmarks.answer_check_scifact            # Milvus Lite + SQLite
    .venv/bin/python -m benchmarks.answer_check_scifact --split held --misses

The abstracts named by ``benchmarks/data/answer_check_scifact.json`` are read from the
shared SciFact copy (``../shared/datasets/scifact``, or ``--scifact DIR``; not stored in
the repository), written as ``scifact/<id>.md`` (title, then text) into a temporary corpus
and ingested with the default embedder. Each case then runs like
``answer_check_set.py``'s: its abstract is looked up by the sentence holding the anchor in a session of its own, the
returned block containing the anchor is cited, and ``app.check_answer`` records the verdict.

"Not supported" is any verdict but ``supported``; a kind is caught when the verdict is
not ``supported`` (``uncited`` and ``invalid_citation`` must be exactly that).
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from benchmarks.answer_check_set import CaseResult, run_case

ROOT = Path(__file__).resolve().parents[1]
CASES = ROOT / "benchmarks" / "data" / "answer_check_scifact.json"
SCIFACT = ROOT.parent / "shared" / "datasets" / "scifact"
EXACT = {"uncited", "invalid_citation"}


def load_set(path: Path = CASES) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def abstracts(folder: Path, ids: set[str]) -> dict[str, dict[str, str]]:
    found: dict[str, dict[str, str]] = {}
    with gzip.open(folder / "corpus.jsonl.gz", "rt", encoding="utf-8") as lines:
        for line in lines:
            doc = json.loads(line)
            if doc["_id"] in ids:
                found[doc["_id"]] = {"title": doc["title"], "text": doc["text"]}
    missing = ids - set(found)
    if missing:
        raise SystemExit(f"abstracts not in {folder}: {sorted(missing)}")
    return found


def write_corpus(folder: Path, docs: dict[str, dict[str, str]]) -> Path:
    root = folder / "corpus"
    (root / "scifact").mkdir(parents=True, exist_ok=True)
    for doc_id, doc in docs.items():
        text = f"# {doc['title'].strip()}\n\n{doc['text'].strip()}\n"
        (root / "scifact" / f"{doc_id}.md").write_text(text, encoding="utf-8")
    return root


def as_lookup_case(case: dict[str, Any], docs: dict[str, dict[str, str]]) -> dict[str, Any]:
    """The case in ``answer_check_set.run_case``'s terms: a query is the sentence of the
    abstract holding the anchor (an abstract may span several blocks)."""
    out = dict(case)
    out["query"] = _sentence_with(docs[case["doc"]]["text"], case["anchor"])
    if "cite_doc" in case:
        out["cite_query"] = _sentence_with(docs[case["cite_doc"]]["text"], case["cite_anchor"])
    return out


def _sentence_with(text: str, anchor: str) -> str:
    at = text.index(anchor)
    start = text.rfind(". ", 0, at) + 2 if text.rfind(". ", 0, at) >= 0 else 0
    end = text.find(". ", at)
    return text[start : end if end >= 0 else len(text)]


def build_app(data_dir: Path, corpus: Path) -> Any:
    from lookup_knowledge import create_app

    app = create_app(overrides={"data-dir": str(data_dir)})
    app.ingest([corpus], root=corpus)
    return app


def caught(r: CaseResult) -> bool:
    if r.expect in EXACT:
        return r.got == r.expect
    if r.expect == "supported":
        return r.got == "supported"
    return r.got != "supported"


def report(results: list[CaseResult], title: str) -> None:
    positive = [r for r in results if r.expect != "supported"]
    flagged = [r for r in results if r.got != "supported"]
    hits = sum(1 for r in flagged if r.expect != "supported")
    precision = hits / len(flagged) if flagged else 1.0
    recall = hits / len(positive) if positive else 1.0
    supported = [r for r in results if r.expect == "supported"]
    alarms = sum(1 for r in supported if r.got != "supported")
    print(f"\n{title}: {len(results)} claims")
    print(
        f'  "not supported": precision {precision:.3f}  recall {recall:.3f}  '
        f"({hits}/{len(positive)} caught, {len(flagged)} flagged)"
    )
    if supported:
        print(
            f"  false alarms on supported claims: {alarms}/{len(supported)} "
            f"({alarms / len(supported):.1%})"
        )
    print(f"  {'kind':<22}{'right':>7}{'of':>5}   verdicts")
    by_kind: dict[str, list[CaseResult]] = {}
    for r in results:
        by_kind.setdefault(r.kind, []).append(r)
    for kind, items in sorted(by_kind.items()):
        right = sum(1 for r in items if caught(r))
        got = dict(Counter(r.got for r in items))
        print(f"  {kind:<22}{right:>7}{len(items):>5}   {got}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scifact", type=Path, default=SCIFACT, help="BEIR SciFact folder")
    parser.add_argument("--split", choices=("dev", "held", "all"), default="all")
    parser.add_argument("--data-dir", help="reuse this data directory (default: a temp dir)")
    parser.add_argument("--misses", action="store_true", help="print every wrong verdict")
    args = parser.parse_args()
    labelled = load_set()
    cases = [c for c in labelled["cases"] if args.split in ("all", c["split"])]
    docs = abstracts(args.scifact, set(labelled["documents"]))
    with tempfile.TemporaryDirectory(prefix="lk-scifact-check-") as tmp:
        corpus = write_corpus(Path(tmp), docs)
        data_dir = Path(args.data_dir) if args.data_dir else Path(tmp) / "data"
        t0 = time.perf_counter()
        app = build_app(data_dir, corpus)
        setup_s = time.perf_counter() - t0
        try:
            for case in cases[:3]:  # warm-up
                run_case(app, as_lookup_case(case, docs), "warmup")
            results = []
            for c in cases:
                try:
                    results.append(run_case(app, as_lookup_case(c, docs), "scifact"))
                except LookupError as error:  # the lookup did not return the anchor's block
                    print(f"skipped {c['id']}: {error}", file=sys.stderr)
        finally:
            app.close()
    split = {c["id"]: c["split"] for c in cases}
    print(f"{len(results)} labelled claims over {len(docs)} abstracts; ingest {setup_s:.1f} s")
    report(results, "all")
    for name in ("dev", "held"):
        part = [r for r in results if split[r.id] == name]
        if part and args.split == "all":
            report(part, name)
    if args.misses:
        print("\nmisses:")
        for r in results:
            if not caught(r):
                print(f"  {r.id} [{split[r.id]}] ({r.kind}) expected {r.expect}, got {r.got}")
                print(f"      {'; '.join(r.reasons)}")
    unrecorded = [r.unrecorded_ms for r in results]
    recorded = [r.check_ms for r in results]
    print(
        f"\nper claim (SQLite, in process, no judge): check_answer(persist=False) median "
        f"{statistics.median(unrecorded):.1f} ms; recorded median "
        f"{statistics.median(recorded):.1f} ms"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
