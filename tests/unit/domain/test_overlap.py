"""Jaccard overlap and rank-biased overlap: worked values and properties."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lookup_knowledge.domain.overlap import jaccard, rank_biased_overlap

rankings = st.lists(st.integers(min_value=0, max_value=40), max_size=25, unique=True)
persistence = st.floats(min_value=0.05, max_value=0.95)


def reference_rbo(a: list[int], b: list[int], p: float) -> float:
    """The definition, term by term: sum_d (1-p) p^(d-1) |a[:d] & b[:d]| / d over
    d = 1..k, divided by 1 - p^k (k = the longer length)."""
    k = max(len(a), len(b))
    total = sum((1 - p) * p ** (d - 1) * len(set(a[:d]) & set(b[:d])) / d for d in range(1, k + 1))
    return total / (1 - p**k)


# --------------------------------------------------------------------------- worked values


def test_jaccard_values() -> None:
    assert jaccard(["a", "b"], ["b", "c"]) == pytest.approx(1 / 3)
    assert jaccard([], []) == 1.0
    assert jaccard(["a"], []) == 0.0
    assert jaccard(["a", "a", "b"], ["b", "a"]) == 1.0


def test_rbo_of_a_swapped_pair() -> None:
    # depth 1 agrees 0, depth 2 agrees 1: (0.1 * 0 + 0.09 * 1) / (1 - 0.81)
    assert rank_biased_overlap(["x", "y"], ["y", "x"], 0.9) == pytest.approx(0.09 / 0.19)


def test_rbo_counts_a_truncated_list_as_a_change() -> None:
    full = list(range(20))
    cut = full[:4]
    value = rank_biased_overlap(cut, full, 0.9)
    assert value == pytest.approx(reference_rbo(cut, full, 0.9))
    assert 0.6 < value < 0.7
    assert jaccard(cut, full) == pytest.approx(0.2)


def test_rbo_weighs_the_top_more_than_the_tail() -> None:
    base = list(range(10))
    top_swapped = [1, 0, *base[2:]]
    tail_swapped = [*base[:8], 9, 8]
    assert rank_biased_overlap(base, top_swapped) < rank_biased_overlap(base, tail_swapped)


def test_rbo_edge_cases() -> None:
    assert rank_biased_overlap([], []) == 1.0
    assert rank_biased_overlap(["a"], []) == 0.0
    assert rank_biased_overlap(["a", "a", "b"], ["a", "b"]) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="p must be"):
        rank_biased_overlap(["a"], ["a"], 1.0)
    with pytest.raises(ValueError, match="p must be"):
        rank_biased_overlap(["a"], ["a"], 0.0)


# --------------------------------------------------------------------------- properties


@given(rankings, rankings, persistence)
def test_rbo_matches_its_definition(a: list[int], b: list[int], p: float) -> None:
    value = rank_biased_overlap(a, b, p)
    if not a and not b:
        assert value == 1.0
    elif not a or not b:
        assert value == 0.0
    else:
        assert value == pytest.approx(reference_rbo(a, b, p), abs=1e-9)


@given(rankings, rankings, persistence)
def test_rbo_is_symmetric_and_bounded(a: list[int], b: list[int], p: float) -> None:
    forward = rank_biased_overlap(a, b, p)
    assert 0.0 <= forward <= 1.0
    assert math.isclose(forward, rank_biased_overlap(b, a, p), abs_tol=1e-12)


@given(rankings, persistence)
def test_rbo_of_identical_lists_is_one(a: list[int], p: float) -> None:
    assert rank_biased_overlap(a, list(a), p) == pytest.approx(1.0)


@given(rankings, rankings, persistence)
def test_rbo_of_disjoint_lists_is_zero(a: list[int], b: list[int], p: float) -> None:
    shifted = [x + 100 for x in b]
    if a or shifted:
        assert rank_biased_overlap(a, shifted, p) == 0.0


@given(rankings, rankings)
def test_jaccard_is_symmetric_bounded_and_one_only_for_equal_sets(
    a: list[int], b: list[int]
) -> None:
    value = jaccard(a, b)
    assert value == jaccard(b, a)
    assert 0.0 <= value <= 1.0
    assert (value == 1.0) == (set(a) == set(b))


@given(rankings, rankings)
def test_identical_sets_in_another_order_keep_jaccard_but_not_always_rbo(
    a: list[int], b: list[int]
) -> None:
    reordered = list(reversed(a))
    assert jaccard(a, reordered) == 1.0
    if len(a) >= 2:
        assert rank_biased_overlap(a, reordered) < 1.0
