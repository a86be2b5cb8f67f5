"""A reranker's score on the calibrated scale: the pooled relevance is a probability,
monotone in the calibrated relevance and in the reranker's evidence, and the weight moves
it from the one to the other."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lookup_knowledge.domain.reranking import (
    RerankerSettings,
    pooled_relevance,
    reranker_evidence,
)

probability = st.floats(min_value=0.0, max_value=1.0)
weight = st.floats(min_value=0.0, max_value=1.0)


@given(probability, probability, weight)
def test_pooled_relevance_is_a_probability(calibrated: float, evidence: float, w: float) -> None:
    assert 0.0 <= pooled_relevance(calibrated, evidence, w) <= 1.0


@given(probability, probability, probability, weight)
def test_more_reranker_evidence_never_lowers_relevance(
    calibrated: float, a: float, b: float, w: float
) -> None:
    low, high = sorted((a, b))
    assert pooled_relevance(calibrated, low, w) <= pooled_relevance(calibrated, high, w) + 1e-12


@given(probability, probability, probability, weight)
def test_more_calibrated_evidence_never_lowers_relevance(
    evidence: float, a: float, b: float, w: float
) -> None:
    low, high = sorted((a, b))
    assert pooled_relevance(low, evidence, w) <= pooled_relevance(high, evidence, w) + 1e-12


@given(probability, probability)
def test_weight_zero_keeps_the_calibrated_relevance(calibrated: float, evidence: float) -> None:
    assert pooled_relevance(calibrated, evidence, 0.0) == calibrated


@given(st.floats(min_value=1e-4, max_value=1 - 1e-4), probability)
def test_weight_one_trusts_the_reranker_alone(evidence: float, calibrated: float) -> None:
    assert pooled_relevance(calibrated, evidence, 1.0) == pytest.approx(evidence, abs=1e-9)


@given(st.floats(allow_nan=False), st.floats(allow_nan=False))
def test_logits_map_monotonically_into_the_unit_interval(a: float, b: float) -> None:
    low, high = sorted((a, b))
    assert 0.0 <= reranker_evidence(low, logits=True) <= reranker_evidence(high, logits=True) <= 1


def test_probabilities_are_read_as_they_are_and_nan_is_no_evidence() -> None:
    assert reranker_evidence(0.73, logits=False) == 0.73
    assert reranker_evidence(1.0000001, logits=False) == 1.0
    assert reranker_evidence(-0.1, logits=False) == 0.0
    assert reranker_evidence(math.nan, logits=True) == 0.0
    assert reranker_evidence(0.0, logits=True) == 0.5


@pytest.mark.parametrize("options", [{"top_k": 0}, {"weight": 1.5}, {"weight": math.nan}])
def test_reranker_settings_refuse_what_has_no_meaning(options: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="reranker"):
        RerankerSettings(provider="tei", **options)  # type: ignore[arg-type]


def test_the_reranker_is_off_unless_a_provider_is_named() -> None:
    assert not RerankerSettings().enabled
    assert RerankerSettings(provider="tei").enabled
