"""``clean_json``: the fast type checks give what the general rules give, and cleaning
twice changes nothing (the journal line of a cleaned record is not cleaned again)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from lookup_knowledge.adapters.audit.codec import clean_json, clean_text

TEXT = st.text(
    alphabet=st.one_of(
        st.characters(codec="utf-8"),
        st.sampled_from(["\x00", "\ud800", "\udfff", "\ud83d", "\ude00", "数", "é"]),
    ),
    max_size=12,
)
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True), TEXT)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.lists(inner, max_size=4).map(tuple),
        st.dictionaries(st.one_of(TEXT, st.integers(), st.booleans()), inner, max_size=4),
        st.frozensets(st.one_of(st.integers(), TEXT), max_size=3),
    ),
    max_leaves=30,
)


def reference(value: object, depth: int = 0) -> Any:
    """The general rules, written without the fast paths."""
    if depth > 64:
        return clean_text(str(value))
    if value is None or isinstance(value, bool | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, Mapping):
        return {clean_text(str(k)): reference(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [reference(v, depth + 1) for v in value]
    return clean_text(str(value))


@given(VALUES)
def test_clean_json_follows_the_general_rules(value: object) -> None:
    assert clean_json(value) == reference(value)


@given(VALUES)
def test_cleaning_twice_changes_nothing(value: object) -> None:
    once = clean_json(value)
    assert clean_json(once) == once


def test_deep_nesting_is_cut_the_same_way() -> None:
    deep: object = "leaf"
    for _ in range(80):
        deep = {"k": [deep]}
    assert clean_json(deep) == reference(deep)
