"""The one rule for text a request hands to a store, a hash or a driver: refused exactly
when it holds a NUL or a lone UTF-16 surrogate, by the application (``require_text``)
and by the REST schemas (``storable``) alike."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lookup_knowledge.adapters.http.schemas import storable, storable_json
from lookup_knowledge.application.ports import (
    InvocationFilter,
    SessionFilter,
    check_session_id,
    normalise_cited,
    require_text,
)
from lookup_knowledge.domain.errors import InvalidInputError

# Every code point, surrogates included (hypothesis leaves them out unless asked).
ANY_TEXT = st.text(st.characters(codec=None, min_codepoint=0, max_codepoint=0x10FFFF))


def _storable(value: str) -> bool:
    return "\x00" not in value and not any(0xD800 <= ord(c) <= 0xDFFF for c in value)


@given(ANY_TEXT)
def test_require_text_refuses_exactly_nul_and_lone_surrogates(value: str) -> None:
    if _storable(value):
        assert require_text("x", value) == value
        assert storable(value) == value
    else:
        with pytest.raises(InvalidInputError):
            require_text("x", value)
        with pytest.raises(ValueError, match=r"NUL|surrogate"):
            storable(value)


@pytest.mark.parametrize("bad", ["\x00", "\ud800", "a\udfffb"])
def test_ids_filters_and_citations_refuse_bad_text(bad: str) -> None:
    with pytest.raises(InvalidInputError):
        check_session_id(f"s{bad}")
    with pytest.raises(InvalidInputError):
        InvocationFilter(session_id=f"s{bad}")
    with pytest.raises(InvalidInputError):
        InvocationFilter(step_id=f"s{bad}")
    with pytest.raises(InvalidInputError):
        SessionFilter(id_contains=bad)
    with pytest.raises(InvalidInputError):
        normalise_cited([f"doc{bad}#chunk-0"])
    with pytest.raises(ValueError, match=r"NUL|surrogate"):
        storable_json([{"type": "text", "text": "ok", bad: 1}])
