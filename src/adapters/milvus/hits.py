"""Reading Milvus rows: a search hit as a plain dict, its key and access fields, and the
primary-key reads beside search (late materialisation, the access a verifier asks)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from lookup_knowledge.adapters.milvus.collection import KnowledgeCollection
from lookup_knowledge.adapters.milvus.errors import DRIVER_ERRORS, translate
from lookup_knowledge.adapters.milvus.filters import all_of, eq, in_list
from lookup_knowledge.adapters.milvus.schema import (
    ACCESS_FIELDS,
    ACCESS_PUBLIC,
    ALLOWED_GROUPS,
    CHUNK_INDEX,
    DOC_ID,
    MAX_BYTES,
    PK,
    TENANT,
    TEXT,
    CollectionLayout,
)
from lookup_knowledge.domain.access import NO_ACL, AccessScope, DocumentAccess
from lookup_knowledge.domain.errors import InvalidInputError, SchemaMismatch
from lookup_knowledge.domain.identity import split_chunk_key


def fits(value: str, max_bytes: int) -> bool:
    return len(value.encode("utf-8", "surrogatepass")) <= max_bytes


def row_key(hit: Any) -> str | None:
    key = hit.get(PK)
    if key is None:
        key = hit.get("id")  # servers before 2.4 name the key "id"
    return str(key) if key is not None else None


def flat_hit(hit: Any) -> dict[str, Any]:
    """A pymilvus ``Hit`` (``{pk, "distance", "entity": {...}}``) as one plain dict of its
    key, distance and fields, the shape the Lite full-text index returns. Read once: a
    ``Hit`` looks an entity field up by raising ``KeyError`` on the outer dict first
    (~4 us a field; a search at the eval depth reads ~13 fields of 50 hits)."""
    row = dict(dict.get(hit, "entity") or {})
    for name, value in dict.items(hit):
        if name != "entity":
            row[name] = value
    return row


def row_access(row: Any) -> DocumentAccess:
    """A row's access fields; what cannot be read as such is no ACL (visible to nobody
    under ``enforced``)."""
    tenant = row.get(TENANT)
    groups = row.get(ALLOWED_GROUPS)
    public = row.get(ACCESS_PUBLIC)
    try:
        return DocumentAccess(
            tenant=tenant if isinstance(tenant, str) else "",
            allowed_groups=frozenset(str(g) for g in groups or ()),
            public=public is True,
        )
    except (InvalidInputError, TypeError):
        return NO_ACL


def refuse_without_access(layout: CollectionLayout, scope: AccessScope, where: str) -> None:
    if scope.enforced and not layout.access:
        raise SchemaMismatch(
            f"Milvus collection {layout.name!r} at {where} has no access fields (schema "
            f"version {layout.schema_version}, written before access control): with "
            "access.mode=enforced nothing in it says who may see it, so it is not searched. "
            "Ingest the documents again with their tenant and groups into a new collection "
            "(point milvus.collection at a new name), or set access.mode=off."
        )


def storable_keys(evidence_keys: Sequence[str]) -> list[str]:
    """The keys a row could have (others cannot exist in the store), once each."""
    keys: list[str] = []
    for key in dict.fromkeys(evidence_keys):
        if not isinstance(key, str) or not key or not fits(key, MAX_BYTES[PK]):
            continue
        try:
            eq(PK, key)
        except InvalidInputError:
            continue  # a key with control characters cannot exist in the store
        keys.append(key)
    return keys


class RowReader:
    """Primary-key and doc-id reads of one collection, in batches."""

    def __init__(
        self, collection: KnowledgeCollection, batch: int, read: Mapping[str, Any]
    ) -> None:
        self._collection = collection
        self._batch = batch
        self._read = dict(read)

    def texts(self, keys: Sequence[str], rule: str | None) -> dict[str, str]:
        """The text of each key's row that ``rule`` (the access filter) lets through."""
        collection = self._collection
        connection = collection.connection
        collection.ensure_loaded()
        client = connection.client()
        out: dict[str, str] = {}
        for start in range(0, len(keys), self._batch):
            batch = keys[start : start + self._batch]
            try:
                rows = client.query(
                    collection.name,
                    filter=all_of([in_list(PK, batch), rule]),
                    output_fields=[PK, TEXT],
                    timeout=connection.timeout_s,
                    **self._read,
                )
            except DRIVER_ERRORS as error:
                raise translate(error, "fetch content", collection.where) from error
            for row in rows:
                key, text = row.get(PK), row.get(TEXT)
                if isinstance(key, str) and isinstance(text, str):
                    out[key] = text
        return out

    def access(self, document_ids: Sequence[str]) -> dict[str, tuple[DocumentAccess, ...]]:
        """Every row holding each ``doc_id#chunk-N`` (any tenant), with its access."""
        wanted: dict[tuple[str, int], str] = {}
        for document_id in dict.fromkeys(document_ids):
            parts = split_chunk_key(document_id)
            if parts is None:
                continue
            doc_id, index = parts
            if not fits(doc_id, MAX_BYTES[DOC_ID]):
                continue
            try:
                eq(DOC_ID, doc_id)
            except InvalidInputError:
                continue
            wanted[(doc_id, index)] = document_id
        collection = self._collection
        layout = collection.layout()
        if not wanted or layout is None:
            return {}
        collection.ensure_loaded()
        fields = [DOC_ID, CHUNK_INDEX, *(ACCESS_FIELDS if layout.access else ())]
        doc_ids = sorted({d for d, _i in wanted})
        out: dict[str, list[DocumentAccess]] = {}
        client = collection.connection.client()
        for start in range(0, len(doc_ids), self._batch):
            try:
                rows = client.query(
                    collection.name,
                    filter=in_list(DOC_ID, doc_ids[start : start + self._batch]),
                    output_fields=fields,
                    timeout=collection.connection.timeout_s,
                    **self._read,
                )
            except DRIVER_ERRORS as error:
                raise translate(error, "read access", collection.where) from error
            for row in rows:
                key = wanted.get((str(row.get(DOC_ID)), int(row.get(CHUNK_INDEX, -1))))
                if key is not None:
                    out.setdefault(key, []).append(row_access(row))
        return {k: tuple(v) for k, v in out.items()}
