"""Context packing and agent projection: examples and budget invariants."""

from __future__ import annotations

from hypothesis import example, given
from hypothesis import strategies as st

from lookup_knowledge.domain.identity import EvidenceIdentity
from lookup_knowledge.domain.model import EvidenceCandidate, RankedCandidate
from lookup_knowledge.domain.packing import OmissionReason, pack_context
from lookup_knowledge.domain.postprocess import dedup_by_evidence_key
from lookup_knowledge.domain.projection import (
    BREADCRUMB_SEPARATOR,
    ProjectionBudgets,
    agent_breadcrumb,
    project_blocks,
)
from lookup_knowledge.domain.relevance import ScoreKind
from tests.unit.domain.strategies import ranked_candidates


def block(key: str, content: str | None, rank: int = 1, **kw: str) -> RankedCandidate:
    doc, _, idx = key.partition("#chunk-")
    candidate = EvidenceCandidate(
        identity=EvidenceIdentity(key, doc, int(idx) if idx else None),
        original_rank=rank,
        raw_score=0.5,
        score_kind=ScoreKind.COSINE,
        relevance=0.5,
        content=content,
        source=kw.get("source", f"{doc}.md"),
        title=kw.get("title", f"T {doc}"),
        breadcrumb=kw.get("breadcrumb", "Guide > Setup"),
    )
    return RankedCandidate(candidate, 0.5)


def test_pack_keeps_title_breadcrumb_source_visible_in_rerank_order() -> None:
    pack = pack_context([block("a#chunk-0", "alpha text"), block("b#chunk-1", "beta text")], 1000)
    assert pack.text.index("alpha") < pack.text.index("beta")
    assert "T a › Guide > Setup" in pack.text
    assert "source: a.md | document_id: a#chunk-0" in pack.text
    assert pack.included_keys == ("a#chunk-0", "b#chunk-1")
    assert pack.omitted == ()


def test_pack_omits_duplicate_content_and_says_why() -> None:
    pack = pack_context(
        [
            block("a#chunk-0", "Same  Text"),
            block("b#chunk-0", "same text"),
            block("c#chunk-0", "other"),
        ],
        1000,
    )
    assert pack.included_keys == ("a#chunk-0", "c#chunk-0")
    assert [(o.evidence_key, o.reason) for o in pack.omitted] == [
        ("b#chunk-0", OmissionReason.DUPLICATE_CONTENT)
    ]


def test_pack_truncates_then_omits_for_budget() -> None:
    pack = pack_context(
        [
            block("a#chunk-0", "x" * 500),
            block("b#chunk-0", "y" * 500),
            block("c#chunk-0", "z" * 500),
        ],
        800,
        min_excerpt_chars=80,
    )
    assert pack.included[0].truncated is False
    assert pack.included[1].truncated is True
    assert pack.included[1].excerpt.endswith("…")
    assert [(o.evidence_key, o.reason.value) for o in pack.omitted] == [
        ("c#chunk-0", "char_budget")
    ]
    assert pack.chars_used <= 800
    summary = pack.summary()
    assert summary["omitted"] == [{"document_id": "c#chunk-0", "rank": 3, "reason": "char_budget"}]


def test_pack_omits_blocks_without_content() -> None:
    pack = pack_context([block("a#chunk-0", None), block("b#chunk-0", "  ")], 100)
    assert {o.reason for o in pack.omitted} == {OmissionReason.NO_CONTENT}


@given(
    ranked_candidates(),
    st.integers(min_value=1, max_value=3000),
    st.integers(min_value=1, max_value=200),
)
def test_pack_invariants(items: list[RankedCandidate], budget: int, min_excerpt: int) -> None:
    blocks = dedup_by_evidence_key(items).kept
    pack = pack_context(blocks, budget, min_excerpt)
    assert len(pack.text) <= budget
    keys = [b.evidence_key for b in pack.included]
    assert len(keys) == len(set(keys))
    order = [b.evidence_key for b in blocks]
    assert [order.index(k) for k in keys] == sorted(order.index(k) for k in keys)
    assert len(pack.included) + len(pack.omitted) == len(blocks)
    for packed in pack.included:
        assert packed.header in pack.text  # header is never cut
        assert f"document_id: {packed.evidence_key}" in packed.header


def test_projection_budgets() -> None:
    blocks = [block(f"d{i}#chunk-0", "y" * 1000, rank=i + 1) for i in range(5)]
    out = project_blocks(
        blocks,
        ProjectionBudgets(
            max_blocks=4, max_excerpt_chars=600, max_total_chars=1500, min_excerpt_chars=100
        ),
    )
    assert [p.document_id for p in out] == ["d0#chunk-0", "d1#chunk-0", "d2#chunk-0"]
    assert [len(p.content) for p in out] == [600, 600, 300]
    assert all(p.truncated for p in out)
    assert [p.rank for p in out] == [1, 2, 3]


def test_projection_keeps_same_source_distinct_keys_and_drops_repeated_keys() -> None:
    a = block("a#chunk-0", "one", source="s.md")
    b = block("a#chunk-1", "two", source="s.md")
    out = project_blocks([a, b, a], ProjectionBudgets())
    assert [p.document_id for p in out] == ["a#chunk-0", "a#chunk-1"]
    assert out[0].as_json()["document_id"] == "a#chunk-0"


@given(
    ranked_candidates(),
    st.integers(1, 8),
    st.integers(1, 500),
    st.integers(1, 2000),
    st.integers(1, 100),
)
def test_projection_invariants(
    items: list[RankedCandidate], max_blocks: int, max_excerpt: int, max_total: int, min_ex: int
) -> None:
    budgets = ProjectionBudgets(max_blocks, max_excerpt, max_total, min_ex)
    out = project_blocks(items, budgets)
    ids = [p.document_id for p in out]
    assert len(ids) == len(set(ids)), "no two blocks share a document_id"
    assert len(out) <= max_blocks
    assert all(len(p.content) <= max_excerpt for p in out)
    assert sum(len(p.content) for p in out) <= max_total
    order = [r.evidence_key for r in items]
    assert [order.index(i) for i in ids] == sorted(order.index(i) for i in ids)


def test_the_agent_breadcrumb_drops_the_headings_the_excerpt_opens_with() -> None:
    crumb = "Guide > Connection errors > PG-53300"
    assert agent_breadcrumb(crumb, "## Connection errors\n\n### PG-53300\n\ntext") == "Guide"
    assert agent_breadcrumb(crumb, "### PG-53300\ntext") == "Guide > Connection errors"
    assert agent_breadcrumb(crumb, "- a list item") == crumb  # no opening heading
    assert agent_breadcrumb(crumb, "## PG-53300 (old)\ntext") == crumb  # not the same words
    assert agent_breadcrumb("Guide", "# Guide\ntext") == "Guide"  # the title always stays
    assert agent_breadcrumb(crumb, "### PG-53300 ###\ntext") == "Guide > Connection errors"


def test_a_hash_glued_to_a_heading_is_its_text_not_a_closing_sequence() -> None:
    assert agent_breadcrumb("Languages > C", "## C#\ntext") == "Languages > C"
    assert agent_breadcrumb("Languages > C#", "## C#\ntext") == "Languages"
    assert agent_breadcrumb("Guide > >>", "# >>#\n\n") == "Guide > >>"


_HEADINGS = st.text(alphabet="abc >#", min_size=1, max_size=6).map(str.strip).filter(bool)


@example(parts=[">", ">>"], opening=[">>#"], body="")  # "# >>#" is the heading ">>#"
@given(
    parts=st.lists(_HEADINGS, min_size=1, max_size=5),
    opening=st.lists(_HEADINGS, max_size=4),
    body=st.text(max_size=30),
)
def test_the_agent_breadcrumb_only_ever_drops_a_tail_the_content_opens_with(
    parts: list[str], opening: list[str], body: str
) -> None:
    crumb = BREADCRUMB_SEPARATOR.join(parts)
    content = "".join(f"{'#' * (1 + n % 3)} {h}\n\n" for n, h in enumerate(opening)) + body
    shown = agent_breadcrumb(crumb, content)
    # A prefix of the breadcrumb, never shorter than its first element.
    assert crumb.startswith(shown)
    assert shown.startswith(crumb.split(BREADCRUMB_SEPARATOR)[0])
    dropped = crumb[len(shown) :].removeprefix(BREADCRUMB_SEPARATOR)
    if dropped:
        # What was dropped is said, in order, by the headings the content opens with.
        assert content.startswith("#")
        assert all(f" {h}\n" in content for h in dropped.split(BREADCRUMB_SEPARATOR))
