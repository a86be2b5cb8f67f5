"""The typed retrieval and rerank traces: one wire form, read back the same."""

from __future__ import annotations

import json

from lookup_knowledge.application.lookup.traces import RerankTrace, RetrievalTrace

TRACE = RetrievalTrace(
    mode="hybrid",
    retrieve_k=20,
    return_n=5,
    max_chunks_per_document=2,
    min_relevance=0.3,
    engine_grouping=False,
    late_materialisation=True,
    search_parameters={"analysis": "snowball-en"},
    query_hints={"domains": ["ops"], "filterCandidate": None},
    passes=({"filter": "ops", "hits": 3, "usable": 0}, {"filter": None, "hits": 4, "usable": 2}),
    filter_applied=None,
    access={"mode": "off", "filter": "", "droppedByCheck": 0},
    fallback_reason="filtered_pass_below_min_relevance",
    mode_reason=None,
    counts={"candidates": 4, "returned": 2, "projected": 2},
    timings_ms={"search": 1.23456, "total": 9.87654},
    reranker={"provider": "tei", "status": "applied", "durationMs": 1.0, "sent": 4},
    requested_mode="dense",
    vanished=("a#chunk-1",),
    dropped=({"document_id": "b#chunk-0", "reason": "empty text"},),
)


def test_the_retrieval_trace_wire_form_has_the_camel_case_keys_in_their_order() -> None:
    assert list(TRACE.to_wire()) == [
        "mode",
        "retrieveK",
        "returnN",
        "maxChunksPerDocument",
        "minRelevance",
        "engineGrouping",
        "lateMaterialisation",
        "searchParameters",
        "queryHints",
        "passes",
        "filterApplied",
        "access",
        "fallbackReason",
        "modeReason",
        "counts",
        "timingsMs",
        "reranker",
        "requestedMode",
        "vanished",
        "dropped",
    ]
    assert TRACE.to_wire()["timingsMs"] == {"search": 1.235, "total": 9.877}


def test_optional_parts_are_absent_not_null() -> None:
    wire = RetrievalTrace(mode="dense").to_wire()
    for key in ("reranker", "requestedMode", "vanished", "dropped"):
        assert key not in wire


def test_a_stored_retrieval_trace_reads_back_to_the_same_wire_form() -> None:
    stored = json.loads(json.dumps(TRACE.to_wire()))
    assert RetrievalTrace.from_wire(stored).to_wire() == stored


def test_a_trace_stored_without_keys_or_with_wrong_types_reads_as_defaults() -> None:
    trace = RetrievalTrace.from_wire({"mode": 3, "passes": "x", "counts": [1], "vanished": [1]})
    assert (trace.mode, trace.passes, trace.counts, trace.vanished) == ("", (), {}, ())
    assert RetrievalTrace.from_wire(None).mode == ""


def test_a_trace_reads_as_a_mapping_of_its_wire_form() -> None:
    assert TRACE["passes"] == TRACE.to_wire()["passes"]
    assert "reranker" in TRACE
    assert "reranker" not in RetrievalTrace(mode="dense")
    assert dict(TRACE) == TRACE.to_wire()


def test_a_rerank_entry_rounds_its_scores_and_names_the_reranker_score_only_when_judged() -> None:
    entry = RerankTrace(
        document_id="a#chunk-0",
        relevance=0.123456789,
        strength=0.5,
        final_score=0.7,
        rank_before=2,
        rank_after=1,
        adjustments=({"rule": "relevance", "weight": 1.0, "contribution": 0.5, "detail": ""},),
        outcome="returned",
    )
    assert "rerankerScore" not in entry.to_wire()
    judged = RerankTrace.from_wire({**entry.to_wire(), "rerankerScore": 0.9})
    assert list(judged.to_wire())[:2] == ["document_id", "rerankerScore"]
    assert entry.to_wire()["relevance"] == 0.123457
    stored = json.loads(json.dumps(judged.to_wire()))
    assert RerankTrace.from_wire(stored).to_wire() == stored
