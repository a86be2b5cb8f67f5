"""The dense index beside a Milvus Lite file (``dense_index.py``) on a collection.

``lite_dense(collection)`` is the one index of a Lite collection with a dense field
(shared by the store and the search adapter on the connection), None on a server.
``lite_dense_search`` answers a dense search with it: the index gives keys and cosine
scores, Lite gives the rows' fields by primary key (its point read, no scan: in process
where it can, ``lite_point_read.py``), in the shape ``MilvusClient.search`` hits are read
in (``search.py``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from lookup_knowledge.adapters.milvus.collection import KnowledgeCollection
from lookup_knowledge.adapters.milvus.dense_index import DenseIndex
from lookup_knowledge.adapters.milvus.dense_rows import DenseRow, dense_root
from lookup_knowledge.adapters.milvus.dense_rows import available as dense_available
from lookup_knowledge.adapters.milvus.errors import index_failures
from lookup_knowledge.adapters.milvus.filters import in_list, string_literal
from lookup_knowledge.adapters.milvus.lite_point_read import lite_get
from lookup_knowledge.adapters.milvus.schema import (
    ACCESS_PUBLIC,
    ALLOWED_GROUPS,
    CATEGORY,
    DENSE,
    DOC_ID,
    PK,
    TENANT,
)
from lookup_knowledge.domain.access import UNRESTRICTED, AccessScope, storage_key
from lookup_knowledge.domain.errors import InvalidInputError

_FIELDS = [PK, DOC_ID, CATEGORY, DENSE]
#: The index searches ``EF_FACTOR`` times as deep as ``milvus.search-ef`` asks: its graph
#: is not Lite's, and on the synthetic chunks of ``bench_scaling.py`` ef 256 found 0.988
#: of the exact top 50, ef 512 0.999 (1.25 against 1.6 ms at 5k chunks).
EF_FACTOR = 2


def index_ef(search_ef: int, limit: int) -> int:
    """The search depth the index is asked for (``ef >= limit``, as Milvus requires)."""
    return max(EF_FACTOR * search_ef, limit)


_ACCESS = [TENANT, ALLOWED_GROUPS, ACCESS_PUBLIC]


def dense_row(row: Mapping[str, Any]) -> DenseRow:
    """A Milvus row (as read, or as the store writes it) as the dense index keeps it."""
    tenant = str(row.get(TENANT) or "")
    return DenseRow(
        key=str(row[PK]),
        doc_key=storage_key(tenant, str(row[DOC_ID])),
        vector=row[DENSE],
        category=str(row.get(CATEGORY) or ""),
        tenant=tenant,
        allowed_groups=tuple(str(g) for g in row.get(ALLOWED_GROUPS) or ()),
        public=row.get(ACCESS_PUBLIC) is True,
    )


def _key(collection: KnowledgeCollection) -> str:
    return f"dense:{collection.name}"


def lite_dense(collection: KnowledgeCollection) -> DenseIndex | None:
    """The collection's dense index beside the Lite file; None on a server, for a
    collection without a dense field, or before the collection exists."""
    path = collection.connection.lite_path
    if path is None:
        return None
    layout = collection.layout()
    if layout is None or not layout.has_dense or layout.dimension is None:
        return None
    if not dense_available():  # pragma: no cover - FAISS is installed with milvus-lite
        return None
    fields = [*_FIELDS, *_ACCESS] if layout.access else _FIELDS
    dimension = layout.dimension
    index: DenseIndex = collection.connection.shared(
        _key(collection),
        lambda: DenseIndex(
            dense_root(path, collection.name),
            dimension=dimension,
            read_rows=lambda keys: (dense_row(r) for r in collection.read_rows(keys, fields)),
            count_rows=collection.count_rows,
        ),
    )
    return index


def drop_lite_dense(collection: KnowledgeCollection) -> None:
    """Forget and delete the collection's dense index (the collection was dropped)."""
    path = collection.connection.lite_path
    if path is None:
        return
    index = collection.connection.unshare(_key(collection))
    if isinstance(index, DenseIndex):
        index.destroy()
    else:
        DenseIndex.remove(dense_root(path, collection.name))


def expressible(key: str) -> bool:
    """A key a filter can name (one with other control characters cannot be read back
    by filter: it is left out, as ``fetch_content`` leaves it out)."""
    try:
        string_literal(key)
    except InvalidInputError:
        return False
    return True


def lite_dense_search(
    collection: KnowledgeCollection,
    index: DenseIndex,
    vector: Sequence[float],
    limit: int,
    *,
    ef: int,
    where: Mapping[str, str],
    access: AccessScope = UNRESTRICTED,
    output_fields: Sequence[str],
) -> list[dict[str, Any]]:
    """The best ``limit`` rows, each a dict of its ``output_fields`` and ``distance`` (the
    cosine), best first; driver errors propagate (the caller translates them)."""
    with index_failures("dense", collection.where):
        found = index.search(vector, limit, ef=ef, where=where, access=access)
    if not found:
        return []
    keys = [key for key, _score in found if expressible(key)]
    rows = lite_get(collection.connection, collection.name, keys, output_fields)
    if rows is None:
        # ``pk in [...]`` is Lite's point read (``col.get``) over gRPC; written by
        # ``filters`` (pymilvus' ``get(ids=...)`` pastes string keys in unescaped).
        rows = collection.connection.client().query(
            collection.name,
            filter=in_list(PK, keys),
            output_fields=list(output_fields),
            timeout=collection.connection.timeout_s,
        )
    by_key = {str(row.get(PK)): row for row in rows}
    out: list[dict[str, Any]] = []
    for key, score in found:
        if not expressible(key):
            # No filter can read it back; the hit goes on with its key alone, so the
            # lookup drops it with the reason (a NUL in its id) as Lite's own search did.
            out.append({PK: key, "distance": score})
            continue
        row = by_key.get(key)
        if row is not None:  # gone from Lite since the index saw it: not evidence
            out.append({**row, PK: key, "distance": score})
    return out


__all__ = [
    "EF_FACTOR",
    "dense_row",
    "drop_lite_dense",
    "expressible",
    "index_ef",
    "lite_dense",
    "lite_dense_search",
]
