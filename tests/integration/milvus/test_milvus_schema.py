"""Collection lifecycle, capability detection, the filter builder and error translation."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import grpc
import pytest
from pymilvus import DataType
from pymilvus.exceptions import MilvusException, ParamError

from lookup_knowledge.adapters.embedders import HashingEmbedder
from lookup_knowledge.adapters.milvus import (
    MilvusConnection,
    MilvusKnowledgeSearch,
    MilvusKnowledgeStore,
    parse_capabilities,
)
from lookup_knowledge.adapters.milvus.errors import translate
from lookup_knowledge.adapters.milvus.filters import (
    all_of,
    eq,
    in_list,
    int_literal,
    not_in_list,
    string_literal,
)
from lookup_knowledge.application.ports import ChunkRecord, KnowledgeSearchRequest
from lookup_knowledge.domain.errors import (
    ConfigurationError,
    IngestError,
    InvalidInputError,
    SchemaMismatch,
    SearchBadRequest,
    SearchTimeout,
    SearchUnavailable,
    UnsupportedSearchMode,
)
from lookup_knowledge.domain.model import SearchMode
from tests.support.tcp_proxy import closed_port


def dense(dim: int, top_k: int = 3) -> KnowledgeSearchRequest:
    return KnowledgeSearchRequest("q", top_k, SearchMode.DENSE, query_vector=(0.5,) * dim)


def record(doc_id: str, index: int, dim: int | None, text: str = "some text") -> ChunkRecord:
    from datetime import UTC, datetime

    return ChunkRecord(
        evidence_key=f"{doc_id}#chunk-{index}",
        doc_id=doc_id,
        chunk_index=index,
        text=text,
        category="c",
        source=doc_id,
        title="t",
        breadcrumb="",
        source_type="markdown",
        content_hash="h" * 64,
        ingested_at=datetime.now(UTC),
        vector=tuple(HashingEmbedder(dim).embed_query(text)) if dim else None,
    )


# ---------------------------------------------------------------------------- lifecycle


def test_a_dimension_mismatch_says_what_to_do(store: MilvusKnowledgeStore) -> None:
    store.ensure_collection(384)
    store.ensure_collection(384)  # the same dimension again is fine
    with pytest.raises(SchemaMismatch) as info:
        store.ensure_collection(64)
    message = str(info.value)
    assert "384-dim" in message
    assert "64-dim" in message
    assert "new name" in message
    assert "drop the collection" in message


def test_a_foreign_collection_is_a_schema_mismatch(
    connection: MilvusConnection, collection: str
) -> None:
    client = connection.client()
    schema = client.create_schema(auto_id=True)
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("vector", DataType.FLOAT_VECTOR, dim=8)
    index = client.prepare_index_params()
    index.add_index(field_name="vector", index_type="FLAT", metric_type="L2")
    client.create_collection(collection, schema=schema, index_params=index)
    store = MilvusKnowledgeStore(connection, collection=collection)
    with pytest.raises(SchemaMismatch, match="missing field 'doc_id'") as info:
        store.ensure_collection(8)
    assert "primary key is 'id'" in str(info.value)
    with pytest.raises(SchemaMismatch):
        MilvusKnowledgeSearch(connection, collection=collection).search(dense(8))


def test_search_on_a_missing_collection_says_ingest_first(
    search: MilvusKnowledgeSearch,
) -> None:
    with pytest.raises(SearchUnavailable, match="ingest documents first"):
        search.search(dense(4))
    with pytest.raises(SearchUnavailable):
        search.fetch_content(["a#chunk-0"])


def test_a_reopened_lite_file_is_loaded_before_search(lite_uri: str, collection: str) -> None:
    # Ingest in one connection, search from a new one (another process in real use):
    # a reopened Milvus Lite file starts with its collections released.
    first = MilvusConnection(lite_uri)
    try:
        store = MilvusKnowledgeStore(first, collection=collection)
        store.ensure_collection(16)
        store.upsert_chunks([record("doc", 0, 16), record("doc", 1, 16)])
        first.client().release_collection(collection)
        search = MilvusKnowledgeSearch(first, collection=collection)
        hits = search.search(dense(16, 5))
        assert sorted(h.identity.evidence_key for h in hits) == ["doc#chunk-0", "doc#chunk-1"]
        assert store.count() == 2
    finally:
        first.close()


def test_fetch_content_batches_large_key_lists(
    connection: MilvusConnection, collection: str
) -> None:
    store = MilvusKnowledgeStore(connection, collection=collection)
    store.ensure_collection(8)
    store.upsert_chunks([record("d", i, 8, f"text {i}") for i in range(7)])
    search = MilvusKnowledgeSearch(connection, collection=collection, fetch_batch_size=2)
    keys = [f"d#chunk-{i}" for i in range(7)]
    assert search.fetch_content([*keys, *keys]) == {k: f"text {k[-1]}" for k in keys}


def test_rows_that_cannot_be_stored_are_ingest_errors(store: MilvusKnowledgeStore) -> None:
    store.ensure_collection(8)
    with pytest.raises(IngestError, match="no vector"):
        store.upsert_chunks([record("d", 0, None)])
    with pytest.raises(IngestError, match="longer than 65535 bytes"):
        store.upsert_chunks([record("d", 0, 8, "é" * 40_000)])
    with pytest.raises(SchemaMismatch, match="16-dim"):
        store.upsert_chunks([record("d", 0, 16)])
    assert store.count() == 0


def test_hybrid_weights_use_the_weighted_ranker(
    connection: MilvusConnection, collection: str
) -> None:
    store = MilvusKnowledgeStore(connection, collection=collection)
    store.ensure_collection(8)
    store.upsert_chunks([record("d", i, 8, f"kafka text {i}") for i in range(3)])
    weighted = MilvusKnowledgeSearch(connection, collection=collection, hybrid_weights=(0.7, 0.3))
    rrf = MilvusKnowledgeSearch(connection, collection=collection, rrf_k=10)
    vector = tuple(HashingEmbedder(8).embed_query("kafka text 1"))
    request = KnowledgeSearchRequest("kafka text 1", 3, SearchMode.HYBRID, query_vector=vector)
    w_hits, r_hits = weighted.search(request), rrf.search(request)
    assert {h.score_kind.value for h in w_hits} == {"cosine"}
    assert all(0.0 <= h.score <= 1.0 for h in w_hits)
    assert {h.score_kind.value for h in r_hits} == {"rrf"}
    assert max(h.score for h in r_hits) <= 2 / 11 + 1e-6  # two lists, k = 10


# ---------------------------------------------------------------------------- connection


def test_an_unreachable_server_is_search_unavailable() -> None:
    # Bounded by timeout_s, not pymilvus' minutes of retries; pytest-timeout guards a hang
    # (no wall-clock assertion: these machines are noisy).
    uri = f"http://127.0.0.1:{closed_port()}"
    search = MilvusKnowledgeSearch.open(uri, timeout_s=2.0)
    with pytest.raises(SearchUnavailable, match=r"127\.0\.0\.1") as info:
        search.search(dense(4))
    assert isinstance(info.value.__cause__, MilvusException)
    store = MilvusKnowledgeStore.open(uri, timeout_s=2.0)
    with pytest.raises(IngestError, match="search_unavailable"):
        store.ensure_collection(4)
    search.close()
    store.close()


def test_a_closed_connection_refuses_calls(lite_uri: str) -> None:
    conn = MilvusConnection(lite_uri)
    conn.close()
    conn.close()  # idempotent
    with pytest.raises(SearchUnavailable, match="closed"):
        conn.client()


@pytest.mark.parametrize(
    "uri",
    ["", "   ", "relative/path/without-suffix", "/tmp/x.sqlite"],
)
def test_bad_uris_are_configuration_errors(uri: str) -> None:
    with pytest.raises(ConfigurationError, match=r"milvus\.uri"):
        MilvusConnection(uri)


@pytest.mark.parametrize("name", ["", "1abc", "has-dash", "sp ace", 'q"uote', "x" * 256])
def test_bad_collection_names_are_configuration_errors(
    connection: MilvusConnection, name: str
) -> None:
    with pytest.raises(ConfigurationError, match=r"milvus\.collection"):
        MilvusKnowledgeSearch(connection, collection=name)


def test_token_credentials_are_redacted_from_messages() -> None:
    conn = MilvusConnection("https://user:secret@example.invalid:19530", token="abc")
    assert "secret" not in conn.uri
    # The one masker (domain/redaction): the password goes, the user name stays.
    assert conn.uri == "https://user:****@example.invalid:19530"


@pytest.mark.parametrize(
    ("version", "lite", "modern"),
    [
        ("milvus_lite-3.2.2", True, True),
        ("v2.3.5-lite", False, False),
        ("v2.4.9", False, False),
        ("v2.5.0", False, True),
        ("2.6.1-gpu", False, True),
        ("Zilliz Cloud Vector Database (Compatible with Milvus 2.5)", False, True),
        ("something-unknown", False, True),
    ],
)
def test_capabilities_follow_the_server_version(version: str, lite: bool, modern: bool) -> None:
    caps = parse_capabilities(version)
    # Lite's own grouping drops short documents, so the adapter groups client-side there.
    assert (caps.lite, caps.bm25, caps.hybrid, caps.grouping) == (
        lite,
        modern,
        modern,
        modern and not lite,
    )


def test_an_old_server_makes_unsupported_modes_name_the_version(
    connection: MilvusConnection, collection: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = MilvusKnowledgeStore(connection, collection=collection)
    store.ensure_collection(4)
    search = MilvusKnowledgeSearch(connection, collection=collection)
    monkeypatch.setattr(connection, "_capabilities", parse_capabilities("v2.4.1"))
    assert search.capabilities().modes == frozenset({SearchMode.DENSE})
    request = KnowledgeSearchRequest("kafka", 3, SearchMode.SPARSE)
    with pytest.raises(UnsupportedSearchMode, match=r"Milvus >= 2\.5.*v2\.4\.1"):
        search.search(request)


# ---------------------------------------------------------------------------- filters


@pytest.mark.parametrize(
    ("value", "literal"),
    [
        ("plain", '"plain"'),
        ('a"b', '"a\\"b"'),
        ("a\\b", '"a\\\\b"'),
        ('\\"', '"\\\\\\""'),
        ("line\nbreak\r", '"line\\nbreak\\r"'),
        ("tab\t", '"tab\\t"'),
        ('" or 1==1 or "', '"\\" or 1==1 or \\""'),
        ("é日本語🙂", '"é日本語🙂"'),
    ],
)
def test_string_literals_escape_quotes_backslashes_and_breaks(value: str, literal: str) -> None:
    assert string_literal(value) == literal


@pytest.mark.parametrize("value", ["nul\x00", "esc\x1b", "bell\x07", "del\x7f", "lone\ud800"])
def test_string_literals_reject_what_no_field_can_hold(value: str) -> None:
    with pytest.raises(InvalidInputError):
        string_literal(value)


def test_only_allowlisted_fields_can_be_filtered() -> None:
    assert eq("category", "x") == 'category == "x"'
    assert eq("chunk_index", 0) == "chunk_index == 0"
    assert in_list("doc_id", ["a", 'b"']) == 'doc_id in ["a", "b\\""]'
    assert not_in_list("evidence_key", ["k"]) == 'not (evidence_key in ["k"])'
    assert all_of(["a == 1", None, "", "b == 2"]) == "(a == 1) and (b == 2)"
    for field in ("text", "category == category or 1", "dense_vector", ""):
        with pytest.raises(SearchBadRequest):
            eq(field, "x")
    with pytest.raises(InvalidInputError):
        int_literal(True)
    with pytest.raises(InvalidInputError):
        in_list("doc_id", [])


# ---------------------------------------------------------------------------- translation


class _Rpc(grpc.RpcError):
    def __init__(self, status: grpc.StatusCode) -> None:
        self._status = status

    def code(self) -> grpc.StatusCode:
        return self._status

    def details(self) -> str:
        return "details"


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (_Rpc(grpc.StatusCode.DEADLINE_EXCEEDED), SearchTimeout),
        (_Rpc(grpc.StatusCode.UNAVAILABLE), SearchUnavailable),
        (_Rpc(grpc.StatusCode.UNAUTHENTICATED), SearchUnavailable),
        (_Rpc(grpc.StatusCode.UNIMPLEMENTED), UnsupportedSearchMode),
        (_Rpc(grpc.StatusCode.INVALID_ARGUMENT), SearchBadRequest),
        (MilvusException(code=1100, message="invalid parameter"), SearchBadRequest),
        (MilvusException(code=65535, message="cannot parse expression"), SearchBadRequest),
        (ParamError(message="bad"), SearchBadRequest),
        (MilvusException(code=2, message="Fail connecting to server"), SearchUnavailable),
        (MilvusException(code=100, message="collection not found"), SearchUnavailable),
        (MilvusException(code=1, message="should create connection first"), SearchUnavailable),
        (
            MilvusException(code=grpc.StatusCode.UNAVAILABLE, message="Retry timeout: 2s"),
            SearchUnavailable,
        ),
        (MilvusException(code=1, message="request timeout"), SearchTimeout),
        (TimeoutError("slow"), SearchTimeout),
        (OSError("broken pipe"), SearchUnavailable),
    ],
)
def test_driver_errors_translate_to_project_errors(error: BaseException, expected: Any) -> None:
    translated = translate(error, "search", "uri")
    assert type(translated) is expected
    assert "uri" in translated.message


def test_closing_the_last_connection_releases_the_lite_file(tmp_path: Path) -> None:
    """Another process (a CLI run, an MCP server) can open the file once we close it."""
    import subprocess
    import sys

    from lookup_knowledge.adapters.milvus import MilvusConnection

    uri = str(tmp_path / "shared.db")
    first, second = MilvusConnection(uri), MilvusConnection(uri)
    first.client().list_collections()
    second.client().list_collections()
    first.close()
    assert second.client().list_collections() == [], "a shared Lite server stays up"
    second.close()
    code = (
        "import sys; from pymilvus import MilvusClient; "
        "c = MilvusClient(sys.argv[1]); print(c.list_collections()); c.close()"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, uri], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
