"""Chunk-level evidence identity, through the use case: one test per rule (the rules are
the comments; ``docs/architecture.md`` describes the identity rules as a whole)."""

from __future__ import annotations

from lookup_knowledge.application.lookup import LookupConfig
from lookup_knowledge.domain.model import SearchMode
from lookup_knowledge.domain.projection import ProjectionBudgets, expand_agent_blocks
from lookup_knowledge.domain.settings import RetrievalSettings
from tests.fakes import (
    FakeEmbedder,
    FakeSearch,
    LookupFixture,
    StoredChunk,
    chunk,
    make_lookup,
)


def make(search: FakeSearch, config: LookupConfig | None = None) -> LookupFixture:
    return make_lookup(search, config=config or LookupConfig(late_materialisation=False))


def blocks(search: FakeSearch, config: LookupConfig | None = None) -> list[dict[str, object]]:
    result = make(search, config).lookup.execute("how do I fail over", session_id="s1")
    payload = result.to_tool_json()
    return list(payload["evidenceBlocks"])


# Requirement: Retrieval candidates SHALL carry chunk-level identity


def test_identity_extracted_from_metadata() -> None:
    camel = StoredChunk(
        id="v1", content="a", score=0.9, metadata={"docId": "runbook", "chunkIndex": 3}
    )
    snake = StoredChunk(
        id="v2", content="b", score=0.8, metadata={"doc_id": "faq", "chunk_index": 0}
    )
    fx = make(FakeSearch([camel, snake]))
    result = fx.lookup.execute("q", session_id="s")
    ids = [b.document_id for b in result.evidence_blocks]
    assert ids == ["runbook#chunk-3", "faq#chunk-0"]
    record = fx.records[0]
    assert [(e.doc_id, e.chunk_index) for e in record.evidence] == [("runbook", 3), ("faq", 0)]


def test_fallback_identity_without_chunk_index() -> None:
    row = StoredChunk(id="4711", content="legacy row", score=0.9, metadata={"docId": "old"})
    assert [b["document_id"] for b in blocks(FakeSearch([row]))] == ["vector:4711"]


# Requirement: Evidence deduplication SHALL be chunk-scoped


def test_same_document_different_chunks_are_kept() -> None:
    search = FakeSearch([chunk("guide", 0, 0.9), chunk("guide", 1, 0.85)])
    out = blocks(search)
    assert [b["document_id"] for b in out] == ["guide#chunk-0", "guide#chunk-1"]
    # Both stand for the same source; the agent profile says it once per document.
    shown = expand_agent_blocks(out)
    assert shown[0].get("source") == shown[1].get("source") == "guide.md"
    assert "source" not in out[1]


def test_true_duplicate_keys_merge_without_replacing_higher_ranked_content() -> None:
    higher = chunk("guide", 2, 0.9, content="the higher ranked text", vector_id="a")
    lower = chunk("guide", 2, 0.7, content="a stale copy of the text", vector_id="b")
    use_case = make(FakeSearch([lower, higher])).lookup
    result = use_case.execute("q", session_id="s")
    assert [b.document_id for b in result.evidence_blocks] == ["guide#chunk-2"]
    assert result.evidence_blocks[0].content == "the higher ranked text"
    counts = result.retrieval_trace["counts"]
    assert counts["duplicatesMerged"] == 1


# Requirement: Post-processing SHALL enforce max chunks per document


def test_excess_chunks_from_one_document_are_dropped() -> None:
    rows = [chunk("big", i, 0.9 - i * 0.01) for i in range(6)] + [chunk("other", 0, 0.5)]
    config = LookupConfig(
        retrieval=RetrievalSettings(max_chunks_per_document=2), late_materialisation=False
    )
    out = blocks(FakeSearch(rows), config)
    assert [b["document_id"] for b in out] == ["big#chunk-0", "big#chunk-1", "other#chunk-0"]


# Requirement: Retrieval width and return width SHALL be separate


def test_retrieve_k_widens_recall_without_unbounded_return() -> None:
    rows = [chunk(f"d{i}", 0, 0.99 - i * 0.01) for i in range(40)]
    search = FakeSearch(rows)
    config = LookupConfig(
        retrieval=RetrievalSettings(retrieve_k=20, return_n=5),
        late_materialisation=False,
        projection=ProjectionBudgets(max_blocks=50, max_total_chars=100_000),
    )
    result = make(search, config).lookup.execute("q", session_id="s")
    assert search.requests[0].top_k == 20
    assert len(result.evidence_blocks) == 5
    assert result.retrieval_trace["counts"]["candidates"] == 20


# Requirement: Agent projection SHALL preserve distinct chunk evidence


def test_same_source_different_evidence_keys_both_project() -> None:
    a = chunk("a", 0, 0.9, source="shared/path.md")
    b = chunk("b", 0, 0.8, source="shared/path.md")
    out = blocks(FakeSearch([a, b]))
    assert [x["document_id"] for x in out] == ["a#chunk-0", "b#chunk-0"]
    assert {x["source"] for x in out} == {"shared/path.md"}


def test_projected_document_id_is_chunk_scoped() -> None:
    out = blocks(FakeSearch([chunk("docA", 2, 0.9, source="docs/docA.md")]))
    assert out[0]["document_id"] == "docA#chunk-2"
    assert out[0]["source"] == "docs/docA.md"


# Requirement: Lookup pipeline SHALL call a KnowledgeSearchPort boundary


def test_default_dense_adapter() -> None:
    search = FakeSearch([chunk("d", 1, 0.9)])
    embedder = FakeEmbedder()
    use_case = make_lookup(search, embedder=embedder).lookup  # the default LookupConfig
    result = use_case.execute("what is d", session_id="s")
    request = search.requests[0]
    assert request.mode is SearchMode.DENSE
    assert request.query_vector is not None
    assert embedder.queries == ["what is d"]
    assert result.found
    assert result.evidence_blocks[0].document_id == "d#chunk-1"
    assert "dense" in result.evidence_blocks[0].hit_reasons
