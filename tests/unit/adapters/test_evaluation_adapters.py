"""Eval adapters without a search engine: the BEIR loader, named configurations, the
ir-measures metrics adapter and the report writers."""

from __future__ import annotations

import gzip
import json
import math
from datetime import UTC, datetime
from pathlib import Path

import pytest
from rich.console import Console

from lookup_knowledge.adapters.evaluation.beir import (
    BeirCorpusSource,
    eval_collection_name,
    load_beir,
    qrels_path,
    read_qrels,
)
from lookup_knowledge.adapters.evaluation.configurations import (
    as_set_options,
    configuration_overrides,
    depth_overrides,
    expand,
    parse_set_options,
)
from lookup_knowledge.adapters.evaluation.metrics import IrMeasuresMetrics
from lookup_knowledge.adapters.evaluation.reports import (
    chart_png,
    eval_rows,
    eval_table,
    write_html,
    write_json,
)
from lookup_knowledge.application.evaluation import (
    MEASURES,
    ConfigurationResult,
    EvalReport,
    QueryResult,
)
from lookup_knowledge.application.ports import DocumentLoadFailure, SourceDocument
from lookup_knowledge.domain.errors import InvalidInputError

# --------------------------------------------------------------------------- BEIR


def write_dataset(root: Path, *, gz: bool = False, header: bool = True) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    corpus = [
        {"_id": "d1", "title": "One", "text": "first text"},
        {"_id": "d2", "title": "Two", "text": "second text"},
        {"_id": 3, "title": "Three", "text": "numeric id"},
        {"_id": "d4", "title": "Four", "text": ""},
    ]
    lines = "\n".join(json.dumps(d) for d in corpus) + "\nnot json\n\n" + '{"title": "no id"}\n'
    if gz:
        with gzip.open(root / "corpus.jsonl.gz", "wt", encoding="utf-8") as handle:
            handle.write(lines)
    else:
        (root / "corpus.jsonl").write_text(lines, encoding="utf-8")
    queries = [
        {"_id": "q1", "text": "first?"},
        {"_id": "q2", "text": "second?"},
        {"_id": "q3", "text": "only judged not relevant"},
        {"_id": "q4", "text": "no qrels at all"},
    ]
    (root / "queries.jsonl").write_text(
        "\n".join(json.dumps(q) for q in queries) + "\n", encoding="utf-8"
    )
    (root / "qrels").mkdir(exist_ok=True)
    rows = "q1\td1\t1\nq2\td2\t2\nq2\t3\t1\nq3\td1\t0\nq9\td1\t1\n"
    (root / "qrels" / "train.tsv").write_text(
        ("query-id\tcorpus-id\tscore\n" if header else "") + rows, encoding="utf-8"
    )
    return root


def test_loader_keeps_judged_queries_in_file_order(tmp_path: Path) -> None:
    loaded = load_beir(write_dataset(tmp_path / "tiny"))
    assert [q.query_id for q in loaded.dataset.queries] == ["q1", "q2"]
    assert loaded.dataset.qrels == {"q1": {"d1": 1}, "q2": {"d2": 2, "3": 1}}
    assert loaded.judged_without_text == ("q9",)
    assert loaded.name == "tiny"
    assert loaded.restricted_to is None
    assert eval_collection_name(loaded, "onnx-minilm") == "eval_tiny_onnx_minilm"


@pytest.mark.parametrize(("gz", "header"), [(False, True), (True, False)])
def test_corpus_streams_documents_and_reports_bad_lines(
    tmp_path: Path, gz: bool, header: bool
) -> None:
    loaded = load_beir(write_dataset(tmp_path / "d", gz=gz, header=header), split="train")
    items = list(loaded.dataset.corpus.documents())
    docs = [i for i in items if isinstance(i, SourceDocument)]
    failures = [i for i in items if isinstance(i, DocumentLoadFailure)]
    assert [d.doc_id for d in docs] == ["d1", "d2", "3", "d4"]
    assert docs[0].title == "One"
    assert docs[0].text == "first text"
    assert docs[0].format == "text"
    assert docs[0].source == "d/d1"
    assert [f.reason for f in failures] == [
        "not JSON (Expecting value)",
        "the corpus entry has no _id",
    ]
    assert loaded.dataset.corpus.estimated_count() == 4


def test_limit_and_corpus_sample(tmp_path: Path) -> None:
    root = write_dataset(tmp_path / "d")
    loaded = load_beir(root, limit_queries=1, corpus_sample=1)
    assert [q.query_id for q in loaded.dataset.queries] == ["q1"]
    assert loaded.restricted_to is not None
    assert "d1" in loaded.restricted_to  # judged for q1
    assert len(loaded.restricted_to) == 2  # plus one other
    source = loaded.dataset.corpus
    assert isinstance(source, BeirCorpusSource)
    ids = [d.doc_id for d in source.documents() if isinstance(d, SourceDocument)]
    assert sorted(ids) == sorted(loaded.restricted_to)
    assert eval_collection_name(loaded, "hashing").startswith("eval_d_hashing_")
    assert load_beir(root, limit_queries=1, corpus_sample=1).fingerprint() == loaded.fingerprint()


def test_qrels_formats_and_errors(tmp_path: Path) -> None:
    trec = tmp_path / "run.qrels"
    trec.write_text("q1 0 d1 3\nq1 0 d2 0\n", encoding="utf-8")
    assert read_qrels(trec) == {"q1": {"d1": 3, "d2": 0}}
    bad = tmp_path / "bad.tsv"
    bad.write_text("q1\td1\t1\nq2\td2\tyes\n", encoding="utf-8")
    with pytest.raises(InvalidInputError, match=r"bad\.tsv:2"):
        read_qrels(bad)
    columns = tmp_path / "cols.tsv"
    columns.write_text("q1 d1\n", encoding="utf-8")
    with pytest.raises(InvalidInputError, match="columns"):
        read_qrels(columns)


def test_split_choice(tmp_path: Path) -> None:
    root = write_dataset(tmp_path / "d")
    (root / "qrels" / "dev.tsv").write_text("q1\td1\t1\n", encoding="utf-8")
    with pytest.raises(InvalidInputError, match="choose a split: dev, train"):
        qrels_path(root)
    assert qrels_path(root, "dev").name == "dev.tsv"
    with pytest.raises(InvalidInputError, match="no qrels for split 'test'"):
        qrels_path(root, "test")
    assert [q.query_id for q in load_beir(root, split="dev").dataset.queries] == ["q1"]
    assert load_beir(root, qrels_file=root / "qrels" / "dev.tsv").qrels_path.name == "dev.tsv"
    with pytest.raises(InvalidInputError, match="dataset folder not found"):
        load_beir(tmp_path / "missing")


# --------------------------------------------------------------------------- configurations


def test_configuration_names_expand_to_settings_overrides() -> None:
    assert expand([], []) == ["dense", "sparse", "hybrid"]
    assert expand(["hybrid+cap-1"], ["caps,rerank"]) == [
        "cap-1",
        "cap-2",
        "cap-off",
        "rerank-on",
        "rerank-off",
        "hybrid+cap-1",
    ]
    assert configuration_overrides("hybrid+cap-1+rerank-off") == {
        "rag.search-mode": "hybrid",
        "rag.max-chunks-per-document": 1,
        "rag.rerank.enabled": False,
    }
    assert configuration_overrides("cap-off") == {"rag.max-chunks-per-document": 0}
    with pytest.raises(InvalidInputError, match="unknown configuration 'fast'"):
        expand(["dense+fast"], [])
    with pytest.raises(InvalidInputError, match="unknown preset"):
        expand([], ["modes,nope"])


def test_depth_and_set_options() -> None:
    depth = depth_overrides(20, 50)
    assert depth["rag.return-n"] == 20
    assert depth["rag.projection.max-blocks"] == 20
    with pytest.raises(InvalidInputError):
        depth_overrides(20, 10)
    parsed = parse_set_options(["rag.max-chunks-per-document=1", "rag.rerank.enabled = false"])
    assert parsed == {"rag.max-chunks-per-document": "1", "rag.rerank.enabled": "false"}
    assert as_set_options({"rag.engine-grouping": True, "rag.return-n": 20}) == [
        "rag.engine-grouping=true",
        "rag.return-n=20",
    ]
    with pytest.raises(InvalidInputError, match="key=value"):
        parse_set_options(["no-equals-sign"])


# --------------------------------------------------------------------------- metrics


def test_ir_measures_adapter_graded_ndcg_and_zero_fill() -> None:
    qrels = {"q1": {"d1": 2, "d2": 1}, "q2": {"d3": 1}, "q3": {"d9": 1}}
    run = {"q1": {"d1": 1.0, "d5": 0.5, "d2": 1 / 3}, "q2": {"d4": 1.0}, "extra": {"d1": 1.0}}
    scores = IrMeasuresMetrics().evaluate(qrels, run, MEASURES)
    assert set(scores) == {"q1", "q2", "q3"}
    dcg = 2 / math.log2(2) + 1 / math.log2(4)
    ideal = 2 / math.log2(2) + 1 / math.log2(3)
    assert scores["q1"]["nDCG@10"] == pytest.approx(dcg / ideal)
    assert scores["q1"]["RR@10"] == 1.0
    assert scores["q1"]["R@5"] == 1.0
    assert scores["q2"] == dict.fromkeys(MEASURES, 0.0)
    assert scores["q3"] == dict.fromkeys(MEASURES, 0.0)


def test_ir_measures_adapter_recall_cutoffs_and_rr() -> None:
    qrels = {"q": {f"r{i}": 1 for i in range(4)}}
    ranking = [
        "x1",
        "r0",
        *[f"x{i}" for i in range(2, 9)],
        "r1",
        *[f"y{i}" for i in range(9)],
        "r2",
    ]
    run = {"q": {doc: 1.0 / pos for pos, doc in enumerate(ranking, 1)}}
    scores = IrMeasuresMetrics().evaluate(qrels, run, ["R@5", "R@10", "R@20", "RR@10"])["q"]
    assert scores == {"R@5": 0.25, "R@10": 0.5, "R@20": 0.75, "RR@10": 0.5}


def test_ir_measures_adapter_rejects_unknown_measures() -> None:
    with pytest.raises(InvalidInputError, match="unknown measure"):
        IrMeasuresMetrics().evaluate({"q": {"d": 1}}, {"q": {"d": 1.0}}, ["bogus@3"])
    assert IrMeasuresMetrics().evaluate({"q": {"d": 1}}, {}, ["nDCG@10"]) == {"q": {"nDCG@10": 0.0}}


# --------------------------------------------------------------------------- reports


def make_report(return_n: int | None = None) -> EvalReport:
    def config(name: str, ndcg: float, cap: int | None) -> ConfigurationResult:
        return ConfigurationResult(
            name=name,
            session_id=f"eval-r-{name}",
            changes={"rag.max-chunks-per-document": cap or 0},
            settings={
                "mode": "dense",
                "maxChunksPerDocument": cap,
                "engineGrouping": False,
                "rerank": True,
                **({"returnN": return_n} if return_n is not None else {}),
            },
            queries=2,
            metrics=dict.fromkeys(MEASURES, ndcg),
            distinct_documents=3.5,
            blocks=5.0,
            no_evidence_rate=0.5 if cap is None else 0.0,
            error_rate=0.0,
            latency_p50_ms=10.0,
            latency_p95_ms=20.0,
            first_error=None,
            per_query=(
                QueryResult("q1", "id1", "ok", 10.0, ("d1",), 1, dict.fromkeys(MEASURES, ndcg)),
            ),
        )

    at = datetime(2026, 11, 30, tzinfo=UTC)
    return EvalReport(
        run_id="r",
        dataset="tiny",
        started_at=at,
        finished_at=at,
        measures=MEASURES,
        ingest=None,
        configurations=(config("cap-1", 0.5, 1), config("cap-off", 0.75, None)),
    )


def test_table_rows_show_every_configuration() -> None:
    header, rows = eval_rows(make_report())
    assert header[5:10] == ["nDCG@10", "R@5", "R@10", "R@20", "MRR@10"]
    assert [r[0] for r in rows] == ["cap-1", "cap-off"]
    assert rows[0][2] == "1"
    assert rows[1][2] == "off"
    assert rows[1][5] == "0.7500"
    assert rows[1][11] == "50.0%"
    console = Console(width=200, record=True)
    console.print(eval_table(make_report()))
    text = console.export_text()
    assert "cap-off" in text
    assert "0.7500" in text


def test_recall_deeper_than_return_n_gets_no_column() -> None:
    # With 5 blocks returned, R@10 and R@20 can only repeat R@5: not printed.
    header, rows = eval_rows(make_report(return_n=5))
    assert header[5:8] == ["nDCG@10", "R@5", "MRR@10"]
    assert all(len(row) == len(header) for row in rows)
    header, rows = eval_rows(make_report(return_n=10))
    assert header[5:9] == ["nDCG@10", "R@5", "R@10", "MRR@10"]
    console = Console(width=200, record=True)
    console.print(eval_table(make_report(return_n=5)))
    assert "R@20" not in console.export_text()


def test_json_png_and_html_are_written(tmp_path: Path) -> None:
    report = make_report()
    path = write_json(report.as_dict(), tmp_path / "out" / "r.json")
    assert json.loads(path.read_text())["configurations"][1]["name"] == "cap-off"
    png = chart_png(report)
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    page = write_html(report, tmp_path / "out" / "r.html", png).read_text()
    assert "data:image/png;base64," in page
    assert "<td>cap-off</td>" in page
    assert "http" not in page.replace("http-equiv", "")  # self-contained: nothing fetched


def test_title_in_text_is_a_separate_collection(tmp_path: Path) -> None:
    root = write_dataset(tmp_path / "d")
    loaded = load_beir(root, title_in_text=True)
    docs = [d for d in loaded.dataset.corpus.documents() if isinstance(d, SourceDocument)]
    assert docs[0].text == "One first text"
    assert docs[0].title == "One"
    assert docs[3].text == "Four"  # an entry without text is its title
    assert eval_collection_name(loaded, "none") == "eval_d_none_titled"
