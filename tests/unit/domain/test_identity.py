from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lookup_knowledge.domain.identity import (
    EvidenceIdentity,
    chunk_key,
    extract_identity,
    parse_chunk_index,
    split_chunk_key,
)


@pytest.mark.parametrize(
    ("metadata", "vector_id", "expected"),
    [
        ({"docId": "d", "chunkIndex": 2}, "v", "d#chunk-2"),
        ({"doc_id": "d", "chunk_index": 0}, None, "d#chunk-0"),
        ({"docId": "d", "chunk_index": "7"}, None, "d#chunk-7"),
        ({"doc_id": "d", "chunkIndex": 3.0}, None, "d#chunk-3"),
        ({"docId": "d"}, "v9", "vector:v9"),
        ({"chunkIndex": 1}, 42, "vector:42"),
        ({}, None, "rank:5"),
        ({"docId": "  ", "chunkIndex": 1}, None, "rank:5"),
        ({"docId": "d", "chunkIndex": None}, "", "rank:5"),
    ],
)
def test_evidence_key_rules(metadata: dict[str, object], vector_id: object, expected: str) -> None:
    assert extract_identity(metadata, vector_id, 5).evidence_key == expected


def test_camel_case_alias_wins_when_both_are_present() -> None:
    ident = extract_identity({"docId": "camel", "doc_id": "snake", "chunkIndex": 1}, None, 1)
    assert ident.doc_id == "camel"


@pytest.mark.parametrize(
    "bad", [-1, 1.5, float("nan"), float("inf"), "x", "-3", "1.0", True, False, "", [1], {"a": 1}]
)
def test_odd_chunk_indexes_are_treated_as_missing(bad: object) -> None:
    assert parse_chunk_index(bad) is None
    ident = extract_identity({"docId": "d", "chunkIndex": bad}, "v", 1)
    assert ident.evidence_key == "vector:v"
    assert ident.chunk_index is None
    assert ident.doc_id == "d"


@given(
    doc=st.one_of(st.none(), st.text(max_size=20), st.integers()),
    index=st.one_of(
        st.none(), st.integers(), st.floats(allow_nan=True), st.text(max_size=5), st.booleans()
    ),
    vector=st.one_of(st.none(), st.text(max_size=10), st.integers()),
    rank=st.integers(min_value=1, max_value=10_000),
)
def test_extraction_never_crashes_and_follows_precedence(
    doc: object, index: object, vector: object, rank: int
) -> None:
    ident = extract_identity({"docId": doc, "chunkIndex": index}, vector, rank)
    assert isinstance(ident, EvidenceIdentity)
    if ident.doc_id is not None and ident.chunk_index is not None:
        assert ident.evidence_key == f"{ident.doc_id}#chunk-{ident.chunk_index}"
    elif ident.evidence_key.startswith("vector:"):
        assert str(vector).strip()
    else:
        assert ident.evidence_key == f"rank:{rank}"


def test_identity_validates() -> None:
    with pytest.raises(ValueError, match="evidence_key"):
        EvidenceIdentity("", None, None)
    with pytest.raises(ValueError, match="chunk_index"):
        EvidenceIdentity("k", "d", -1)


@given(st.text(min_size=1), st.integers(min_value=0, max_value=10**9))
def test_a_chunk_key_splits_back_into_its_doc_id_and_index(doc_id: str, index: int) -> None:
    assert split_chunk_key(chunk_key(doc_id, index)) == (doc_id, index)


def test_keys_that_are_not_chunk_keys_do_not_split() -> None:
    for key in ("vector:7", "rank:3", "a#chunk-x", "#chunk-1", "a#chunk-", "a#chunk-٣"):
        assert split_chunk_key(key) is None
