"""A named collection on a connection: its layout (cached) and its load state."""

from __future__ import annotations

import threading
from array import array
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from lookup_knowledge.adapters.milvus.connection import MilvusConnection
from lookup_knowledge.adapters.milvus.errors import DRIVER_ERRORS, translate
from lookup_knowledge.adapters.milvus.filters import all_of, eq, in_list
from lookup_knowledge.adapters.milvus.fulltext import (
    FullTextIndex,
    FullTextRow,
    batched,
    fulltext_root,
)
from lookup_knowledge.adapters.milvus.fulltext import available as fulltext_available
from lookup_knowledge.adapters.milvus.lite_load import load_lite
from lookup_knowledge.adapters.milvus.schema import (
    ACCESS_PUBLIC,
    ALLOWED_GROUPS,
    BM25_TEXT,
    BREADCRUMB,
    CATEGORY,
    CHUNK_INDEX,
    DENSE,
    DOC_ID,
    PK,
    SOURCE,
    SOURCE_TYPE,
    TENANT,
    TEXT,
    TITLE,
    CollectionLayout,
    read_layout,
)
from lookup_knowledge.domain.access import split_storage_key
from lookup_knowledge.domain.errors import ConfigurationError, SearchUnavailable
from lookup_knowledge.domain.relevance import DenseBackground, measure_background

#: Stored vectors the dense background is measured from (pairs of different documents).
BACKGROUND_ROWS = 2000

_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")


def validate_collection_name(name: str) -> str:
    if (
        not isinstance(name, str)
        or not name
        or len(name) > 255
        or not set(name) <= _NAME_CHARS
        or name[0].isdigit()
    ):
        raise ConfigurationError(
            "milvus.collection",
            name,
            "must be 1-255 letters, digits or underscores, not starting with a digit",
        )
    return name


_INDEX_KEYS = frozenset(
    {"index_type", "metric_type", "field_name", "index_name", "total_rows", "indexed_rows",
     "pending_index_rows", "state", "params"}
)  # fmt: skip


def _index_of(described: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    params = {str(k): v for k, v in described.items() if k not in _INDEX_KEYS}
    nested = described.get("params")
    if isinstance(nested, Mapping):
        params.update({str(k): v for k, v in nested.items()})
    return str(described.get("index_type", "")).upper(), params


_FULLTEXT_FIELDS = [PK, DOC_ID, CHUNK_INDEX, CATEGORY, SOURCE, TITLE, BREADCRUMB, SOURCE_TYPE,
                    TEXT, BM25_TEXT]  # fmt: skip


def fulltext_row(row: Mapping[str, Any]) -> FullTextRow:
    """A Milvus row (as read, or as ``MilvusKnowledgeStore._row`` writes it) as the
    full-text index keeps it."""
    return FullTextRow(
        key=str(row[PK]),
        doc_id=str(row[DOC_ID]),
        chunk_index=int(row[CHUNK_INDEX]),
        category=str(row.get(CATEGORY) or ""),
        source=str(row.get(SOURCE) or ""),
        title=str(row.get(TITLE) or ""),
        breadcrumb=str(row.get(BREADCRUMB) or ""),
        source_type=str(row.get(SOURCE_TYPE) or ""),
        text=str(row.get(TEXT) or ""),
        terms=str(row.get(BM25_TEXT) or ""),
        tenant=str(row.get(TENANT) or ""),
        allowed_groups=tuple(str(g) for g in row.get(ALLOWED_GROUPS) or ()),
        public=row.get(ACCESS_PUBLIC) is True,
    )


class KnowledgeCollection:
    def __init__(self, connection: MilvusConnection, name: str) -> None:
        self.connection = connection
        self.name = validate_collection_name(name)
        self._layout: CollectionLayout | None = None
        self._dense_index: tuple[str, dict[str, Any]] | None = None
        self._loaded = False
        self._lock = threading.Lock()
        #: One load at a time: the warm-up and a first request both find it unloaded.
        self._load_lock = threading.Lock()
        #: Counts ``invalidate`` calls: an answer that one overtook is not cached.
        self._generation = 0
        self._measured: DenseBackground | None = None
        self._measured_known = False

    @property
    def where(self) -> str:
        return f"{self.connection.uri} (collection {self.name!r})"

    def invalidate(self) -> None:
        with self._lock:
            self._layout = None
            self._dense_index = None
            self._loaded = False
            self._measured_known = False
            self._generation += 1

    def exists(self) -> bool:
        client = self.connection.client()
        try:
            return bool(client.has_collection(self.name, timeout=self.connection.timeout_s))
        except DRIVER_ERRORS as error:
            raise translate(error, "has_collection", self.where) from error

    def layout(self) -> CollectionLayout | None:
        """The checked layout, or None when the collection does not exist."""
        cached = self._layout
        if cached is not None:
            return cached
        generation = self._generation_now()
        if not self.exists():
            self.invalidate()  # dropped by another process: nothing cached holds
            return None
        client = self.connection.client()
        try:
            description = client.describe_collection(self.name, timeout=self.connection.timeout_s)
        except DRIVER_ERRORS as error:
            raise translate(error, "describe_collection", self.where) from error
        layout = read_layout(description, where=self.where)
        self._keep(generation, _layout=layout)
        return layout

    def dense_index(self) -> tuple[str, dict[str, Any]]:
        """(index type, build parameters) of the dense vector field, as the server says;
        ("", {}) when there is none or the server does not describe it."""
        cached = self._dense_index
        if cached is not None:
            return cached
        generation = self._generation_now()
        layout = self.layout()
        found: tuple[str, dict[str, Any]] = ("", {})
        if layout is not None and layout.has_dense:
            client = self.connection.client()
            try:
                described = client.describe_index(
                    self.name, DENSE, timeout=self.connection.timeout_s
                )
            except DRIVER_ERRORS as error:
                raise translate(error, "describe_index", self.where) from error
            if isinstance(described, Mapping):
                found = _index_of(described)
            created = dict(layout.dense_index or {})
            kind = str(created.pop("type", "") or found[0]).upper()
            found = (found[0] or kind, {**created, **found[1]})
        self._keep(generation, _dense_index=found)
        return found

    def background(self) -> DenseBackground | None:
        """The dense background stored at seal; for a collection sealed before that was
        measured, measured once from its stored vectors and kept for this process."""
        layout = self.layout()
        if layout is None or not layout.has_dense:
            return None
        if layout.dense_background is not None:
            return layout.dense_background
        if not self._measured_known:
            generation = self._generation_now()
            measured = self.measure_background()
            self._keep(generation, _measured=measured, _measured_known=True)
            return measured
        return self._measured

    def measure_background(self) -> DenseBackground | None:
        """``measure_background`` over up to ``BACKGROUND_ROWS`` stored vectors."""
        layout = self.layout()
        if layout is None or not layout.has_dense:
            return None
        self.ensure_loaded()
        client = self.connection.client()
        try:
            rows = client.query(
                self.name,
                filter="",
                output_fields=[DOC_ID, DENSE],
                limit=BACKGROUND_ROWS,
                timeout=max(self.connection.timeout_s, 60.0),
            )
        except DRIVER_ERRORS as error:
            raise translate(error, "read vectors for the dense background", self.where) from error
        # float32 values, as stored: 4 bytes each instead of a float object (2,000 rows of
        # 384 dimensions are ~25 MB as lists, at the end of an ingest's seal)
        vectors = [(str(row.get(DOC_ID)), array("f", row.get(DENSE) or ())) for row in rows]
        del rows
        return measure_background(vectors)

    def require_layout(self) -> CollectionLayout:
        layout = self.layout()
        if layout is None:
            raise SearchUnavailable(
                f"Milvus collection {self.name!r} does not exist at {self.connection.uri}: "
                "ingest documents first (it is created on first ingest)"
            )
        return layout

    # ------------------------------------------------------------------ Lite full text

    def _fulltext_key(self) -> str:
        return f"fulltext:{self.name}"

    def fulltext(self) -> FullTextIndex | None:
        """The tantivy index that answers BM25 on Milvus Lite (``fulltext.py``); None on
        a server, for a collection without BM25, or before the collection exists."""
        path = self.connection.lite_path
        if path is None:
            return None
        layout = self.layout()
        if layout is None or not layout.bm25 or not fulltext_available():
            return None
        index: FullTextIndex = self.connection.shared(
            self._fulltext_key(),
            lambda: FullTextIndex(
                fulltext_root(path, self.name),
                analysis=layout.analysis,
                read_rows=self._fulltext_rows,
                count_rows=self.count_rows,
            ),
        )
        return index

    def drop_fulltext(self) -> None:
        """Forget and delete the collection's full-text index (the collection was dropped)."""
        path = self.connection.lite_path
        if path is None:
            return
        index = self.connection.unshare(self._fulltext_key())
        if isinstance(index, FullTextIndex):
            index.destroy()
        else:
            FullTextIndex.remove(fulltext_root(path, self.name))

    def count_rows(self) -> int:
        """Rows in the collection (Strong: after every earlier write)."""
        self.ensure_loaded()
        client = self.connection.client()
        try:
            rows = client.query(
                self.name,
                filter="",
                output_fields=["count(*)"],
                consistency_level="Strong",
                timeout=self.connection.timeout_s,
            )
        except DRIVER_ERRORS as error:
            raise translate(error, "count", self.where) from error
        return int(rows[0]["count(*)"]) if rows else 0

    def _fulltext_rows(self, doc_keys: Sequence[str] | None) -> Iterator[FullTextRow]:
        layout = self.require_layout()
        fields = (
            [*_FULLTEXT_FIELDS, TENANT, ALLOWED_GROUPS, ACCESS_PUBLIC]
            if layout.access
            else (_FULLTEXT_FIELDS)
        )
        return (fulltext_row(row) for row in self.read_rows(doc_keys, fields))

    def read_rows(
        self, doc_keys: Sequence[str] | None, fields: Sequence[str]
    ) -> Iterator[Mapping[str, Any]]:
        """Every row (None), or the rows of ``doc_keys`` (document keys: the doc_id scoped
        to its tenant, ``domain.access.storage_key``), read back from Milvus with
        ``fields`` (what the indexes beside a Lite file are rebuilt and repaired from)."""
        self.ensure_loaded()
        client = self.connection.client()
        layout = self.require_layout()
        filters: list[str] = [""]
        if doc_keys is not None:
            by_tenant: dict[str, list[str]] = {}
            for key in dict.fromkeys(doc_keys):
                tenant, doc_id = split_storage_key(key)
                if tenant and not layout.access:
                    continue  # a collection without access fields holds no tenant's rows
                by_tenant.setdefault(tenant, []).append(doc_id)
            filters = [
                all_of([eq(TENANT, tenant) if layout.access else None, in_list(DOC_ID, batch)])
                for tenant, ids in by_tenant.items()
                for batch in batched(ids, 200)
            ]
        for expression in filters:
            try:
                iterator = client.query_iterator(
                    self.name,
                    batch_size=1000,
                    filter=expression,
                    output_fields=list(fields),
                    consistency_level="Strong",
                    timeout=max(self.connection.timeout_s, 120.0),
                )
                try:
                    while rows := iterator.next():
                        yield from rows
                finally:
                    iterator.close()
            except DRIVER_ERRORS as error:
                raise translate(error, "read rows for an index beside Lite", self.where) from error

    def ensure_loaded(self) -> None:
        """Load the collection into memory once (a reopened Lite file starts released);
        a caller that finds a load under way waits for it instead of loading again."""
        if self._loaded:
            return
        with self._load_lock:
            if not self._loaded:
                self._load()

    def _load(self) -> None:
        generation = self._generation_now()
        client = self.connection.client()
        timeout = self.connection.timeout_s
        try:
            state = client.get_load_state(self.name, timeout=timeout)
            if "Loaded" not in str(state.get("state", "")):
                # Loading a large collection can take longer than one request.
                if self.connection.is_lite:
                    load_lite(
                        client,
                        self.name,
                        timeout_s=max(timeout, 120.0),
                        lite_path=self.connection.lite_path,
                    )
                else:
                    client.load_collection(self.name, timeout=max(timeout, 120.0))
        except DRIVER_ERRORS as error:
            raise translate(error, "load_collection", self.where) from error
        self._keep(generation, _loaded=True)

    def _generation_now(self) -> int:
        with self._lock:
            return self._generation

    def _keep(self, generation: int, **values: object) -> None:
        """Cache what the server answered, unless an ``invalidate`` came since
        ``generation`` (the collection dropped or released meanwhile): the answer may be
        stale, and the next call asks again."""
        with self._lock:
            if self._generation == generation:
                for name, value in values.items():
                    setattr(self, name, value)
