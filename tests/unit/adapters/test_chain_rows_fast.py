"""The verifier's fast serialisations give exactly the bytes of the domain's canonical
ones: ``fast_json`` (orjson) is ``canonical_json``, ``canonical_document_text`` of a
document PostgreSQL renders as text is ``canonical_document`` of it parsed."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from lookup_knowledge.adapters.audit.chain_rows import canonical_document_text, fast_json
from lookup_knowledge.adapters.audit.pg_batch import document_text
from lookup_knowledge.domain.trail import canonical_document, canonical_json

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([1e-4, 9.99e-5, 1e16, 9999999999999998.0, -0.0, 0.0, 1e21, 1e22, 5e-7]),
    st.text(),
    st.text(alphabet=st.characters(max_codepoint=0x40)),
    st.binary(max_size=8),
)
rows = st.lists(scalars, max_size=12)


@settings(max_examples=500)
@given(st.one_of(rows, st.lists(rows, max_size=4), st.tuples(scalars, scalars)))
def test_fast_json_writes_the_canonical_bytes(value: Any) -> None:
    assert fast_json(value) == canonical_json(value)


json_values = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(2**70), max_value=2**70),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=20,
)


def jsonb_text(value: Any) -> str:
    """Roughly how PostgreSQL renders a jsonb value: spaced, numbers without exponent."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return format(Decimal(repr(value)), "f")
    if isinstance(value, list):
        return "[" + ", ".join(jsonb_text(v) for v in value) + "]"
    return (
        "{"
        + ", ".join(
            f"{json.dumps(k, ensure_ascii=False)}: {jsonb_text(v)}" for k, v in value.items()
        )
        + "}"
    )


@settings(max_examples=500)
@given(json_values)
def test_a_documents_text_is_made_canonical_as_the_parsed_document_is(value: Any) -> None:
    for text in (jsonb_text(value), json.dumps(value, ensure_ascii=False)):
        assert canonical_document_text(text) == canonical_document(json.loads(text))


def test_text_that_is_no_json_is_kept_as_it_is() -> None:
    assert canonical_document_text("{not json") == "{not json"


@settings(max_examples=500)
@given(
    st.recursive(
        st.one_of(
            st.none(),
            st.booleans(),
            st.integers(min_value=-(2**70), max_value=2**70),
            st.floats(allow_nan=False, allow_infinity=False),
            st.sampled_from([1e-4, 9.99e-5, 1e16, 9999999999999998.0, -0.0, 1e21, 5e-7]),
            st.text(),
        ),
        lambda inner: st.one_of(
            st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=6), inner, max_size=4)
        ),
        max_leaves=20,
    )
)
def test_the_writers_document_text_is_the_canonical_document(value: Any) -> None:
    """What the PostgreSQL writer sends to the JSONB column and hashes is the text the
    verifier's canonical form gives (a lone surrogate: cleaned before, never here)."""
    assert document_text(value) == canonical_document(value)
