from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lookup_knowledge.domain.errors import ConfigurationError
from lookup_knowledge.domain.quality import (
    CompletenessHint,
    QualityThresholds,
    RelevanceLevel,
    completeness_hint,
    quality_score,
    relevance_level,
)
from lookup_knowledge.domain.settings import RetrievalSettings


def test_relevance_levels() -> None:
    assert relevance_level([]) is RelevanceLevel.NONE
    assert relevance_level([0.3, 0.61]) is RelevanceLevel.HIGH
    assert relevance_level([0.45]) is RelevanceLevel.MEDIUM
    assert relevance_level([0.25]) is RelevanceLevel.LOW
    assert relevance_level([0.5], QualityThresholds(medium=0.1, high=0.5)) is RelevanceLevel.HIGH


def test_completeness_hints() -> None:
    assert completeness_hint(0, 0, 0) is CompletenessHint.NONE
    assert completeness_hint(3, 2, 1) is CompletenessHint.TRUNCATED
    assert completeness_hint(1, 1, 0) is CompletenessHint.NARROW
    assert completeness_hint(3, 1, 0) is CompletenessHint.NARROW
    assert completeness_hint(3, 2, 0) is CompletenessHint.ADEQUATE


def test_quality_score_formula() -> None:
    assert quality_score([], 5) == 0.0
    assert quality_score([0.8, 0.4], 4) == pytest.approx(0.5 * 0.8 + 0.3 * 0.6 + 0.2 * 0.5)


@given(st.lists(st.floats(0, 1), max_size=20), st.integers(1, 50))
def test_quality_score_in_unit_interval(rels: list[float], n: int) -> None:
    assert 0.0 <= quality_score(rels, n) <= 1.0


def test_threshold_validation() -> None:
    with pytest.raises(ValueError):
        QualityThresholds(medium=0.7, high=0.6)


# ------------------------------------------------------------------ retrieval settings


def test_defaults() -> None:
    s = RetrievalSettings.resolve()
    assert (s.retrieve_k, s.return_n, s.max_chunks_per_document) == (20, 5, 2)


def test_legacy_top_k_is_used_for_both_only_when_neither_new_key_is_set() -> None:
    assert RetrievalSettings.resolve(top_k=8).retrieve_k == 8
    assert RetrievalSettings.resolve(top_k=8).return_n == 8
    explicit = RetrievalSettings.resolve(top_k=8, retrieve_k=30)
    assert (explicit.retrieve_k, explicit.return_n) == (30, 5)
    explicit = RetrievalSettings.resolve(top_k=8, return_n=3)
    assert (explicit.retrieve_k, explicit.return_n) == (20, 3)


def test_a_lone_key_pulls_the_other_into_range() -> None:
    assert RetrievalSettings.resolve(retrieve_k=3).return_n == 3
    assert RetrievalSettings.resolve(return_n=50).retrieve_k == 50


def test_zero_cap_means_off() -> None:
    assert RetrievalSettings.resolve(max_chunks_per_document=0).max_chunks_per_document is None


@pytest.mark.parametrize(
    ("kwargs", "key"),
    [
        ({"retrieve_k": 5, "return_n": 6}, "rag.return-n"),
        ({"retrieve_k": 0}, "rag.retrieve-k"),
        ({"retrieve_k": 100_000}, "rag.retrieve-k"),
        ({"return_n": -1}, "rag.return-n"),
        ({"top_k": 0}, "rag.top-k"),
        ({"max_chunks_per_document": -2}, "rag.max-chunks-per-document"),
        ({"min_relevance": 1.5}, "rag.min-relevance"),
        ({"retrieve_k": 2.5}, "rag.retrieve-k"),
        ({"retrieve_k": True}, "rag.retrieve-k"),
    ],
)
def test_invalid_settings_name_the_key(kwargs: dict[str, object], key: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        RetrievalSettings.resolve(**kwargs)  # type: ignore[arg-type]
    assert info.value.key == key
    assert key in str(info.value)
