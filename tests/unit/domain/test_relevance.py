from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lookup_knowledge.domain.relevance import RelevanceCalibration, ScoreKind, normalise_relevance


@given(score=st.floats(allow_nan=True, allow_infinity=True), kind=st.sampled_from(ScoreKind))
def test_always_in_unit_interval(score: float, kind: ScoreKind) -> None:
    value = normalise_relevance(score, kind)
    assert 0.0 <= value <= 1.0
    assert not math.isnan(value)


@given(a=st.floats(-1, 1), b=st.floats(-1, 1))
def test_similarities_are_monotone(a: float, b: float) -> None:
    if a <= b:
        assert normalise_relevance(a, ScoreKind.COSINE) <= normalise_relevance(b, ScoreKind.COSINE)


@given(a=st.floats(0, 1e6), b=st.floats(0, 1e6))
def test_distance_is_antitone(a: float, b: float) -> None:
    if a <= b:
        assert normalise_relevance(a, ScoreKind.L2) >= normalise_relevance(b, ScoreKind.L2)


@given(s=st.floats(0, 1e6))
def test_bm25_ignores_the_sign_engines_use(s: float) -> None:
    assert normalise_relevance(s, ScoreKind.BM25) == normalise_relevance(-s, ScoreKind.BM25)


def test_reference_values() -> None:
    assert normalise_relevance(0.7, ScoreKind.COSINE) == pytest.approx(0.7)
    assert normalise_relevance(-0.3, ScoreKind.COSINE) == 0.0
    assert normalise_relevance(0.0, ScoreKind.L2) == 1.0
    assert normalise_relevance(1.0, ScoreKind.L2) == pytest.approx(0.5)
    assert normalise_relevance(-10.0, ScoreKind.BM25) == pytest.approx(0.5)
    cal = RelevanceCalibration(rrf_k=60, rrf_lists=2)
    assert normalise_relevance(2 / 61, ScoreKind.RRF, cal) == pytest.approx(1.0)
    assert normalise_relevance(1 / 61, ScoreKind.RRF, cal) == pytest.approx(0.5)


def test_the_same_hit_gets_the_same_relevance_in_any_pass() -> None:
    # absolute, not min-max: a hit's relevance does not depend on its neighbours
    assert normalise_relevance(0.42, ScoreKind.COSINE) == normalise_relevance(
        0.42, ScoreKind.COSINE
    )


@pytest.mark.parametrize(
    "kwargs",
    [{"bm25_saturation": 0}, {"bm25_saturation": float("inf")}, {"rrf_k": -1}, {"rrf_lists": 0}],
)
def test_calibration_validates(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        RelevanceCalibration(**kwargs)  # type: ignore[arg-type]
