"""``clean_json``: the fast type checks give what the general rules give, and cleaning
twice changes nothing (the journal line of a cleaned record is not cleaned again).
``clean_invocation``'s copy (not validated again) is the field-by-field one and valid;
journal lines (orjson, the standard library for what it refuses) are ASCII and read back."""

from __future__ import annotations

import json
import math
import uuid
import zlib
from collections.abc import Mapping
from dataclasses import fields, replace
from datetime import UTC, datetime, timedelta, timezone
from enum import Enum
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from lookup_knowledge.adapters.audit.codec import (
    ascii_json,
    clean_details,
    clean_invocation,
    clean_json,
    clean_text,
    json_bytes,
    too_deep,
)
from lookup_knowledge.adapters.audit.journal_format import checksum, decode_bound, encode
from lookup_knowledge.application.ports import EvidenceRecord, ToolInvocation, validate_invocation
from lookup_knowledge.domain.errors import AuditError

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


PLAIN = st.recursive(  # what a lookup's details mostly are: the fast path's case
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), TEXT),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(TEXT, inner, max_size=4)),
    max_leaves=30,
)


def exactly(value: object) -> object:
    """``value`` with every scalar tagged by its type (``True == 1``, ``0.0 == -0.0``)."""
    if isinstance(value, dict):
        return {k: exactly(v) for k, v in value.items()}
    if isinstance(value, list):
        return [exactly(v) for v in value]
    return (type(value).__name__, repr(value))


@given(st.dictionaries(TEXT, st.one_of(PLAIN, VALUES), max_size=5))
def test_details_cleaned_by_the_fast_path_are_what_clean_json_gives(details: Any) -> None:
    assert exactly(clean_details(details)) == exactly(clean_json(details))


BRACKETY = st.text(alphabet=st.sampled_from(list("[]{}ab数")), max_size=6)
QUOTED = st.text(alphabet=st.sampled_from(list('[]{}"\\ab')), max_size=6)


@given(
    st.recursive(
        st.one_of(st.integers(-(2**63), 2**63 - 1), BRACKETY),
        lambda inner: st.one_of(
            st.lists(inner, max_size=3), st.dictionaries(BRACKETY, inner, max_size=3)
        ),
        max_leaves=12,
    ),
    st.lists(st.tuples(st.booleans(), BRACKETY), min_size=25, max_size=70),
    st.one_of(st.just(""), QUOTED),
)
def test_deep_details_with_quotes_and_brackets_in_their_texts_are_cut_by_their_depth(
    core: object, levels: list[tuple[bool, str]], quoted: str
) -> None:
    """Near the depth limit, with brackets (and quotes, escaped in the JSON text, or none)
    inside keys and strings: the fast path keeps what the rules keep, cuts what they cut."""
    details: object = core
    for as_dict, text in levels:
        details = {text: [details, text]} if as_dict else [text, details]
    details = [quoted, details]
    wrapped = {"d": details}
    assert exactly(clean_details(wrapped)) == exactly(clean_json(wrapped))
    # The indented text tells the depth of the deepest value (both sides of the limit):
    # no walk is needed for a value within it, and none beyond it is kept.
    indented = orjson.dumps(wrapped, option=orjson.OPT_INDENT_2)
    assert too_deep(indented) == (deepest(wrapped) > 64)


def deepest(value: object, depth: int = 0) -> int:
    """How many containers down the deepest value of ``value`` lies (``clean_json``'s
    depth: the top is 0, an empty container adds nothing below it)."""
    children = value.values() if isinstance(value, dict) else value
    if isinstance(value, dict | list):
        return max((deepest(v, depth + 1) for v in children), default=depth)
    return depth


class Colour(Enum):
    RED = "red"


def test_details_the_fast_path_cannot_copy_as_is_are_cleaned_by_the_rules() -> None:
    deep: object = 1
    for _ in range(64):
        deep = [deep]
    shallow: object = 1
    for _ in range(62):
        shallow = {"[{": [shallow, "}]"]} if _ % 2 else [shallow]
    cases = [
        {"deep": deep},  # its innermost value is 65 levels down: made text
        {"shallow": shallow},  # 63 levels, brackets in its texts: kept as it is
        {"nan": math.nan, "inf": -math.inf},
        {"tuple": (1, 2), "set": frozenset({3})},
        {"id": uuid.UUID(int=7), "at": datetime(2026, 1, 2, tzinfo=UTC)},
        {"nul": "a\x00b", "key\x00": 1, "lone": "x\ud800"},
        {"huge": 2**70, 3: "int key"},
        {"enum": Colour.RED},  # orjson writes its value, the rules its str()
        {"escaped": 'a \\u0000 backslash, a quote " and {[ brackets'},
    ]
    for details in cases:
        assert exactly(clean_details(details)) == exactly(clean_json(details)), details


# ------------------------------------------------------------------ records and lines

ID_TEXT = st.text(
    alphabet=st.one_of(
        st.characters(codec="utf-8", exclude_categories=("Cs",)),
        st.sampled_from(["\x00", "\ud800", "\ude00", "\ud83d", "é", "数"]),
    ),
    min_size=1,
    max_size=12,
).filter(str.strip)


@st.composite
def records(draw: st.DrawFn) -> ToolInvocation:
    """Valid records whose free texts (query, ids, error, shown text, details) may hold
    what cleaning replaces: NUL, lone surrogates, surrogate pairs."""
    shown = draw(st.lists(st.one_of(st.none(), TEXT), min_size=0, max_size=3))
    return ToolInvocation(
        id=str(uuid.UUID(int=draw(st.integers(0, 2**128 - 1)))).upper(),
        session_id=draw(ID_TEXT),
        query=draw(TEXT),
        status="ok",
        started_at=datetime(2030, 1, 2, 3, 4, 5, tzinfo=timezone(timedelta(hours=2))),
        duration_ms=1.5,
        step_id=draw(st.one_of(st.none(), ID_TEXT)),
        error_message=draw(st.one_of(st.none(), TEXT)),
        retrieval_details=draw(st.dictionaries(TEXT, VALUES, max_size=4)),
        evidence=tuple(
            EvidenceRecord(
                rank=rank,
                document_id=f"doc-{rank}#chunk-0",
                doc_id=f"doc-{rank}",
                chunk_index=0,
                source="guide.md",
                category="billing",
                score_before=0.5,
                score_after=0.6,
                projected=True,
                in_context_pack=False,
                content_hash="0" * 64,
                shown_text=text,
            )
            for rank, text in enumerate(shown, 1)
        ),
    )


def replaced(record: ToolInvocation) -> ToolInvocation:
    """``clean_invocation`` as it was written first: ``dataclasses.replace`` field by
    field (which validates the copy again)."""

    def cleaned(item: Any) -> dict[str, Any]:
        return {
            f.name: clean_text(getattr(item, f.name))
            for f in fields(item)
            if isinstance(getattr(item, f.name), str)
        }

    details = clean_json(dict(record.retrieval_details))
    details.setdefault("version", 1)
    changes = {k: v for k, v in cleaned(record).items() if k not in ("id", "retrieval_details")}
    return replace(
        record,
        **changes,
        id=record.id.lower(),
        started_at=record.started_at.astimezone(UTC),
        retrieval_details=details,
        evidence=tuple(replace(e, **cleaned(e)) for e in record.evidence),
    )


@given(records())
def test_the_cleaned_copy_is_what_field_by_field_replacement_gives_and_still_valid(
    record: ToolInvocation,
) -> None:
    clean = clean_invocation(record)
    assert clean == replaced(record)
    validate_invocation(clean)  # the copy skipped __post_init__: it must still pass
    assert all(clean_text(e.shown_text or "") == (e.shown_text or "") for e in clean.evidence)


@given(records())
def test_a_journal_line_is_ascii_and_reads_back_as_the_cleaned_record(
    record: ToolInvocation,
) -> None:
    clean = clean_invocation(record)
    line = encode(clean, cleaned=True, database="db-key")
    assert line.isascii()
    assert decode_bound(line) == (clean, "db-key")
    body = line.split(" ", 1)[1]
    assert json.loads(body) == json.loads(
        json.dumps(json.loads(body), ensure_ascii=True, separators=(",", ":"))
    )


@given(VALUES.filter(lambda v: v == v))  # no NaN at the top (NaN != NaN)
def test_ascii_json_reads_back_as_the_standard_library_writes_it(value: object) -> None:
    clean = clean_json(value)
    text = ascii_json(clean)
    assert text.isascii()
    assert text == text.strip()
    assert json.loads(text) == json.loads(json.dumps(clean, ensure_ascii=True))
    assert json.loads(json_bytes(clean)) == json.loads(text)


def test_non_ascii_text_is_escaped_exactly_as_the_standard_library_escapes_it() -> None:
    value = {"q": 'caf\u00e9 "\u6570" \\ \U0001f600\n', "k\u00e9y": ["\u2028", 1.5, None]}
    assert ascii_json(value) == json.dumps(value, ensure_ascii=True, separators=(",", ":"))


def test_json_the_fast_encoder_refuses_is_written_by_the_standard_library() -> None:
    huge = {"count": 2**70, "text": "é 数 \U0001f600"}  # beyond 64 bits; non-ASCII
    assert json.loads(ascii_json(huge)) == huge
    assert ascii_json(huge).isascii()
    assert json.loads(json_bytes(huge)) == huge


def test_a_record_no_store_could_keep_is_still_refused_where_it_is_made() -> None:
    good = clean_invocation(
        ToolInvocation(
            id=str(uuid.uuid4()),
            session_id="s",
            query="q",
            status="ok",
            started_at=datetime(2030, 1, 1, tzinfo=UTC),
            duration_ms=1.0,
        )
    )
    with pytest.raises(AuditError, match="id is not a UUID"):
        replace(good, id="not-a-uuid")
    with pytest.raises(AuditError, match="evidence document_id"):
        replace(
            good,
            evidence=(
                EvidenceRecord(1, "a\x00b", None, None, "s.md", "c", 0.1, 0.2, True, False, "0"),
            ),
        )


@given(st.binary(max_size=20_000))
def test_the_journal_checksum_is_crc32_whatever_the_length(raw: bytes) -> None:
    assert checksum(raw) == zlib.crc32(raw)
