"""Token-bounded embed batches: a partition of the texts, in order, within both bounds."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lookup_knowledge.domain.batching import token_bounded_batches

lengths_st = st.lists(st.integers(min_value=1, max_value=600), max_size=200)


@given(lengths_st, st.integers(1, 64), st.integers(1, 8192), st.booleans())
def test_batches_partition_the_texts_in_order_within_both_bounds(
    lengths: list[int], max_count: int, max_tokens: int, sort: bool
) -> None:
    if sort:
        lengths = sorted(lengths)
    batches = token_bounded_batches(lengths, max_count=max_count, max_tokens=max_tokens)
    assert [i for batch in batches for i in batch] == list(range(len(lengths)))
    for batch in batches:
        assert 1 <= len(batch) <= max_count
        padded = len(batch) * max(lengths[i] for i in batch)
        assert padded <= max_tokens or len(batch) == 1


@given(st.lists(st.integers(1, 600), min_size=1, max_size=200), st.integers(1, 64))
def test_sorted_batches_are_as_full_as_the_budget_allows(
    lengths: list[int], max_count: int
) -> None:
    """Greedy on sorted lengths: adding the next text to a batch would break a bound."""
    lengths = sorted(lengths)
    max_tokens = 2048
    batches = token_bounded_batches(lengths, max_count=max_count, max_tokens=max_tokens)
    for batch, following in itertools.pairwise(batches):
        grown = [*batch, following[0]]
        assert len(grown) > max_count or len(grown) * lengths[grown[-1]] > max_tokens


def test_short_texts_share_a_batch_and_long_ones_split() -> None:
    assert token_bounded_batches([10] * 6 + [256] * 3, max_count=32, max_tokens=512) == [
        [0, 1, 2, 3, 4, 5],
        [6, 7],
        [8],
    ]


def test_a_text_over_the_budget_is_a_batch_of_its_own() -> None:
    assert token_bounded_batches([5, 900, 900], max_count=8, max_tokens=256) == [[0], [1], [2]]


@pytest.mark.parametrize(("count", "tokens"), [(0, 10), (1, 0)])
def test_bounds_below_one_are_refused(count: int, tokens: int) -> None:
    with pytest.raises(ValueError, match="must be >= 1"):
        token_bounded_batches([1], max_count=count, max_tokens=tokens)
