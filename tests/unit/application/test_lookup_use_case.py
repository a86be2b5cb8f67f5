"""The LookupKnowledge use case with in-memory fakes: retrieval passes, errors, traces."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest

from lookup_knowledge.application.lookup import LookupConfig, LookupOptions, PayloadProfile
from lookup_knowledge.application.ports import RecordOutcome
from lookup_knowledge.domain.errors import AuditError, InvalidInputError, SearchUnavailable
from lookup_knowledge.domain.model import InvocationStatus, SearchMode
from lookup_knowledge.domain.relevance import (
    DEFAULT_MODEL,
    DenseBackground,
    HitCalibration,
    ScoreKind,
    hit_relevance,
)
from lookup_knowledge.domain.settings import RetrievalSettings
from tests.fakes import (
    FakeSearch,
    FakeSessionState,
    InMemoryRecorder,
    LookupFixture,
    chunk,
    make_lookup,
)

DOMAINS = {"database": ["postgres", "数据库"], "network": ["dns", "网络"]}


def build(search: FakeSearch, **overrides: Any) -> LookupFixture:
    """The use case over ``search``, with the DOMAINS keywords and fakes for the rest."""
    return make_lookup(search, domains=DOMAINS, **overrides)


def test_filtered_pass_uses_the_single_l0_domain() -> None:
    search = FakeSearch([chunk("pg", 0, 0.9, category="database")])
    use_case = build(search).lookup
    result = use_case.execute("postgres replication lag", session_id="s")
    assert search.requests[0].category_filter == "database"
    assert len(search.requests) == 1
    assert result.retrieval_trace["filterApplied"] == "database"
    assert result.retrieval_trace["fallbackReason"] is None
    assert "filter:category=database" in result.evidence_blocks[0].hit_reasons


def test_unfiltered_retry_when_the_filtered_pass_is_empty() -> None:
    search = FakeSearch([chunk("misc", 0, 0.9, category="other")])
    fx = build(search)
    result = fx.lookup.execute("postgres replication lag", session_id="s")
    assert [r.category_filter for r in search.requests] == ["database", None]
    assert result.found
    assert result.retrieval_trace["fallbackReason"] == "filtered_pass_empty"
    assert result.retrieval_trace["filterApplied"] is None
    assert fx.records[0].fallback_reason == "filtered_pass_empty"


def test_unfiltered_retry_when_filtered_hits_are_below_min_relevance() -> None:
    weak = chunk("weak", 0, 0.05, category="database")
    good = chunk("good", 0, 0.8, category="other")
    search = FakeSearch([good], filtered_rows={"database": [weak]})
    use_case = build(search).lookup
    result = use_case.execute("postgres", session_id="s")
    assert result.retrieval_trace["fallbackReason"] == "filtered_pass_below_min_relevance"
    assert [b.document_id for b in result.evidence_blocks] == ["good#chunk-0"]


def test_no_filter_when_two_domains_match() -> None:
    search = FakeSearch([chunk("x", 0, 0.9)])
    use_case = build(search).lookup
    use_case.execute("postgres dns", session_id="s")
    assert search.requests[0].category_filter is None


def test_explicit_category_is_a_hard_filter_without_retry() -> None:
    search = FakeSearch([chunk("misc", 0, 0.9, category="other")])
    use_case = build(search).lookup
    result = use_case.execute(
        "anything", session_id="s", options=LookupOptions(category="database")
    )
    assert [r.category_filter for r in search.requests] == ["database"]
    assert not result.found
    assert result.status is InvocationStatus.NO_EVIDENCE


def test_no_evidence_when_nothing_is_usable() -> None:
    search = FakeSearch([chunk("weak", 0, 0.01)])
    fx = build(search)
    result = fx.lookup.execute("q", session_id="s")
    assert not result.found
    assert result.status is InvocationStatus.NO_EVIDENCE
    assert result.relevance_level.value == "none"
    assert result.completeness_hint.value == "none"
    assert result.quality_score == 0.0
    assert fx.records[0].status == "no_evidence"
    assert "No evidence" in result.message


def test_search_failure_is_an_error_result_that_is_recorded() -> None:
    search = FakeSearch(error=SearchUnavailable("milvus at http://x:19530 is unreachable"))
    fx = build(search)
    result = fx.lookup.execute("q", session_id="s", step_id="step-3")
    assert result.status is InvocationStatus.ERROR
    assert not result.found
    assert result.error_code == "search_unavailable"
    assert "unreachable" in result.message
    assert fx.records[0].status == "error"
    assert fx.records[0].error_code == "search_unavailable"
    assert fx.records[0].step_id == "step-3"


def test_unexpected_adapter_exception_does_not_raise_into_the_agent() -> None:
    class Broken(FakeSearch):
        def search(self, request):  # type: ignore[no-untyped-def]
            raise KeyError("boom")

    fx = build(Broken())
    result = fx.lookup.execute("q", session_id="s")
    assert result.status is InvocationStatus.ERROR
    assert result.error_code == "internal_error"
    assert fx.records[0].error_code == "internal_error"


def test_audit_failure_does_not_fail_the_lookup() -> None:
    search = FakeSearch([chunk("d", 0, 0.9)])
    recorder = InMemoryRecorder()
    recorder.available = False  # the database is away
    recorder.spool_error = AuditError("disk full")  # and the spool cannot be written either
    use_case = build(search, recorder=recorder).lookup
    result = use_case.execute("q", session_id="s")
    assert result.found
    assert result.record_outcome is None


def test_record_outcome_is_reported() -> None:
    use_case = build(FakeSearch([chunk("d", 0, 0.9)])).lookup
    assert use_case.execute("q", session_id="s").record_outcome is RecordOutcome.COMMITTED


@pytest.mark.parametrize("query", ["", "   ", "x" * 4001])
def test_bad_queries_are_recorded_errors(query: str) -> None:
    search = FakeSearch([chunk("d", 0, 0.9)])
    fx = build(search)
    result = fx.lookup.execute(query, session_id="s")
    assert result.status is InvocationStatus.ERROR
    assert result.error_code == "invalid_input"
    assert search.requests == []
    assert len(fx.records) == 1


def test_blank_session_id_is_a_caller_error() -> None:
    use_case = build(FakeSearch()).lookup
    with pytest.raises(InvalidInputError):
        use_case.execute("q", session_id=" ")


def test_sparse_mode_needs_no_embedder_and_sends_no_vector() -> None:
    search = FakeSearch([chunk("d", 0, -12.0)], score_kind=ScoreKind.BM25)
    use_case = make_lookup(
        search, embedder=None, config=LookupConfig(mode=SearchMode.SPARSE)
    ).lookup
    result = use_case.execute("q", session_id="s")
    assert search.requests[0].query_vector is None
    assert result.found
    # no reference from this engine: BM25 falls back to its saturation, 12/22
    assert result.evidence_blocks[0].relevance == pytest.approx(
        hit_relevance(((ScoreKind.BM25, -12.0),), None, DEFAULT_MODEL.sparse)
    )


def test_dense_mode_without_embedder_is_a_configuration_error_result() -> None:
    use_case = make_lookup(FakeSearch([chunk("d", 0, 0.9)]), embedder=None).lookup
    result = use_case.execute("q", session_id="s")
    assert result.error_code == "configuration_error"


def test_late_materialisation_fetches_only_the_survivors() -> None:
    rows = [chunk("big", i, 0.9 - i * 0.01) for i in range(8)] + [chunk("x", 0, 0.5)]
    search = FakeSearch(rows)
    config = LookupConfig(retrieval=RetrievalSettings(return_n=3), late_materialisation=True)
    use_case = build(search, config=config).lookup
    result = use_case.execute("q", session_id="s")
    assert all(r.include_content is False for r in search.requests)
    assert search.fetches == [["big#chunk-0", "big#chunk-1", "x#chunk-0"]]
    assert result.evidence_blocks[0].content == "content of big chunk 0"


def test_a_block_deleted_before_materialisation_is_not_shown() -> None:
    search = FakeSearch([chunk("a", 0, 0.9), chunk("b", 0, 0.8)])
    search.deleted.add("a#chunk-0")
    use_case = build(search, config=LookupConfig(late_materialisation=True)).lookup
    result = use_case.execute("q", session_id="s")
    assert [b.document_id for b in result.evidence_blocks] == ["b#chunk-0"]
    assert result.retrieval_trace["vanished"] == ["a#chunk-0"]


def test_engine_grouping_asks_for_group_size_equal_to_the_cap() -> None:
    search = FakeSearch([chunk("a", 0, 0.9)])
    config = LookupConfig(
        retrieval=RetrievalSettings(max_chunks_per_document=3), engine_grouping=True
    )
    use_case = build(search, config=config).lookup
    use_case.execute("q", session_id="s")
    assert search.requests[0].group_size == 3


def test_result_json_has_exactly_the_contract_fields() -> None:
    use_case = build(FakeSearch([chunk("a", 0, 0.9), chunk("b", 1, 0.8)])).lookup
    payload = use_case.execute("q", session_id="s").to_tool_json()
    assert set(payload) == {
        "found",
        "evidenceBlocks",
        "contextPack",
        "retrievalTrace",
        "rerankTrace",
        "relevanceLevel",
        "completenessHint",
        "retrievedDomainsThisSession",
        "message",
        "invocationId",
    }
    assert "primary" not in payload
    assert "supplement" not in payload
    json.dumps(payload, ensure_ascii=False)  # serialisable as is
    block = payload["evidenceBlocks"][0]
    # "a.md" is not spelled by the id "a#chunk-0", so the source is shown; the rank is
    # the position in the list, not repeated.
    assert set(block) == {"document_id", "source", "title", "content", "score"}
    assert "hitReasons" not in block  # only the search mode: said once, in the trace
    assert "breadcrumb" not in block  # empty: left out of the agent payload
    full = use_case.execute("q", session_id="s").to_tool_json(PayloadProfile.FULL)
    fields = {"document_id", "source", "title", "content", "score", "rank"}
    assert {*fields, "breadcrumb", "hitReasons"} <= set(full["evidenceBlocks"][0])


def test_retrieved_domains_accumulate_over_a_session() -> None:
    search = FakeSearch(
        [chunk("pg", 0, 0.9, category="database"), chunk("dns", 0, 0.8, category="network")]
    )
    use_case = build(search).lookup
    first = use_case.execute("postgres", session_id="s")
    assert first.retrieved_domains_this_session == ("database",)
    second = use_case.execute("dns", session_id="s")
    assert second.retrieved_domains_this_session == ("database", "network")
    other = use_case.execute("dns", session_id="other")
    assert other.retrieved_domains_this_session == ("network",)


def test_traces_explain_every_step() -> None:
    rows = [chunk("big", i, 0.9 - i * 0.01, category="database") for i in range(4)]
    rows += [chunk("big", 0, 0.5, category="database", vector_id="dup")]
    fx = build(FakeSearch(rows))
    result = fx.lookup.execute("postgres", session_id="s")
    trace = result.retrieval_trace
    assert trace["counts"] == {
        "candidates": 5,
        "belowMinRelevance": 0,
        "afterDedup": 4,
        "duplicatesMerged": 1,
        "afterCap": 2,
        "cappedOut": 2,
        "farBelowBest": 0,
        "returned": 2,
        "projected": 2,
    }
    assert trace["queryHints"]["domains"] == ["database"]
    assert set(trace["timingsMs"]) >= {"transform", "embed", "search", "postprocess", "total"}
    outcomes = {r["document_id"]: r["outcome"] for r in result.rerank_trace}
    assert outcomes == {
        "big#chunk-0": "returned",
        "big#chunk-1": "returned",
        "big#chunk-2": "capped",
        "big#chunk-3": "capped",
    }
    rules = {a["rule"] for a in result.rerank_trace[0]["adjustments"]}
    assert {"relevance", "domain_match"} <= rules
    details = fx.records[0].retrieval_details
    assert details["version"] == 1
    assert details["retrievalTrace"]["counts"]["cappedOut"] == 2


def test_evidence_records_match_what_the_agent_was_shown() -> None:
    fx = build(FakeSearch([chunk("a", 0, 0.9), chunk("b", 3, 0.8)]))
    result = fx.lookup.execute("q", session_id="s")
    shown = [b.document_id for b in result.evidence_blocks]
    recorded = [e.document_id for e in fx.records[0].evidence]
    assert recorded == shown
    assert all(e.projected and e.in_context_pack for e in fx.records[0].evidence)
    assert fx.records[0].returned_count == 2
    assert fx.records[0].id == result.invocation_id


def test_invocation_ids_are_time_ordered_uuid7() -> None:
    fx = build(FakeSearch([chunk("a", 0, 0.9)]))
    for _ in range(5):
        fx.lookup.execute("q", session_id="s")
    ids = [r.id for r in fx.records]
    assert ids == sorted(ids)
    assert all(i[14] == "7" for i in ids)


def test_with_config_keeps_the_ports() -> None:
    search = FakeSearch([chunk("a", i, 0.9 - i / 100) for i in range(5)])
    use_case = build(search).lookup
    uncapped = use_case.with_config(
        LookupConfig(retrieval=RetrievalSettings(max_chunks_per_document=None))
    )
    assert len(uncapped.execute("q", session_id="s").evidence_blocks) == 5
    assert len(use_case.execute("q", session_id="s").evidence_blocks) == 2


# ------------------------------------ hybrid strength, fallback counts, ids, failing ports


class HybridSearch(FakeSearch):
    """Hits with a fused RRF score plus the per-list scores behind it."""

    def __init__(
        self,
        components: list[tuple[tuple[ScoreKind, float], ...]],
        calibration: HitCalibration | None = None,
    ) -> None:
        super().__init__([chunk(f"d{i}", 0, 0.5) for i in range(len(components))])
        self.components = components
        self.calibration = calibration

    def search(self, request):  # type: ignore[no-untyped-def]
        hits = super().search(request)
        return [
            replace(
                hit,
                score=1 / (60 + rank),
                score_kind=ScoreKind.RRF,
                component_scores=self.components[rank - 1],
                calibration=self.calibration,
            )
            for rank, hit in enumerate(hits, 1)
        ]


def test_hybrid_nonsense_is_no_evidence_despite_high_fused_scores() -> None:
    weak = ((ScoreKind.COSINE, 0.05), (ScoreKind.BM25, -0.3))
    search = HybridSearch([weak, weak, ((ScoreKind.COSINE, 0.1),)])
    fx = build(search, config=LookupConfig(mode=SearchMode.HYBRID))
    result = fx.lookup.execute("zebra giraffe smoothie", session_id="s")
    assert not result.found
    assert result.status is InvocationStatus.NO_EVIDENCE
    assert fx.records[0].status == "no_evidence"


def test_hybrid_relevance_is_the_calibrated_evidence_and_drives_the_quality_fields() -> None:
    # The engine says what its scores are read against: the query's BM25 reference and
    # the collection's dense background.
    calibration = HitCalibration(
        bm25_reference=30.0, dense_background=DenseBackground(mean=0.1, std=0.1)
    )
    strong = ((ScoreKind.COSINE, 0.8), (ScoreKind.BM25, -30.0))  # z = 7, r = 1
    search = HybridSearch([strong, ((ScoreKind.COSINE, 0.05),)], calibration)
    use_case = build(search, config=LookupConfig(mode=SearchMode.HYBRID)).lookup
    result = use_case.execute("PG-53300", session_id="s")
    # the second hit ranks by RRF but its evidence is far below the best: not padded in
    assert [b.document_id for b in result.evidence_blocks] == ["d0#chunk-0"]
    assert result.relevance_level.value == "high"
    expected = hit_relevance(strong, calibration, DEFAULT_MODEL.hybrid)
    assert result.rerank_trace[0]["strength"] == pytest.approx(expected, abs=1e-6)
    assert result.rerank_trace[1]["outcome"] == "far_below_best"


def test_hybrid_filtered_pass_with_weak_evidence_falls_back() -> None:
    weak = ((ScoreKind.COSINE, 0.05),)
    search = HybridSearch([weak])
    search.rows[0].metadata["category"] = "database"
    use_case = build(search, config=LookupConfig(mode=SearchMode.HYBRID)).lookup
    result = use_case.execute("postgres", session_id="s")
    assert result.retrieval_trace["fallbackReason"] == "filtered_pass_below_min_relevance"


def test_counts_after_a_fallback_describe_the_pass_that_was_used() -> None:
    weak = [chunk("w", i, 0.05, category="database") for i in range(2)]
    good = [chunk("g", i, 0.8, category="other") for i in range(3)]
    search = FakeSearch(good, filtered_rows={"database": weak})
    fx = build(search)
    result = fx.lookup.execute("postgres", session_id="s")
    counts = result.retrieval_trace["counts"]
    assert counts["candidates"] == 3
    assert counts["belowMinRelevance"] == 0
    assert fx.records[0].candidate_count == 3
    assert [p["hits"] for p in result.retrieval_trace["passes"]] == [2, 3]


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("step_id", "s" * 300),
        ("step_id", "bad\x00id"),
        ("tool_call_id", "x" * 256),
        ("session_id", "s" * 256),
        ("session_id", "a\nb"),
    ],
)
def test_ids_the_audit_store_cannot_keep_are_rejected_before_searching(
    field: str, value: str
) -> None:
    search = FakeSearch([chunk("d", 0, 0.9)])
    fx = build(search)
    kwargs: dict[str, object] = {"session_id": "s"}
    if field == "tool_call_id":
        kwargs["options"] = LookupOptions(tool_call_id=value)
    else:
        kwargs[field] = value
    with pytest.raises(InvalidInputError, match=field):
        fx.lookup.execute("q", **kwargs)  # type: ignore[arg-type]
    assert search.requests == []
    assert fx.records == []


def test_query_text_is_cleaned_of_what_no_store_can_hold() -> None:
    fx = build(FakeSearch([chunk("d", 0, 0.9)]))
    result = fx.lookup.execute("pool size \ud800 and\x00 more\tok", session_id="s")
    assert result.found
    assert fx.records[0].query == "pool size \ufffd and more\tok"
    fx.records[0].query.encode("utf-8")  # storable


def test_session_state_failure_does_not_cost_the_lookup() -> None:
    class BrokenSessions(FakeSessionState):
        def retrieved_domains(self, session_id: str) -> tuple[str, ...]:
            raise OSError("database gone")

    search = FakeSearch([chunk("pg", 0, 0.9, category="database")])
    fx = build(search, session_state=BrokenSessions())
    result = fx.lookup.execute("postgres", session_id="s")
    assert result.found
    assert result.retrieved_domains_this_session == ("database",)
    assert len(fx.records) == 1


def test_a_recorder_bug_does_not_cost_the_lookup() -> None:
    class BuggyRecorder(InMemoryRecorder):
        def record(self, invocation):  # type: ignore[no-untyped-def]
            raise RuntimeError("bug")

    use_case = build(FakeSearch([chunk("d", 0, 0.9)]), recorder=BuggyRecorder()).lookup
    result = use_case.execute("q", session_id="s")
    assert result.found
    assert result.record_outcome is None
