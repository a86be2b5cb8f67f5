"""The two payload profiles of the tool JSON: ``agent`` (lean, cites only what it returns)
and ``full`` (every trace, for debugging)."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lookup_knowledge.application.lookup import LookupConfig, PayloadProfile
from lookup_knowledge.domain.projection import ProjectedBlock, ProjectionBudgets
from lookup_knowledge.domain.settings import RetrievalSettings
from tests.fakes import FakeSearch, chunk, make_lookup
from tests.support.payload import assert_names_only_returned_blocks, ids_named

#: Three documents with four chunks each: the cap (2) and return-n (3) drop some.
ROWS = [
    chunk(doc, i, 0.9 - 0.05 * n - 0.01 * i, content=f"{doc} chunk {i} says {'x' * 300}")
    for n, doc in enumerate(["alpha", "beta", "gamma"])
    for i in range(4)
]
CONFIG = LookupConfig(retrieval=RetrievalSettings(retrieve_k=12, return_n=3))


def lookup(config: LookupConfig = CONFIG, rows: list = ROWS):  # type: ignore[type-arg]
    return make_lookup(FakeSearch(rows), config=config).lookup.execute("x", session_id="s")


def test_agent_payload_names_no_id_it_does_not_return() -> None:
    result = lookup()
    full = result.to_tool_json(PayloadProfile.FULL)
    agent = result.to_tool_json()
    returned = {b["document_id"] for b in agent["evidenceBlocks"]}
    assert len(returned) == 3
    assert ids_named(full) - returned  # the full payload does name capped/truncated ids
    assert_names_only_returned_blocks(agent)


def test_agent_payload_carries_each_excerpt_once() -> None:
    agent = lookup().to_tool_json()
    text = json.dumps(agent, ensure_ascii=False)
    for block in agent["evidenceBlocks"]:
        assert text.count(block["content"]) == 1
    pack = agent["contextPack"]
    # Every block is in the pack whole: the pack has nothing to say (its budget and use
    # are in the full profile).
    assert pack == {}
    full = lookup().to_tool_json(PayloadProfile.FULL)["contextPack"]
    assert {"charBudget", "charsUsed"} <= set(full)


@pytest.mark.parametrize(("excerpt_chars", "budget"), [(100, 4000), (1200, 500), (60, 150)])
def test_the_pack_shows_only_what_the_blocks_show(excerpt_chars: int, budget: int) -> None:
    """The pack is made of the blocks' projected excerpts, so the agent profile can send
    it by reference: each packed excerpt is a prefix of its block's content."""
    config = replace(
        CONFIG,
        projection=ProjectionBudgets(max_excerpt_chars=excerpt_chars, min_excerpt_chars=20),
        context_char_budget=budget,
        context_min_excerpt_chars=20,
    )
    result = lookup(config)
    assert result.context_pack is not None
    assert result.context_pack.included
    contents = {b.document_id: b.content for b in result.evidence_blocks}
    for packed in result.context_pack.included:
        assert contents[packed.evidence_key].startswith(packed.excerpt.removesuffix("…"))
    pack = result.to_tool_json()["contextPack"]
    held = {p.evidence_key: len(p.excerpt.removesuffix("…")) for p in result.context_pack.included}
    partial = {
        str(b.rank): held.get(b.document_id, 0)
        for b in result.evidence_blocks
        if held.get(b.document_id, 0) != len(b.content.removesuffix("…"))
    }
    assert pack.get("partial", {}) == partial
    left_out = {o.evidence_key for o in result.context_pack.omitted}
    ranks = {str(b.rank) for b in result.evidence_blocks if b.document_id in left_out}
    assert set(pack.get("omitted", {})) == ranks
    assert ranks <= {r for r, chars in partial.items() if chars == 0}


def test_agent_traces_are_compact_and_full_keeps_everything() -> None:
    result = lookup()
    agent, full = result.to_tool_json(), result.to_tool_json(PayloadProfile.FULL)
    # No filter and no fallback: those keys are absent, not null.
    assert set(agent["retrievalTrace"]) == {"mode", "counts"}
    # Every returned block is shown: evidenceBlocks says how many, the counts do not.
    assert set(agent["retrievalTrace"]["counts"]) == {"candidates", "afterCap"}
    assert full["retrievalTrace"]["counts"]["returned"] == 3
    assert "passes" in full["retrievalTrace"]
    assert "timingsMs" in full["retrievalTrace"]
    assert len(full["rerankTrace"]) == len(ROWS)
    shown = set(range(1, len(agent["evidenceBlocks"]) + 1))
    assert {rank for r in agent["rerankTrace"] for rank in r["ranks"]} <= shown
    assert len(json.dumps(agent)) < len(json.dumps(full)) / 2


def test_the_configured_profile_is_the_default_and_the_audit_keeps_the_full_traces() -> None:
    fixture = make_lookup(
        FakeSearch(ROWS), config=replace(CONFIG, payload_profile=PayloadProfile.FULL)
    )
    result = fixture.lookup.execute("x", session_id="s")
    assert "passes" in result.to_tool_json()["retrievalTrace"]
    lean = make_lookup(FakeSearch(ROWS), config=CONFIG)
    lean.lookup.execute("x", session_id="s")
    (record,) = lean.records
    assert len(record.retrieval_details["rerankTrace"]) == len(ROWS)  # type: ignore[arg-type]


def test_the_pack_holds_only_projected_blocks() -> None:
    # Projection keeps 2 blocks of 3 returned: the pack must not show the third.
    config = replace(CONFIG, projection=ProjectionBudgets(max_blocks=2))
    result = lookup(config)
    assert result.context_pack is not None
    assert set(result.context_pack.included_keys) <= {b.document_id for b in result.evidence_blocks}
    agent = result.to_tool_json()
    assert_names_only_returned_blocks(agent)
    # Fewer shown than returned: the counts say so (the list alone cannot).
    assert agent["retrievalTrace"]["counts"]["returned"] == 3
    assert agent["retrievalTrace"]["counts"]["projected"] == 2


@settings(max_examples=60, deadline=None)
@given(
    docs=st.lists(
        st.tuples(
            st.sampled_from(["a", "b", "c", "d", None]),
            st.integers(min_value=0, max_value=5) | st.none(),
            st.floats(min_value=0.0, max_value=1.0),
            st.sampled_from(["v1", "v2", "v3", None]),
        ),
        max_size=15,
    ),
    return_n=st.integers(min_value=1, max_value=6),
    cap=st.integers(min_value=1, max_value=3),
    max_blocks=st.integers(min_value=1, max_value=6),
    budget=st.integers(min_value=50, max_value=3000),
)
def test_agent_payload_never_names_an_id_it_does_not_return(
    docs: list[tuple[str | None, int | None, float, str | None]],
    return_n: int,
    cap: int,
    max_blocks: int,
    budget: int,
) -> None:
    rows = [
        chunk(doc, index, score, content=f"text {n} " * 20, vector_id=vid)
        for n, (doc, index, score, vid) in enumerate(docs)
    ]
    config = LookupConfig(
        retrieval=RetrievalSettings(
            retrieve_k=20, return_n=return_n, max_chunks_per_document=cap, min_relevance=0.0
        ),
        projection=ProjectionBudgets(max_blocks=max_blocks),
        context_char_budget=budget,
    )
    assert_names_only_returned_blocks(lookup(config, rows).to_tool_json())


def test_agent_rerank_trace_names_returned_blocks_by_rank_with_their_bonuses() -> None:
    rows = [chunk("pg", i, 0.8 - 0.1 * i, category="database") for i in range(3)]
    fixture = make_lookup(FakeSearch(rows), domains={"database": ["postgres"]}, config=CONFIG)
    result = fixture.lookup.execute("postgres failover", session_id="s")
    agent = result.to_tool_json()
    assert [b.rank for b in result.evidence_blocks] == list(
        range(1, len(result.evidence_blocks) + 1)
    )
    ranks = set(range(1, len(agent["evidenceBlocks"]) + 1))  # rank = position in the list
    assert agent["rerankTrace"]
    for entry in agent["rerankTrace"]:
        assert set(entry["ranks"]) <= ranks
        assert entry["rule"] != "relevance"
        assert entry["bonus"] != 0
    # Each (rule, bonus) once: grouped, and it is what the full trace says per block.
    assert len({(e["rule"], e["bonus"]) for e in agent["rerankTrace"]}) == len(agent["rerankTrace"])
    full = {e["document_id"]: e for e in result.to_tool_json(PayloadProfile.FULL)["rerankTrace"]}
    for entry in agent["rerankTrace"]:
        for rank in entry["ranks"]:
            adjustments = full[result.evidence_blocks[rank - 1].document_id]["adjustments"]
            assert any(
                a["rule"] == entry["rule"] and round(a["contribution"], 3) == entry["bonus"]
                for a in adjustments
            )


def _block(**fields: object) -> ProjectedBlock:
    base: dict[str, object] = {
        "document_id": "docs/guide.md#chunk-2",
        "source": "guide.md",
        "title": "Guide",
        "breadcrumb": "Guide > Setup",
        "content": "text",
        "score": 0.5,
        "relevance": 0.5,
        "rank": 1,
        "hit_reasons": ("dense",),
        "truncated": False,
    }
    base.update(fields)
    return ProjectedBlock(**base)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("fields", "shown"),
    [
        # The id spells the source and the breadcrumb starts with the title: each once.
        ({}, {"document_id", "breadcrumb", "content", "score"}),
        # A source the id does not spell, a title the breadcrumb does not start with.
        (
            {"source": "elsewhere.md", "breadcrumb": "Setup > Step 1"},
            {"document_id", "source", "title", "breadcrumb", "content", "score"},
        ),
        # No breadcrumb: the title stands alone.
        ({"breadcrumb": ""}, {"document_id", "title", "content", "score"}),
        # Reasons beyond the mode are shown.
        (
            {"hit_reasons": ("dense", "entity")},
            {"document_id", "breadcrumb", "content", "score", "hitReasons"},
        ),
    ],
)
def test_an_agent_block_says_each_fact_once(fields: dict[str, object], shown: set[str]) -> None:
    block = _block(**fields)
    agent = block.as_agent_json("dense")
    assert set(agent) == shown
    full = block.as_json()
    # Nothing is lost: what is left out is spelled by what is kept.
    assert block.source in agent["document_id"] or agent.get("source") == block.source
    assert str(agent.get("breadcrumb", "")).startswith(block.title) or agent["title"] == block.title
    assert full["rank"] == 1
    assert full["source"] == block.source
