"""Dedup, cap and truncation: examples and invariants."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lookup_knowledge.domain.model import RankedCandidate
from lookup_knowledge.domain.postprocess import (
    cap_per_document,
    dedup_by_evidence_key,
    sort_by_final_score,
    truncate,
)
from tests.unit.domain.strategies import ranked_candidates


@given(ranked_candidates())
def test_sort_is_by_final_score_then_original_rank(items: list[RankedCandidate]) -> None:
    ordered = sort_by_final_score(items)
    keys = [(-r.final_score, r.candidate.original_rank) for r in ordered]
    assert keys == sorted(keys)


@given(ranked_candidates())
def test_dedup_keeps_one_block_per_key_and_the_first_content(items: list[RankedCandidate]) -> None:
    ordered = sort_by_final_score(items)
    out = dedup_by_evidence_key(ordered)
    keys = [r.evidence_key for r in out.kept]
    assert len(keys) == len(set(keys))
    assert set(keys) == {r.evidence_key for r in ordered}
    first = {}
    for r in ordered:
        first.setdefault(r.evidence_key, r)
    for kept in out.kept:
        winner = first[kept.evidence_key]
        assert kept.candidate.content == winner.candidate.content
        assert kept.final_score == winner.final_score
        # merged reasons are a superset of every duplicate's reasons, winner's first
        reasons = set().union(
            *(r.candidate.hit_reasons for r in ordered if r.evidence_key == kept.evidence_key)
        )
        assert set(kept.candidate.hit_reasons) == reasons
        assert (
            kept.candidate.hit_reasons[: len(winner.candidate.hit_reasons)]
            == winner.candidate.hit_reasons
        )
    assert sum(out.merged.values()) == len(ordered) - len(out.kept)


@given(ranked_candidates(), st.integers(min_value=1, max_value=4))
def test_cap_never_exceeds_n_per_document_and_is_a_subsequence(
    items: list[RankedCandidate], n: int
) -> None:
    ordered = dedup_by_evidence_key(sort_by_final_score(items)).kept
    out = cap_per_document(ordered, n)
    per_doc = Counter(r.doc_id for r in out.kept if r.doc_id is not None)
    assert all(count <= n for count in per_doc.values())
    assert len(out.kept) + len(out.dropped) == len(ordered)
    assert [r.evidence_key for r in out.kept] == [r.evidence_key for r in ordered if r in out.kept]
    # blocks without a docId are never capped (each is its own bucket)
    assert all(r.doc_id is not None for r in out.dropped)
    # what was dropped lost to n higher-ranked blocks of its own document
    for dropped in out.dropped:
        position = ordered.index(dropped)
        same_doc_before = [r for r in ordered[:position] if r.doc_id == dropped.doc_id]
        assert len(same_doc_before) >= n


@given(ranked_candidates())
def test_cap_off_keeps_everything(items: list[RankedCandidate]) -> None:
    assert cap_per_document(items, None).kept == items


@given(ranked_candidates(), st.integers(min_value=1, max_value=10))
def test_chain_output_is_a_subsequence_of_the_score_order(
    items: list[RankedCandidate], n: int
) -> None:
    ordered = sort_by_final_score(items)
    final = truncate(cap_per_document(dedup_by_evidence_key(ordered).kept, 2).kept, n)
    assert len(final) <= n
    scores = [r.final_score for r in final]
    assert scores == sorted(scores, reverse=True)
    keys = [r.evidence_key for r in final]
    assert len(keys) == len(set(keys))


def test_cap_and_truncate_validate() -> None:
    with pytest.raises(ValueError, match="max_per_document"):
        cap_per_document([], 0)
    with pytest.raises(ValueError, match="return_n"):
        truncate([], 0)


def test_group_by_document_keeps_the_first_k_documents_however_short() -> None:
    from lookup_knowledge.domain.postprocess import group_by_document

    ranking = [("a", 1), ("a", 2), ("b", 1), ("a", 3), ("c", 1), ("d", 1), ("c", 2)]
    out = group_by_document(ranking, lambda item: item[0], top_k=3, per_document=2)
    assert out == [("a", 1), ("a", 2), ("b", 1), ("c", 1), ("c", 2)]
    with pytest.raises(ValueError, match="top_k"):
        group_by_document(ranking, lambda item: item[0], top_k=0, per_document=1)


@given(
    st.lists(st.tuples(st.sampled_from("abcde"), st.integers()), max_size=30),
    st.integers(1, 4),
    st.integers(1, 3),
)
def test_group_by_document_invariants(items: list[tuple[str, int]], k: int, n: int) -> None:
    from lookup_knowledge.domain.postprocess import group_by_document

    out = group_by_document(items, lambda item: item[0], top_k=k, per_document=n)
    docs = list(dict.fromkeys(d for d, _ in out))
    assert docs == list(dict.fromkeys(d for d, _ in items))[:k]
    assert all(sum(1 for d, _ in out if d == doc) <= n for doc in docs)
    it = iter(items)
    assert all(any(x == y for y in it) for x in out), "a subsequence of the ranking"
