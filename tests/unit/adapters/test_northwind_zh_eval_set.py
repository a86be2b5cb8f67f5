"""The bilingual judged set over the sample corpus (benchmarks/datasets/northwind-zh) is
complete, graded, loadable by the eval, and its corpus is the sample corpus as shipped."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from lookup_knowledge.adapters.evaluation.beir import load_beir

DATASET = Path(__file__).resolve().parents[3] / "benchmarks" / "datasets" / "northwind-zh"


def test_the_shipped_corpus_is_the_sample_corpus() -> None:
    spec = importlib.util.spec_from_file_location("build_corpus", DATASET / "build_corpus.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    shipped = (DATASET / "corpus.jsonl").read_text(encoding="utf-8").splitlines()
    assert shipped == module.corpus_lines(), "run benchmarks/datasets/northwind-zh/build_corpus.py"


def test_at_least_40_chinese_and_mixed_queries_with_graded_judgements() -> None:
    beir = load_beir(DATASET, split="test")
    queries = beir.dataset.queries
    assert len(queries) >= 40
    corpus = {json.loads(line)["_id"] for line in (DATASET / "corpus.jsonl").open()}
    for query in queries:
        assert any("\u4e00" <= ch <= "\u9fff" for ch in query.text), query.text
        grades = beir.dataset.qrels[query.query_id]
        assert set(grades) <= corpus
        assert 2 in grades.values()  # one document answers it
        assert set(grades.values()) <= {1, 2}
    mixed = [q for q in queries if any(ch.isascii() and ch.isalpha() for ch in q.text)]
    assert len(mixed) >= 20
