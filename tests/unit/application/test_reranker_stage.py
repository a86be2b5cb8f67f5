"""The optional reranker stage: it reorders what it judged, its scores are pooled into the
calibrated relevance (so it can also abstain), the traces and the audit record show it,
and a reranker that fails or times out never fails the lookup."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from lookup_knowledge.application.lookup import LookupConfig, LookupResult
from lookup_knowledge.domain.errors import RerankerError
from lookup_knowledge.domain.model import InvocationStatus
from lookup_knowledge.domain.reranking import (
    RerankerSettings,
    pooled_relevance,
    reranker_evidence,
)
from tests.fakes import FakeReranker, FakeSearch, LookupFixture, chunk, make_lookup
from tests.fakes.reranking import timed_out

ON = LookupConfig(reranker=RerankerSettings(provider="fake", weight=0.5))


def _search() -> FakeSearch:
    return FakeSearch(
        [
            chunk("kb/tea", 0, 0.80, "Brew green tea leaves for two minutes."),
            chunk("kb/flux", 0, 0.70, "The gnuflux capacitor needs a steady current."),
            chunk("kb/dns", 0, 0.65, "Resolvers cache answers for the record's TTL."),
        ]
    )


def _lookup(reranker: FakeReranker | None, config: LookupConfig = ON) -> LookupFixture:
    return make_lookup(_search(), config=config, reranker=reranker)


def _ask(fx: LookupFixture, query: str = "how does the gnuflux capacitor work") -> LookupResult:
    return fx.lookup.execute(query, session_id="s")


def _ids(result: LookupResult) -> list[str]:
    return [b.document_id for b in result.evidence_blocks]


def _trace(result: LookupResult, key: str) -> dict[str, Any]:
    return {entry["document_id"]: entry[key] for entry in result.rerank_trace if key in entry}


def test_the_reranker_reorders_the_candidates_it_judged() -> None:
    without = _ask(_lookup(None, LookupConfig()))
    assert _ids(without)[0] == "kb/tea#chunk-0"
    reranker = FakeReranker({"gnuflux": 0.98, "tea": 0.30}, default=0.20)
    result = _ask(_lookup(reranker))
    assert result.found
    assert _ids(result)[0] == "kb/flux#chunk-0"
    # it read the texts of the candidates, in search order, with the query
    assert reranker.calls == [
        (
            "how does the gnuflux capacitor work",
            [
                "Brew green tea leaves for two minutes.",
                "The gnuflux capacitor needs a steady current.",
                "Resolvers cache answers for the record's TTL.",
            ],
        )
    ]


def test_reranker_scores_are_pooled_into_the_calibrated_relevance() -> None:
    calibrated = _trace(_ask(_lookup(None, LookupConfig())), "strength")
    scores = {"gnuflux": 0.98, "tea": 0.30}
    result = _ask(_lookup(FakeReranker(scores, default=0.20)))
    shown = _trace(result, "rerankerScore")
    assert shown == {"kb/tea#chunk-0": 0.30, "kb/flux#chunk-0": 0.98, "kb/dns#chunk-0": 0.20}
    for key, strength in _trace(result, "strength").items():
        assert strength == pytest.approx(
            pooled_relevance(calibrated[key], shown[key], 0.5), abs=1e-6
        )
    by_id = {b.document_id: b.relevance for b in result.evidence_blocks}
    assert by_id["kb/flux#chunk-0"] > by_id["kb/tea#chunk-0"]


def test_the_traces_name_the_provider_and_the_time_taken() -> None:
    result = _ask(_lookup(FakeReranker({"gnuflux": 0.9}, name="tei:bge-reranker-base")))
    stage = result.retrieval_trace["reranker"]
    assert stage["provider"] == "tei:bge-reranker-base"
    assert stage["status"] == "applied"
    assert stage["sent"] == 3
    assert stage["durationMs"] >= 0
    assert "rerank" in result.retrieval_trace["timingsMs"]


def test_the_audit_record_keeps_the_reranker_trace() -> None:
    fx = _lookup(FakeReranker({"gnuflux": 0.9}))
    _ask(fx)
    details = fx.records[0].retrieval_details
    assert details["retrievalTrace"]["reranker"]["status"] == "applied"  # type: ignore[index]
    assert any("rerankerScore" in e for e in details["rerankTrace"])  # type: ignore[attr-defined]


def test_a_reranker_that_finds_nothing_relevant_turns_the_lookup_into_no_evidence() -> None:
    fx = _lookup(FakeReranker(default=0.0))
    result = _ask(fx, "what is the capital of France")
    assert not result.found
    assert result.status is InvocationStatus.NO_EVIDENCE
    assert result.relevance_level.value == "none"
    assert "min-relevance" in result.retrieval_trace["reranker"]["reason"]
    assert fx.records[0].status == "no_evidence"


def test_only_the_top_k_candidates_are_sent_and_the_rest_are_not_returned() -> None:
    config = replace(ON, reranker=RerankerSettings(provider="fake", top_k=2))
    reranker = FakeReranker({"gnuflux": 0.9}, default=0.5)
    result = _ask(_lookup(reranker, config))
    assert len(reranker.calls[0][1]) == 2
    assert result.retrieval_trace["reranker"]["notJudged"] == 1
    assert "kb/dns#chunk-0" not in _ids(result)


@pytest.mark.parametrize(
    "failure",
    [timed_out(), RerankerError("cohere rerank request was rejected: HTTP 401"), OSError("boom")],
    ids=["timeout", "refused", "untranslated driver error"],
)
def test_a_failing_reranker_leaves_the_lookup_answered_without_it(failure: Exception) -> None:
    without = _ask(_lookup(None, LookupConfig()))
    fx = _lookup(FakeReranker(failure=failure))
    result = _ask(fx)
    assert result.status is InvocationStatus.OK
    assert _ids(result) == _ids(without)
    assert [b.relevance for b in result.evidence_blocks] == [
        b.relevance for b in without.evidence_blocks
    ]
    stage = result.retrieval_trace["reranker"]
    assert stage["status"] == "failed"
    assert str(failure) in stage["reason"]
    assert not _trace(result, "rerankerScore")
    record = fx.records[0]
    assert record.status == "ok"
    assert record.retrieval_details["retrievalTrace"]["reranker"]["status"] == "failed"  # type: ignore[index]


def test_without_a_reranker_the_lookup_is_rule_based_and_says_nothing_of_one() -> None:
    result = _ask(_lookup(None, LookupConfig()))
    assert "reranker" not in result.retrieval_trace
    assert not _trace(result, "rerankerScore")


def test_raw_logits_become_evidence_through_a_sigmoid() -> None:
    config = replace(ON, reranker=RerankerSettings(provider="fake", logits=True))
    result = _ask(_lookup(FakeReranker({"gnuflux": 4.0}, default=-4.0), config))
    shown = _trace(result, "rerankerScore")
    assert shown["kb/flux#chunk-0"] == pytest.approx(reranker_evidence(4.0, logits=True), abs=1e-6)
    assert 0.5 < shown["kb/flux#chunk-0"] < 1.0
    assert _ids(result)[0] == "kb/flux#chunk-0"
