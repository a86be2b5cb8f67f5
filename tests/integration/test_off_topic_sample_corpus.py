"""On the sample corpus, with the embedder and engine the quickstart uses, questions the
corpus cannot answer come back ``no_evidence`` in the default mode, and its own
questions are found."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from lookup_knowledge.adapters.api import LookupApp, create_app
from lookup_knowledge.sample_corpus import corpus_path

OFF_TOPIC = [
    "zzqx flibbertigibbet quantum banana",
    "Who painted the ceiling of the Sistine Chapel?",
    "How many legs does a spider have?",
    "What is a good marinade for grilled salmon?",
    "Which team won the 1966 football World Cup final?",
    "How do I get red wine out of a carpet?",
    # in Chinese: answered from BM25 alone (the English embedder cannot read them), with
    # the English glosses of their words; each Chinese word counts once in the reference
    "法国的首都是哪里",
    "红烧肉怎么做才好吃",
    "一支足球队上场有几名球员",
    "感冒发烧应该吃什么药",
]

#: Mixed Chinese and English questions about English documents: glossed, and read
#: against their own BM25 reference (without one, hybrid found nothing for them).
MIXED = [
    ("HAProxy 健康检查的配置", "load-balancer-health-checks.md"),
    ("PITR 时间点恢复的步骤", "backup-restore-pitr.md"),
    # mostly Chinese: answered by BM25 alone (its dense vector would place it by script)
    ("PgBouncer 连接池大小怎么调整", "pgbouncer-pool-tuning.md"),
]

#: Technical questions in the corpus' vocabulary that it does not answer (no document
#: on Kubernetes or Redis Sentinel): whatever they bring back is weak evidence.
NEAR_MISSES = [
    "kubernetes pod eviction memory pressure",
    "sentinel log sdown odown quorum of two sentinels agrees the primary is down",
    "how do I rotate the TLS certificate of the kafka brokers",
]


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LookupApp]:
    data = tmp_path_factory.mktemp("sample")
    overrides = {"data-dir": str(data), "embedder.provider": "onnx-minilm"}
    with create_app(overrides=overrides) as lookup_app:
        lookup_app.ingest([corpus_path()], sync=True)
        lookup_app.seal_knowledge_store()
        yield lookup_app


@pytest.mark.parametrize("query", OFF_TOPIC)
def test_an_off_topic_question_finds_no_evidence(app: LookupApp, query: str) -> None:
    result = app.lookup(query, session_id="off-topic")
    assert not result["found"], result["evidenceBlocks"]
    assert result["relevanceLevel"] == "none"
    assert result["completenessHint"] == "none"
    assert "No evidence" in result["message"]


def test_the_corpus_own_questions_are_found(app: LookupApp) -> None:
    questions = json.loads(Path(corpus_path(), "questions.json").read_text(encoding="utf-8"))
    english = [q for q in questions if q["query"].isascii()][:6]
    for question in english:
        result = app.lookup(question["query"], session_id="on-topic")
        assert result["found"], question["query"]
        ids = [b["document_id"] for b in result["evidenceBlocks"]]
        assert any(question["expected_doc"] in i for i in ids), (question, ids)


@pytest.mark.parametrize(("query", "expected"), MIXED)
def test_a_mixed_language_question_about_an_english_document_is_found(
    app: LookupApp, query: str, expected: str
) -> None:
    result = app.lookup(query, session_id="mixed")
    assert result["found"], result["message"]
    ids = [b["document_id"] for b in result["evidenceBlocks"]]
    assert any(expected in i for i in ids[:5]), ids


@pytest.mark.parametrize("query", NEAR_MISSES)
def test_blocks_for_a_question_the_corpus_does_not_answer_are_never_labelled_high(
    app: LookupApp, query: str
) -> None:
    result = app.lookup(query, session_id="near-miss")
    assert result["relevanceLevel"] in {"none", "low", "medium"}, result["relevanceLevel"]
    scores = [block["score"] for block in result["evidenceBlocks"]]
    assert all(score < 0.6 for score in scores), scores  # rag.quality.high
