"""The rows ``MilvusKnowledgeStore`` writes: a chunk record as a Milvus row (checked
against the field limits and the collection's layout), and the small readings of the
driver's answers (deleted counts, document keys) the store needs."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lookup_knowledge.adapters.milvus.filters import eq, groups_key
from lookup_knowledge.adapters.milvus.schema import (
    ACCESS_PUBLIC,
    ALLOWED_GROUPS,
    ALLOWED_GROUPS_KEY,
    BM25_TEXT,
    BREADCRUMB,
    CATEGORY,
    CHUNK_INDEX,
    CONTENT_HASH,
    DENSE,
    DOC_ID,
    INGESTED_AT,
    MAX_BYTES,
    PK,
    SOURCE,
    SOURCE_NAME,
    SOURCE_TYPE,
    TENANT,
    TEXT,
    TITLE,
    CollectionLayout,
)
from lookup_knowledge.application.analysis import lexical_text
from lookup_knowledge.application.ports import (
    ChunkRecord,
    TextAnalyzer,
)
from lookup_knowledge.domain.access import storage_key
from lookup_knowledge.domain.errors import (
    IngestError,
    InvalidInputError,
    SchemaMismatch,
)


def bm25_input(record: ChunkRecord) -> str:
    """What BM25 sees of a chunk before analysis: title, heading path, text."""
    return lexical_text(record.title, record.breadcrumb, record.text)


def fit_bytes(value: str, max_bytes: int) -> str:
    """``value`` cut to at most ``max_bytes`` UTF-8 bytes on a character boundary."""
    encoded = value.encode("utf-8")
    if len(encoded) <= max_bytes:
        return value
    return encoded[:max_bytes].decode("utf-8", "ignore")


def doc_key(row: Mapping[str, Any]) -> str:
    """The document key of a row being written: its doc_id scoped to its tenant."""
    return storage_key(str(row.get(TENANT) or ""), str(row[DOC_ID]))


def deleted_count(result: Any) -> int:
    if isinstance(result, Mapping):
        count = result.get("delete_count")
        return int(count) if isinstance(count, int) else 0
    if isinstance(result, list | tuple):
        return len(result)
    count = getattr(result, "delete_count", None)
    return int(count) if isinstance(count, int) else 0


def storable_doc_id(doc_id: str) -> bool:
    if (
        not isinstance(doc_id, str)
        or len(doc_id.encode("utf-8", "surrogatepass")) > MAX_BYTES[DOC_ID]
    ):
        return False
    try:
        eq(DOC_ID, doc_id)
    except InvalidInputError:
        return False
    return True


def chunk_row(
    record: ChunkRecord, layout: CollectionLayout, analyzer: TextAnalyzer, where: str
) -> dict[str, Any]:
    access = record.access
    if access.has_acl and not layout.access:
        raise IngestError(
            f"Milvus collection {layout.name!r} at {where} has no access "
            f"fields (schema version {layout.schema_version}, written before access "
            f"control), so it cannot keep {record.doc_id!r}'s tenant, groups or public "
            "flag: ingest into a new collection (point milvus.collection at a new name)"
        )
    for name, value in (
        (DOC_ID, record.doc_id),
        (CATEGORY, record.category),
        (SOURCE_NAME, record.source_name),
        (PK, record.storage_key),
        (TENANT, access.tenant),
        *((ALLOWED_GROUPS, g) for g in access.allowed_groups),
    ):
        if len(value.encode("utf-8")) > MAX_BYTES[name]:
            raise IngestError(
                f"{name} of {record.evidence_key[:80]!r} is longer than {MAX_BYTES[name]} bytes"
            )
    if len(record.text.encode("utf-8")) > MAX_BYTES[TEXT]:
        raise IngestError(
            f"chunk {record.evidence_key!r} text is longer than {MAX_BYTES[TEXT]} bytes: "
            "lower the chunk size"
        )
    row: dict[str, Any] = {
        PK: record.storage_key,
        DOC_ID: record.doc_id,
        CHUNK_INDEX: record.chunk_index,
        CATEGORY: record.category,
        SOURCE: fit_bytes(record.source, MAX_BYTES[SOURCE]),
        TITLE: fit_bytes(record.title, MAX_BYTES[TITLE]),
        BREADCRUMB: fit_bytes(record.breadcrumb, MAX_BYTES[BREADCRUMB]),
        SOURCE_TYPE: fit_bytes(record.source_type, MAX_BYTES[SOURCE_TYPE]),
        SOURCE_NAME: record.source_name,
        TEXT: record.text,
        CONTENT_HASH: record.content_hash,
        INGESTED_AT: int(record.ingested_at.timestamp() * 1000),
    }
    if layout.access:
        row[TENANT] = access.tenant
        row[ALLOWED_GROUPS] = sorted(access.allowed_groups)
        row[ALLOWED_GROUPS_KEY] = groups_key(access.allowed_groups)
        row[ACCESS_PUBLIC] = access.public
    if layout.bm25:
        row[BM25_TEXT] = fit_bytes(analyzer.analyse(bm25_input(record)), MAX_BYTES[BM25_TEXT])
    if layout.has_dense:
        if record.vector is None:
            raise IngestError(
                f"chunk {record.evidence_key!r} has no vector but the collection needs "
                f"{layout.dimension}-dim vectors"
            )
        if len(record.vector) != layout.dimension:
            raise SchemaMismatch(
                f"chunk {record.evidence_key!r} has a {len(record.vector)}-dim vector; "
                f"collection {layout.name!r} holds {layout.dimension}-dim vectors"
            )
        row[DENSE] = [float(x) for x in record.vector]
    return row
