"""Rows in Milvus that another tool wrote, with fields this package would never write,
read through the real search adapter on SQLite and PostgreSQL: a hit is either served
and recorded exactly as served, or left out; never served unrecorded, never an internal
error."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from lookup_knowledge.adapters.api import create_app
from lookup_knowledge.adapters.milvus import MilvusConnection
from tests.e2e.hostile.support import Backend, assert_recorded_once, evidence_ids, session_id

QUERY = "promote the standby with patronictl failover"
Row = dict[str, Any]


def _renamed(row: Row, doc_id: str, chunk_index: int | None = None) -> Row:
    index = row["chunk_index"] if chunk_index is None else chunk_index
    return {
        **row,
        "doc_id": doc_id,
        "chunk_index": index,
        "evidence_key": f"{doc_id}#chunk-{index}",
    }


BAD_ROWS: list[tuple[str, Callable[[Row], Row], str | None]] = [
    (
        "category-300-chars",
        lambda r: {**_renamed(r, "cat.md"), "category": "c" * 300},
        None,
    ),
    ("doc-id-1100-chars", lambda r: _renamed(r, "d" * 1100 + ".md"), None),
    ("chunk-index-over-int32", lambda r: _renamed(r, "big.md", 2**31), None),
    ("doc-id-with-nul", lambda r: _renamed(r, "nul\x00.md"), None),
    ("empty-text", lambda r: {**_renamed(r, "empty.md"), "text": ""}, None),
    (
        "escape-in-source-and-title",
        lambda r: {**_renamed(r, "esc.md"), "source": "e\x1b[31m.md", "title": "\x1b]0;t\x07"},
        None,
    ),
    ("negative-chunk-index", lambda r: _renamed(r, "neg.md", -1), None),
    (
        "key-not-matching-fields",
        lambda r: {**_renamed(r, "key.md"), "evidence_key": "other#chunk-0"},
        None,
    ),
    ("unicode-doc-id", lambda r: _renamed(r, "运维/切换 ✓.md"), None),
    (
        "blank-title-and-source",
        lambda r: {**_renamed(r, "blank.md"), "title": "", "source": ""},
        None,
    ),
]


@pytest.mark.parametrize(
    ("label", "bad"),
    [
        pytest.param(lab, f, id=lab, marks=[pytest.mark.xfail(strict=True, reason=x)] if x else [])
        for lab, f, x in BAD_ROWS
    ],
)
def test_a_malformed_row_is_served_recorded_or_left_out(
    label: str, bad: Callable[[Row], Row], backend: Backend, tmp_path: Path
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "good.md").write_text("# Good\n\nPromote the standby with patronictl failover.\n")
    here = Backend(
        backend.data_dir, backend.audit_url, {"milvus.collection": f"bad_{label.replace('-', '_')}"}
    )
    with create_app(overrides=here.overrides()) as app:
        app.ingest([docs])
        settings = app.settings
    connection = MilvusConnection(settings.milvus_uri, timeout_s=30.0)
    try:
        client = connection.client()
        collection = settings.milvus.collection
        client.load_collection(collection)
        [good] = client.query(collection, filter="chunk_index >= 0", output_fields=["*"])
        good.pop("sparse_vector", None)  # made by the collection's BM25 function
        row = bad(dict(good))
        client.insert(collection, data=[row])
        client.flush(collection)
    finally:
        connection.close()
    session = session_id(label)
    with create_app(overrides=here.overrides()) as app:
        payload = app.lookup(QUERY, session_id=session)
        assert "internal_error" not in payload["message"], payload["message"]
        assert app.flush(session, timeout_s=30)
        assert_recorded_once(app.audit, session, payload["invocationId"], evidence_ids(payload))
        for block in payload["evidenceBlocks"]:
            assert block["content"].strip(), "no empty excerpt is served as evidence"
