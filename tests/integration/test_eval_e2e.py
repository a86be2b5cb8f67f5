"""The eval command line end to end: a generated BEIR collection through the real pipeline
on Milvus Lite (hashing embedder) with the SQLite audit store, then replay of an eval
session against a changed configuration; and a SciFact subset with the ONNX embedder
when ../shared/datasets is there."""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from lookup_knowledge.adapters.api import create_app
from lookup_knowledge.adapters.cli.eval import eval_app
from lookup_knowledge.application.ports import InvocationFilter

pytestmark = pytest.mark.slow

TOPICS = {
    "volcano": "volcano lava magma eruption crater basalt",
    "glacier": "glacier moraine crevasse snowfield meltwater fjord",
    "orchid": "orchid petal pollinator epiphyte nectar stamen",
    "comet": "comet nucleus perihelion coma orbit tail",
    "violin": "violin bow rosin fingerboard bridge luthier",
    "bread": "bread yeast dough flour oven sourdough",
    "tide": "tide moon ocean neap shoreline current",
    "bee": "bee hive honey queen drone swarm",
    "chess": "chess knight bishop checkmate opening pawn",
    "desert": "desert dune cactus oasis mirage camel",
}
FILLER = ["the", "of", "and", "a", "is", "in", "with", "notes", "about"]
# Chunks of ~300 characters: the long document of each topic gets several chunks.
COMMON = [
    "--embedder",
    "hashing",
    "--set",
    "ingest.chunk-size=300",
    "--set",
    "ingest.chunk-overlap=30",
]
RUN_SETTINGS = ["--set", "rag.min-relevance=0"]


def write_collection(root: Path) -> Path:
    """30 documents (3 per topic, the first ~1,500 characters), 10 judged queries, one
    unjudged query; qrels with a header and graded relevance."""
    rng = random.Random(11)
    root.mkdir(parents=True)
    docs, qrels, queries = [], [], []
    for t, (topic, words) in enumerate(TOPICS.items()):
        vocabulary = words.split()
        for k in range(3):
            length = 240 if k == 0 else 50
            text = " ".join(
                rng.choice(vocabulary) if rng.random() < 0.5 else rng.choice(FILLER)
                for _ in range(length)
            )
            docs.append({"_id": f"{topic}-{k}", "title": f"{topic} {k}", "text": text + "."})
            qrels.append(f"q{t}\t{topic}-{k}\t{2 if k == 0 else 1}\n")
        queries.append({"_id": f"q{t}", "text": " ".join(vocabulary[:3])})
    queries.append({"_id": "unjudged", "text": "anything"})
    (root / "corpus.jsonl").write_text("\n".join(json.dumps(d) for d in docs) + "\n")
    (root / "queries.jsonl").write_text("\n".join(json.dumps(q) for q in queries) + "\n")
    (root / "qrels").mkdir()
    (root / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(qrels))
    return root


def invoke(args: list[str]) -> Any:
    result = CliRunner().invoke(eval_app, args)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    base = tmp_path_factory.mktemp("eval")
    dataset = write_collection(base / "tiny")
    data_dir, out = base / "data", base / "out"
    result = invoke(
        [
            "run",
            str(dataset),
            "--config",
            "sparse+cap-off",
            "--config",
            "sparse+cap-1",
            "--config",
            "dense",
            "--config",
            "hybrid",
            "--data-dir",
            str(data_dir),
            "--out",
            str(out),
            *COMMON,
            *RUN_SETTINGS,
        ]
    )
    assert result.exit_code == 0, result.output
    (report_path,) = out.glob("*.json")
    return {
        "output": result.output,
        "report": json.loads(report_path.read_text()),
        "out": out,
        "data_dir": data_dir,
        "dataset": dataset,
    }


def config(report: dict[str, Any], name: str) -> dict[str, Any]:
    return next(c for c in report["configurations"] if c["name"] == name)


def test_eval_run_scores_every_configuration(evaluated: dict[str, Any]) -> None:
    report = evaluated["report"]
    assert [c["name"] for c in report["configurations"]] == [
        "sparse+cap-off",
        "sparse+cap-1",
        "dense",
        "hybrid",
    ]
    assert report["ingest"]["documentsSeen"] == 30
    assert report["ingest"]["chunksWritten"] > 30  # long entries were split
    assert report["collection"] == "eval_tiny_hashing"
    for c in report["configurations"]:
        assert c["queries"] == 10
        assert c["errorRate"] == 0.0
        assert set(c["metrics"]) == {"nDCG@10", "R@5", "R@10", "R@20", "RR@10"}
        assert all(0.0 <= v <= 1.0 for v in c["metrics"].values())
        assert c["latencyP50Ms"] <= c["latencyP95Ms"]
    # Topic words find their topic's documents.
    sparse = config(report, "sparse+cap-1")
    assert sparse["metrics"]["nDCG@10"] > 0.8
    assert sparse["metrics"]["R@5"] > 0.8


def test_the_cap_shows_in_blocks_and_distinct_documents(evaluated: dict[str, Any]) -> None:
    report = evaluated["report"]
    capped, free = config(report, "sparse+cap-1"), config(report, "sparse+cap-off")
    assert capped["settings"]["maxChunksPerDocument"] == 1
    assert free["settings"]["maxChunksPerDocument"] is None
    assert capped["blocksPerResult"] == capped["distinctDocumentsPerResult"]
    assert free["blocksPerResult"] > free["distinctDocumentsPerResult"]


def test_the_figures_are_read_from_the_audit_store(evaluated: dict[str, Any]) -> None:
    report = evaluated["report"]
    dense = config(report, "dense")
    first = dense["perQuery"][0]
    with create_app(
        overrides={
            "data-dir": str(evaluated["data_dir"]),
            "embedder.provider": "hashing",
            "milvus.collection": report["collection"],
        }
    ) as app:
        page = app.audit.list_invocations(InvocationFilter(session_id=dense["sessionId"]))
        detail = app.audit.get_invocation(first["invocationId"])
    assert [i.step_id for i in page.items] == [q["queryId"] for q in dense["perQuery"]]
    assert detail.summary.step_id == first["queryId"]
    assert detail.summary.duration_ms == pytest.approx(first["durationMs"], abs=1e-3)
    best_first = sorted(detail.evidence, key=lambda e: e.rank)
    assert first["documents"] == list(dict.fromkeys(e.doc_id for e in best_first))


def test_table_chart_and_html_are_written(evaluated: dict[str, Any]) -> None:
    output = evaluated["output"]
    for text in ("nDCG@10", "MRR@10", "sparse+cap-1", "hybrid", "p95 ms"):
        assert text in output
    run_id = evaluated["report"]["runId"]
    png = evaluated["out"] / f"{run_id}.png"
    html = evaluated["out"] / f"{run_id}.html"
    assert png.read_bytes().startswith(b"\x89PNG")
    assert "data:image/png;base64," in html.read_text()


def _replay(evaluated: dict[str, Any], name: str, *extra: str) -> Any:
    report = evaluated["report"]
    session = config(report, name)["sessionId"]
    depth = [f"--set={k}={v}" for k, v in report["depth"].items()]
    return invoke(
        [
            "replay",
            "--session",
            session,
            "--data-dir",
            str(evaluated["data_dir"]),
            "--collection",
            report["collection"],
            *COMMON,
            *RUN_SETTINGS,
            *depth,
            *extra,
        ]
    )


def test_replay_under_the_same_config_passes(evaluated: dict[str, Any], tmp_path: Path) -> None:
    out = tmp_path / "replay.json"
    result = _replay(
        evaluated,
        "sparse+cap-off",
        "--set",
        "rag.search-mode=sparse",
        "--set",
        "rag.max-chunks-per-document=0",
        "--min-overlap",
        "0.9",
        "--out",
        str(out),
    )
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text())
    assert data["queries"] == 10
    assert data["meanJaccard"] >= 0.9
    assert data["lostAll"] == 0
    assert data["passed"] is True


def test_replay_against_a_changed_config_reports_differences_and_gates(
    evaluated: dict[str, Any], tmp_path: Path
) -> None:
    changed = ["--set", "rag.search-mode=sparse", "--set", "rag.max-chunks-per-document=1"]
    out = tmp_path / "replay.json"
    failing = _replay(
        evaluated, "sparse+cap-off", *changed, "--min-overlap", "0.95", "--out", str(out)
    )
    assert failing.exit_code == 1, failing.output
    assert "FAIL" in failing.output
    data = json.loads(out.read_text())
    assert data["meanJaccard"] < 0.95
    assert data["passed"] is False
    changed_query = next(q for q in data["perQuery"] if q["removed"])
    assert len(changed_query["after"]) < len(changed_query["before"])
    assert set(changed_query["after"]) <= set(changed_query["before"])

    passing = _replay(evaluated, "sparse+cap-off", *changed, "--min-overlap", "0.1")
    assert passing.exit_code == 0, passing.output
    assert "PASS" in passing.output

    rbo_gate = _replay(
        evaluated, "sparse+cap-off", *changed, "--min-overlap", "0.99", "--overlap", "rbo"
    )
    assert rbo_gate.exit_code == 1


def test_replay_loses_all_evidence_under_an_impossible_threshold(
    evaluated: dict[str, Any],
) -> None:
    result = _replay(
        evaluated, "dense", "--set", "rag.min-relevance=1", "--max-lost", "0", "--json"
    )
    assert result.exit_code == 1
    data = json.loads(result.stdout)
    assert data["lostAll"] == 10
    assert data["failures"] == ["10 queries lost all their evidence (at most 0 allowed)"]


def test_replay_by_time_range(evaluated: dict[str, Any]) -> None:
    report = evaluated["report"]
    since = datetime.fromisoformat(report["startedAt"]).astimezone(UTC).isoformat()
    result = invoke(
        [
            "replay",
            "--since",
            since,
            "--limit",
            "5",
            "--traffic",
            "eval",  # the store holds only the eval's lookups
            "--data-dir",
            str(evaluated["data_dir"]),
            "--collection",
            report["collection"],
            *COMMON,
            "--json",
        ]
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["queries"] == 5


def test_bad_input_is_reported(evaluated: dict[str, Any]) -> None:
    result = CliRunner().invoke(
        eval_app,
        [
            "run",
            str(evaluated["dataset"]),
            "--config",
            "turbo",
            "--data-dir",
            str(evaluated["data_dir"]),
        ],
    )
    assert result.exit_code != 0
    assert "unknown configuration 'turbo'" in str(result.exception)


# --------------------------------------------------------------------------- real data

DATASETS = Path(__file__).resolve().parents[3] / "shared" / "datasets"


@pytest.mark.datasets
@pytest.mark.skipif(
    not (DATASETS / "scifact" / "corpus.jsonl.gz").is_file(),
    reason=f"the shared test collections are not at {DATASETS}",
)
def test_scifact_subset_with_the_onnx_embedder(tmp_path: Path) -> None:
    """50 SciFact train queries over their judged abstracts plus 150 others."""
    out = tmp_path / "out"
    result = invoke(
        [
            "run",
            str(DATASETS / "scifact"),
            "--split",
            "train",
            "--limit-queries",
            "50",
            "--corpus-sample",
            "150",
            "--config",
            "dense",
            "--config",
            "sparse",
            "--embedder",
            "onnx-minilm",
            "--data-dir",
            str(tmp_path / "data"),
            "--out",
            str(out),
            "--chart",
            "none",
        ]
    )
    assert result.exit_code == 0, result.output
    (path,) = out.glob("*.json")
    report = json.loads(path.read_text())
    dense, sparse = report["configurations"]
    assert dense["queries"] == 50
    # A small corpus is easier than the full one (published full-corpus test-split
    # nDCG@10: MiniLM 0.645, BM25 0.665); a broken embedding or search lands far below.
    assert dense["metrics"]["nDCG@10"] > 0.6
    assert sparse["metrics"]["nDCG@10"] > 0.5
    assert dense["errorRate"] == 0.0
