from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lookup_knowledge.domain.fusion import reciprocal_rank_fusion


def test_reference_values() -> None:
    fused = reciprocal_rank_fusion([["a", "b", "c"], ["b", "d"]], k=60)
    assert [f.key for f in fused] == ["b", "a", "d", "c"]
    assert fused[0].score == pytest.approx(1 / 62 + 1 / 61)
    assert fused[0].ranks == (2, 1)
    assert fused[2].ranks == (None, 2)


def test_weights_scale_each_list() -> None:
    fused = reciprocal_rank_fusion([["a"], ["b"]], k=0, weights=[1.0, 3.0])
    assert [(f.key, f.score) for f in fused] == [("b", 3.0), ("a", 1.0)]


@given(
    st.lists(st.lists(st.sampled_from("abcdefgh"), max_size=8), min_size=1, max_size=3),
    st.integers(0, 100),
)
def test_every_key_once_and_sorted(lists: list[list[str]], k: int) -> None:
    fused = reciprocal_rank_fusion(lists, k=k)
    keys = [f.key for f in fused]
    assert len(keys) == len(set(keys))
    assert set(keys) == {x for lst in lists for x in lst}
    scores = [f.score for f in fused]
    assert scores == sorted(scores, reverse=True)
    assert all(0 < s <= len(lists) / (k + 1) + 1e-12 for s in scores)


def test_validation() -> None:
    with pytest.raises(ValueError, match="k must"):
        reciprocal_rank_fusion([["a"]], k=-1)
    with pytest.raises(ValueError, match="one weight"):
        reciprocal_rank_fusion([["a"]], weights=[1.0, 2.0])


def test_weighted_fusion_is_milvus_weighted_ranker() -> None:
    import math

    from lookup_knowledge.domain.fusion import weighted_score_fusion
    from lookup_knowledge.domain.relevance import ScoreKind

    fused = weighted_score_fusion(
        [["a", "b"], ["b"]],
        [{"a": 0.8, "b": 0.2}, {"b": -7.0}],
        [ScoreKind.COSINE, ScoreKind.BM25],
        [0.6, 0.4],
    )
    expected_b = 0.6 * (1 + 0.2) / 2 + 0.4 * 2 / math.pi * math.atan(7.0)
    assert [k for k, _ in fused] == ["b", "a"]
    assert dict(fused)["b"] == pytest.approx(expected_b)
    assert dict(fused)["a"] == pytest.approx(0.6 * 0.9)


@pytest.mark.parametrize(
    ("k", "weights"), [(-1, None), (60, [1.0]), (60, [-1.0, 2.0]), (60, [0.0, 0.0])]
)
def test_fusion_parameters_are_checked(k: int, weights: list[float] | None) -> None:
    from lookup_knowledge.domain.errors import InvalidInputError
    from lookup_knowledge.domain.fusion import check_fusion_parameters

    with pytest.raises(InvalidInputError):
        check_fusion_parameters(k, weights)
