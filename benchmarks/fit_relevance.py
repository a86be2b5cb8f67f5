"""Fit the relevance model of ``domain.relevance`` (one logistic per search mode) and the
``found`` thresholds from the judged hits of the train/dev splits.

What it does, the procedure benchmarks/README.md ("Calibrated relevance") describes:

1. Opens the eval collections ``lookup-knowledge eval run`` built (SciFact train and
   Cranfield dev, ``--skip-ingest``-ready) through the product's own search port, so
   each hit carries exactly the evidence a lookup reads: the cosine and the BM25 score
   of every list (a hybrid hit outside one list's top completed by the engine), the
   collection's dense background and the query's BM25 reference.
2. Runs every question of each collection in each mode to ``--depth`` hits: its own
   judged questions (a hit is relevant when the qrels judge its document > 0), and as
   unanswerable questions (every hit irrelevant) the other collection's judged
   questions and the off-topic ones.
3. Per mode, maximum likelihood of "judged relevant" on ``z`` (cosine in background
   standard deviations) and ``r`` (BM25 over the query's reference), both collections
   pooled, non-negative weights; the threshold is the 3rd percentile of the best
   relevance of the pooled answerable questions, rounded down to two decimals.
4. Prints the weights, the thresholds, what they give on each collection (found on the
   answerable questions, abstained on the unanswerable ones) beside what the model in
   force gives on the same hits, and writes the hits to ``--hits`` (JSON lines) so a
   re-fit need not search again (``--from-hits``).

    .venv/bin/python benchmarks/fit_relevance.py            # after the two eval ingests
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from lookup_knowledge.adapters.config import load_settings
from lookup_knowledge.adapters.container import Container
from lookup_knowledge.adapters.evaluation.beir import (
    eval_collection_name,
    load_beir,
    load_unanswerable,
)
from lookup_knowledge.application.ports import KnowledgeSearchRequest
from lookup_knowledge.domain.model import SearchMode
from lookup_knowledge.domain.relevance import (
    DEFAULT_MODEL,
    FALLBACK_BACKGROUND,
    EvidenceWeights,
    ScoreKind,
    bm25_evidence,
    cosine_evidence,
    relevance_from_evidence,
)

ROOT = Path(__file__).resolve().parents[1]
DATASETS = ROOT.parent / "shared" / "datasets"
RESULTS = ROOT / "benchmarks" / "results"
OFF_TOPIC = ROOT / "benchmarks" / "datasets" / "off-topic" / "queries.jsonl"
MODES = (SearchMode.DENSE, SearchMode.SPARSE, SearchMode.HYBRID)
PERCENTILE = 3.0


@dataclass(frozen=True)
class Collection:
    name: str
    folder: Path
    split: str | None
    data_dir: Path


def collections(results: Path) -> tuple[Collection, ...]:
    """The two eval collections where the README's ``eval run`` commands build them."""
    return (
        Collection("scifact", DATASETS / "scifact", "train", results / "eval-data"),
        Collection("cranfield", DATASETS / "cranfield", None, results / "eval-cranfield"),
    )


COLLECTIONS = collections(RESULTS)


@dataclass(frozen=True)
class Hit:
    collection: str
    mode: str
    query: str
    answerable: bool
    z: float | None
    r: float | None
    relevant: bool


def _evidence(hit: object) -> tuple[float | None, float | None]:
    z: float | None = None
    r: float | None = None
    calibration = hit.calibration  # type: ignore[attr-defined]
    per_list = hit.component_scores or ((hit.score_kind, hit.score),)  # type: ignore[attr-defined]
    for kind, score in per_list:
        if kind is ScoreKind.BM25:
            if calibration is None or calibration.bm25_reference is None:
                raise SystemExit("a BM25 hit without a reference: not the Lite full-text index")
            r = bm25_evidence(score, calibration.bm25_reference)
        else:
            background = (calibration and calibration.dense_background) or FALLBACK_BACKGROUND
            z = cosine_evidence(score, background)
    return z, r


def search_hits(
    depth: int,
    embedder: str,
    results: Path,
    limit: int | None = None,
    only: Sequence[str] = (),
) -> list[Hit]:
    chosen = collections(results)
    hits: list[Hit] = []
    for collection in chosen:
        if only and collection.name not in only:
            continue
        beir = load_beir(collection.folder, split=collection.split)
        others = [c.folder for c in chosen if c is not collection]
        unanswerable = load_unanswerable([*others, OFF_TOPIC])
        settings = load_settings(
            overrides={
                "data-dir": str(collection.data_dir),
                "embedder.provider": embedder,
                "milvus.collection": eval_collection_name(beir, embedder),
                "audit.enabled": False,
            }
        ).settings
        container = Container(settings=settings)
        try:
            search = container.search()
            model = container.embedder()
            if search.holds_nothing():
                raise SystemExit(
                    f"{collection.name}: no collection in {collection.data_dir}; run "
                    "`lookup-knowledge eval run` on it first (benchmarks/README.md)"
                )
            questions = [(q, True) for q in beir.dataset.queries]
            questions += [(q, False) for q in unanswerable]
            questions = questions[:limit] if limit else questions
            qrels = beir.dataset.qrels
            for n, (question, answerable) in enumerate(questions, 1):
                vector = tuple(model.embed_query(question.text))
                judged = qrels.get(question.query_id, {}) if answerable else {}
                for mode in MODES:
                    request = KnowledgeSearchRequest(
                        query_text=question.text,
                        top_k=depth,
                        mode=mode,
                        query_vector=vector if mode.needs_query_vector else None,
                        embedder=model.identity,
                        include_content=False,
                    )
                    for hit in search.search(request):
                        z, r = _evidence(hit)
                        doc = str(hit.metadata.get("doc_id"))
                        hits.append(
                            Hit(
                                collection.name,
                                mode.value,
                                f"{collection.name}:{int(answerable)}:{question.query_id}",
                                answerable,
                                z,
                                r,
                                judged.get(doc, 0) > 0,
                            )
                        )
                if n % 200 == 0:
                    print(f"  {collection.name}: {n}/{len(questions)} questions", file=sys.stderr)
        finally:
            container.shutdown_resources()
    return hits


def features(hits: Sequence[Hit], mode: str) -> np.ndarray:
    """Columns z, r, 1 as ``relevance_from_evidence`` reads them (absent z as the
    background mean, absent r as none)."""
    rows = [
        (0.0 if h.z is None else h.z, 0.0 if h.r is None else h.r, 1.0)
        for h in hits
        if h.mode == mode
    ]
    return np.asarray(rows, dtype=np.float64).reshape(-1, 3)


def fit(x: np.ndarray, y: np.ndarray, free: Sequence[int]) -> np.ndarray:
    """Maximum likelihood logistic weights (Newton's method) over the columns ``free``
    (the others fixed at 0); a column whose weight comes out negative is fixed at 0 and
    the rest fitted again (relevance must never fall as evidence grows)."""
    free = list(free)
    while True:
        w = np.zeros(x.shape[1])
        cols = x[:, free]
        beta = np.zeros(len(free))
        for _ in range(100):
            p = 1.0 / (1.0 + np.exp(-(cols @ beta)))
            gradient = cols.T @ (y - p)
            hessian = (cols * (p * (1 - p))[:, None]).T @ cols + 1e-9 * np.eye(len(free))
            step = np.linalg.solve(hessian, gradient)
            beta += step
            if np.max(np.abs(step)) < 1e-10:
                break
        w[free] = beta
        negative = [c for c in free if c != 2 and w[c] < 0]
        if not negative:
            return w
        free = [c for c in free if c not in negative]


def weights_of(w: np.ndarray) -> EvidenceWeights:
    return EvidenceWeights(
        dense=round(float(w[0]), 2), sparse=round(float(w[1]), 2), bias=round(float(w[2]), 2)
    )


def best_by_query(
    hits: Iterable[Hit], weights: EvidenceWeights
) -> dict[str, tuple[bool, str, float]]:
    best: dict[str, tuple[bool, str, float]] = {}
    for h in hits:
        value = relevance_from_evidence(h.z, h.r, weights)
        seen = best.get(h.query)
        if seen is None or value > seen[2]:
            best[h.query] = (h.answerable, h.collection, value)
    return best


def threshold(best: dict[str, tuple[bool, str, float]]) -> float:
    values = sorted(v for answerable, _c, v in best.values() if answerable)
    at = float(np.percentile(values, PERCENTILE))
    return math.floor(at * 100) / 100


def rates(
    best: dict[str, tuple[bool, str, float]], cut: float, collection: str
) -> tuple[float, float]:
    own = [(a, v) for a, c, v in best.values() if c == collection]
    answerable = [v for a, v in own if a]
    unanswerable = [v for a, v in own if not a]
    found = sum(v >= cut for v in answerable) / max(len(answerable), 1)
    abstained = sum(v < cut for v in unanswerable) / max(len(unanswerable), 1)
    return found, abstained


def calibration_table(hits: Sequence[Hit], weights: EvidenceWeights) -> list[str]:
    bins: dict[int, list[bool]] = {}
    for h in hits:
        value = relevance_from_evidence(h.z, h.r, weights)
        bins.setdefault(min(int(value * 10), 9), []).append(h.relevant)
    return [
        f"{b / 10:.1f}-{(b + 1) / 10:.1f}: {len(v)}: {sum(v) / len(v):.2f}"
        for b, v in sorted(bins.items())
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--depth", type=int, default=50, help="hits per question and mode")
    parser.add_argument("--embedder", default="onnx-minilm")
    parser.add_argument("--hits", type=Path, default=RESULTS / "relevance-hits.jsonl")
    parser.add_argument("--from-hits", action="store_true", help="re-fit the saved hits")
    parser.add_argument(
        "--results", type=Path, default=RESULTS, help="where the eval data dirs are"
    )
    parser.add_argument("--limit", type=int, default=None, help="questions per collection (smoke)")
    parser.add_argument("--only", action="append", default=[], help="search this collection only")
    args = parser.parse_args()
    if args.from_hits:
        hits = [Hit(**json.loads(line)) for line in args.hits.read_text().splitlines()]
    else:
        hits = search_hits(args.depth, args.embedder, args.results, args.limit, args.only)
        args.hits.parent.mkdir(parents=True, exist_ok=True)
        args.hits.write_text("".join(json.dumps(h.__dict__) + "\n" for h in hits))
    in_force = {
        "dense": DEFAULT_MODEL.dense,
        "sparse": DEFAULT_MODEL.sparse,
        "hybrid": DEFAULT_MODEL.hybrid,
    }
    free = {"dense": (0, 2), "sparse": (1, 2), "hybrid": (0, 1, 2)}
    questions = len({h.query for h in hits})
    print(f"{len(hits)} hits of {questions} questions, depth {args.depth}")
    for mode in ("dense", "sparse", "hybrid"):
        own = [h for h in hits if h.mode == mode]
        x = features(own, mode)
        y = np.asarray([h.relevant for h in own], dtype=np.float64)
        fitted = weights_of(fit(x, y, free[mode]))
        print(f"\n{mode}: {len(own)} hits, {int(y.sum())} judged relevant")
        for label, weights in (("in force", in_force[mode]), ("fitted", fitted)):
            best = best_by_query(own, weights)
            cut = threshold(best)
            line = ", ".join(
                f"{c.name} found {rates(best, cut, c.name)[0]:.3f} abstained {rates(best, cut, c.name)[1]:.3f}"
                for c in COLLECTIONS
            )
            print(
                f"  {label:8} dense {weights.dense:.2f} sparse {weights.sparse:.2f} "
                f"bias {weights.bias:.2f}; threshold {cut:.2f}: {line}"
            )
            print("    calibration: " + "; ".join(calibration_table(own, weights)))


if __name__ == "__main__":
    main()
