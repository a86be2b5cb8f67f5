"""The ``agent`` profile's blocks: each document's provenance said once, and the reading
rule (``expand_agent_blocks``) that gives every block back what it stands for."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from lookup_knowledge.domain.projection import (
    PROVENANCE,
    ProjectedBlock,
    agent_blocks,
    document_of,
    expand_agent_blocks,
    source_spelled,
)


def projected(
    document_id: str, *, source: str = "", title: str = "", breadcrumb: str = "", rank: int = 1
) -> ProjectedBlock:
    return ProjectedBlock(
        document_id=document_id,
        source=source,
        title=title,
        breadcrumb=breadcrumb,
        content=f"text of {document_id}",
        score=0.5,
        relevance=0.5,
        rank=rank,
        hit_reasons=("dense",),
        truncated=False,
    )


def test_a_later_block_of_the_same_document_and_section_names_no_provenance() -> None:
    crumb = "Runbook > Example: INC-1"
    blocks = [
        projected("kb/runbook.md#chunk-23", title="Runbook", breadcrumb=crumb),
        projected("kb/faq.md#chunk-1", title="FAQ", breadcrumb="FAQ > Errors"),
        projected("kb/runbook.md#chunk-24", title="Runbook", breadcrumb=crumb),
        projected("kb/runbook.md#chunk-2", title="Runbook", breadcrumb="Runbook > Setup"),
        projected("kb/runbook.md#chunk-25", title="Runbook", breadcrumb=crumb),
    ]
    out = agent_blocks(blocks, "dense")
    assert out[0]["breadcrumb"] == crumb
    assert not set(PROVENANCE) & set(out[2])  # as chunk-23 says
    assert out[3]["breadcrumb"] == "Runbook > Setup"  # another section: said
    # The nearest earlier block of its document is chunk-2, not chunk-23: said again.
    assert out[4]["breadcrumb"] == crumb
    assert expand_agent_blocks(out) == [b.as_agent_json("dense") for b in blocks]


def test_a_block_with_no_provenance_after_one_with_some_says_so() -> None:
    blocks = [projected("d#chunk-0", title="T"), projected("d#chunk-1")]
    out = agent_blocks(blocks)
    assert out[1]["title"] == ""  # not "has chunk-0's title"
    assert expand_agent_blocks(out)[1] == blocks[1].as_agent_json()


def test_keys_that_name_no_document_are_never_shortened() -> None:
    blocks = [projected("vector:7", title="T"), projected("vector:7b", title="T")]
    assert all(b["title"] == "T" for b in agent_blocks(blocks))
    assert document_of("vector:7") is None
    assert document_of("rank:3") is None
    assert document_of("a#chunk-x") is None
    assert document_of("a#chunk-1#chunk-2") == "a#chunk-1"


def test_the_source_is_left_out_only_when_the_id_says_it() -> None:
    assert source_spelled("database/x.md", "corpus/database/x.md#chunk-3")
    assert source_spelled("scifact/4983", "4983#chunk-0")  # a bare name in front of the id
    assert not source_spelled("https://kb/4983", "4983#chunk-0")  # scheme and host kept
    assert not source_spelled("kb/articles/4983", "4983#chunk-0")  # a path kept
    assert not source_spelled("scifact/4983", "vector:4983")
    assert not source_spelled("scifact/49", "4983#chunk-0")
    assert not source_spelled("/4983", "4983#chunk-0")
    block = projected("4983#chunk-0", source="scifact/4983", title="A claim")
    assert set(block.as_agent_json("dense")) == {"document_id", "title", "content", "score"}


_DOCS = st.sampled_from(["a", "b", "c"])
_LABEL = st.sampled_from(["", "T", "U"])
_CRUMB = st.sampled_from(["", "T", "T > S", "T > R", "U > S"])


@given(
    st.lists(
        st.tuples(
            _DOCS | st.just("vector:1"),
            st.integers(0, 3),
            st.sampled_from(["", "src", "a.md", "other/a"]),
            _LABEL,
            _CRUMB,
        ),
        max_size=8,
    )
)
def test_reading_the_blocks_back_gives_what_each_says_alone(
    rows: list[tuple[str, int, str, str, str]],
) -> None:
    blocks = [
        projected(
            doc if doc.startswith("vector:") else f"{doc}#chunk-{n}",
            source=source,
            title=title,
            breadcrumb=crumb,
            rank=rank,
        )
        for rank, (doc, n, source, title, crumb) in enumerate(rows, 1)
    ]
    out = agent_blocks(blocks, "dense")
    assert [b["document_id"] for b in out] == [b.document_id for b in blocks]
    assert [b["content"] for b in out] == [b.content for b in blocks]
    assert expand_agent_blocks(out) == [b.as_agent_json("dense") for b in blocks]
    # Never more than the blocks alone would say.
    for short, alone in zip(out, blocks, strict=True):
        assert len(str(short)) <= len(str(alone.as_agent_json("dense"))) + len(", 'title': ''")
