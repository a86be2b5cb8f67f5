"""``KnowledgeStore`` over Milvus: collection lifecycle and batched writes.

The collection is created on first use with the embedder's dimension (none for a
sparse-only store), the dense index (HNSW by default, its build parameters
configurable), and the BM25 function when the server has it: every row's ``bm25_text``
is its title, breadcrumb and text after the configured ``TextAnalyzer``, and the
collection records the analysis fingerprint and schema version. An existing
collection that does not match is a ``SchemaMismatch`` that says what to do. All
writes are upserts keyed by the evidence key, in batches; deletes are by ``doc_id``
through the filter builder. Driver failures become ``IngestError``.

Documents are named by document key (``KnowledgeStore``): a tenant's rows carry the
tenant, their primary key is ``storage_key(tenant, evidence_key)`` and every read or
delete by document is also filtered by tenant. A version-2 collection (no access
fields) takes only documents without access metadata.
"""

from __future__ import annotations

import contextlib
import logging
from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from lookup_knowledge.adapters.milvus.collection import KnowledgeCollection, fulltext_row
from lookup_knowledge.adapters.milvus.connection import MilvusConnection
from lookup_knowledge.adapters.milvus.dense_index import DenseIndex
from lookup_knowledge.adapters.milvus.errors import DRIVER_ERRORS, translate_ingest
from lookup_knowledge.adapters.milvus.filters import all_of, eq, in_list, not_in_list
from lookup_knowledge.adapters.milvus.fulltext import FullTextIndex
from lookup_knowledge.adapters.milvus.lite_dense import dense_row, drop_lite_dense, lite_dense
from lookup_knowledge.adapters.milvus.lite_flush import install as install_lite_flush
from lookup_knowledge.adapters.milvus.lite_load import load_lite
from lookup_knowledge.adapters.milvus.rows import (
    bm25_input,
    chunk_row,
    deleted_count,
    doc_key,
    fit_bytes,
    storable_doc_id,
)
from lookup_knowledge.adapters.milvus.schema import (
    BACKGROUND_PROPERTY,
    CHUNK_INDEX,
    CONTENT_HASH,
    DEFAULT_COLLECTION,
    DOC_ID,
    EMBEDDER_PROPERTY,
    PK,
    SOURCE_NAME,
    TENANT,
    CollectionLayout,
    background_property,
    build_schema,
    check_analysis,
    check_dimension,
    check_embedder,
    collection_properties,
    embedder_property,
    read_layout,
)
from lookup_knowledge.adapters.text import SnowballJiebaAnalyzer
from lookup_knowledge.application.ports import (
    ChunkRecord,
    EmbedderIdentity,
    KnowledgeStore,
    StoredDocument,
    TextAnalyzer,
    doc_key_parts,
)
from lookup_knowledge.domain.access import storage_key
from lookup_knowledge.domain.errors import (
    IngestError,
    InvalidInputError,
    SchemaMismatch,
    SearchError,
)

logger = logging.getLogger(__name__)

_CHUNK_MARK = "#chunk-"

#: Chunks past which ingest says a Milvus server fits better than Milvus Lite: the
#: largest size measured on Lite within the lookup targets (dense through the index beside
#: the file, exact and ~10 ms; BM25 through tantivy: flat from 5k to 100k chunks,
#: docs/operations.md, "When to move from Milvus Lite to a Milvus server";
#: benchmarks/bench_scaling.py). Past it the exact dense scan grows with the chunks (~33
#: ms a million on one core), and so do ingest (an hour for 1M synthetic chunks), memory
#: (the vectors are held by Lite and by the index beside it) and opening the file.
#: Ingest says so once, in the run that grows a Lite collection past it.
LITE_SERVER_ADVICE_ROWS = 100_000


def lite_size_notice(rows: int) -> str:
    return (
        f"this Milvus Lite collection now holds {rows:,} chunks; lookups were measured flat "
        f"up to {LITE_SERVER_ADVICE_ROWS:,}, but past it the dense search, ingest, memory and "
        "opening the file grow with every chunk: for a larger knowledge base (or "
        "several processes) run a Milvus server, set milvus.uri=http://host:19530 and "
        "ingest there"
    )


#: Bytes of rows (strings as UTF-8, vectors as float32) a Milvus Lite collection takes
#: before ingest flushes it. Lite keeps written rows in memory until a flush and turns
#: every value of them into a Python object to write them out (``MemTable.flush`` in
#: milvus-lite 3.2), about four times their size; its own budget is 128 MB of Arrow
#: buffers, so an ingest of SciFact (9,984 chunks) held all of them and spiked by
#: ~155 MB in the final flush. 16 MB bounds that spike at ~60 MB whatever the corpus;
#: each flush writes a segment that Lite compacts in the background
#: (benchmarks/README.md, "Whole-corpus ingest: Lite flushed every 16 MB of rows").
LITE_FLUSH_BYTES = 16 * 1024 * 1024


def row_bytes(row: Mapping[str, Any]) -> int:
    """What a row weighs in Lite's buffers, roughly: its strings' UTF-8 bytes, four
    bytes per vector or array element, eight per other value."""
    size = 0
    for value in row.values():
        if isinstance(value, str):
            size += len(value.encode("utf-8"))
        elif isinstance(value, list | tuple):
            size += sum(len(v.encode("utf-8")) if isinstance(v, str) else 4 for v in value)
        else:
            size += 8
    return size


#: The dense index a new collection gets: HNSW (Lite builds it with faiss) with
#: Milvus' usual build parameters; search depth ``ef`` is the search adapter's.
DEFAULT_INDEX_TYPE = "HNSW"
DEFAULT_INDEX_PARAMS: Mapping[str, Any] = {"M": 16, "efConstruction": 200}


class MilvusKnowledgeStore(KnowledgeStore):
    def __init__(
        self,
        connection: MilvusConnection,
        *,
        collection: str = DEFAULT_COLLECTION,
        index_type: str = DEFAULT_INDEX_TYPE,
        index_params: Mapping[str, Any] | None = None,
        analyzer: TextAnalyzer | None = None,
        text_analyzer: Mapping[str, Any] | None = None,
        consistency_level: str = "Bounded",
        write_batch_size: int = 500,
        filter_batch_size: int = 200,
        lite_flush_bytes: int = LITE_FLUSH_BYTES,
        owns_connection: bool = False,
    ) -> None:
        if write_batch_size < 1 or filter_batch_size < 1 or lite_flush_bytes < 1:
            raise InvalidInputError(
                "write_batch_size, filter_batch_size and lite_flush_bytes must be >= 1"
            )
        self._connection = connection
        self._collection = KnowledgeCollection(connection, collection)
        self._index_type = index_type
        self._index_params = dict(
            index_params
            if index_params is not None
            else (DEFAULT_INDEX_PARAMS if index_type == DEFAULT_INDEX_TYPE else {})
        )
        # The product's analysis unless told otherwise (the container passes the
        # configured one); ``text_analyzer``: Milvus analyzer params of bm25_text.
        self._text = analyzer if analyzer is not None else SnowballJiebaAnalyzer()
        self._analyzer = dict(text_analyzer) if text_analyzer else None
        self._consistency = consistency_level
        self._batch = write_batch_size
        self._filter_batch = filter_batch_size
        self._owns_connection = owns_connection
        self._rows_before: int | None = None  # Lite: rows when this run began
        self._unflushed = 0  # Lite: bytes of rows written since its last flush
        self._flush_bytes = lite_flush_bytes
        self._notices: list[str] = []

    @classmethod
    def open(
        cls,
        uri: str,
        *,
        token: str | None = None,
        db_name: str | None = None,
        timeout_s: float = 30.0,
        **options: Any,
    ) -> MilvusKnowledgeStore:
        connection = MilvusConnection(uri, token=token, db_name=db_name, timeout_s=timeout_s)
        return cls(connection, owns_connection=True, **options)

    @property
    def collection_name(self) -> str:
        return self._collection.name

    def close(self) -> None:
        if self._owns_connection:
            self._connection.close()

    # ------------------------------------------------------------------ helpers

    def _client(self) -> Any:
        try:
            return self._connection.client()
        except SearchError as error:
            raise IngestError(f"{error.code}: {error.message}") from error

    def _layout(self) -> CollectionLayout | None:
        try:
            layout = self._collection.layout()
            if layout is not None:
                self._collection.ensure_loaded()
            return layout
        except SchemaMismatch:
            raise
        except SearchError as error:
            raise IngestError(f"{error.code}: {error.message}") from error

    def _require(self) -> CollectionLayout:
        layout = self._layout()
        if layout is None:
            raise IngestError(
                f"Milvus collection {self._collection.name!r} does not exist at "
                f"{self._connection.uri}; ensure_collection first"
            )
        return layout

    def _read(self, action: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        """Reads (and deletes by filter, which read first) see every earlier write."""
        return self._call(action, fn, *args, consistency_level="Strong", **kwargs)

    def _call(self, action: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, timeout=self._connection.timeout_s, **kwargs)
        except DRIVER_ERRORS as error:
            raise translate_ingest(error, action, self._collection.where) from error

    # ------------------------------------------------------------------ lifecycle

    def ensure_collection(
        self,
        dimension: int | None,
        embedder: EmbedderIdentity | None = None,
        *,
        create: bool = True,
    ) -> None:
        if dimension is not None and dimension < 1:
            raise InvalidInputError("dimension must be >= 1")
        layout = self._layout()
        if self._connection.is_lite:
            self._rows_before = self.count() if layout is not None else 0
        if layout is not None:
            check_dimension(layout, dimension, where=self._collection.where)
            check_analysis(layout, self._text.fingerprint, where=self._collection.where)
            check_embedder(layout, embedder, where=self._collection.where)
            return
        if not create:
            return
        try:
            server = self._connection.capabilities()
        except SearchError as error:
            raise IngestError(f"{error.code}: {error.message}") from error
        if not server.bm25:
            logger.warning(
                "Milvus %s has no BM25 function: collection %s is created for dense search "
                "only (sparse and hybrid need %s)",
                server.version,
                self._collection.name,
                server.requirement(),
            )
        if dimension is None and not server.bm25:
            raise IngestError(
                f"a store without an embedder needs the BM25 function of {server.requirement()}; "
                f"the server at {self._connection.uri} is {server.version}: configure an embedder"
            )
        self._create(dimension, server.bm25, embedder)
        self._collection.invalidate()
        created = self._layout()
        if created is None:  # pragma: no cover - the server lost what it just created
            raise IngestError(f"collection {self._collection.name!r} vanished after creation")
        check_dimension(created, dimension, where=self._collection.where)

    def _create(self, dimension: int | None, bm25: bool, embedder: EmbedderIdentity | None) -> None:
        client = self._client()
        properties = collection_properties(
            self._text.fingerprint if bm25 else None,
            {"type": self._index_type, **self._index_params} if dimension is not None else None,
        )
        if embedder is not None:
            properties[EMBEDDER_PROPERTY] = embedder_property(embedder)
        schema, index = build_schema(
            client,
            dimension=dimension,
            bm25=bm25,
            analyzer_params=self._analyzer,
            index_type=self._index_type,
            index_params=self._index_params,
        )
        try:
            client.create_collection(
                self._collection.name,
                schema=schema,
                index_params=index,
                consistency_level=self._consistency,
                properties=properties,
                timeout=max(self._connection.timeout_s, 60.0),
            )
        except DRIVER_ERRORS as error:
            # A server may create the collection and then fail on an index: leave
            # nothing half-made behind.
            try:
                if client.has_collection(self._collection.name):
                    client.drop_collection(self._collection.name)
            except DRIVER_ERRORS:
                pass
            raise translate_ingest(error, "create_collection", self._collection.where) from error

    def drop_collection(self) -> bool:
        """Drop the collection (for a re-ingest from scratch); True when it existed."""
        client = self._client()
        existed = bool(self._call("has_collection", client.has_collection, self._collection.name))
        if existed:
            self._call("drop_collection", client.drop_collection, self._collection.name)
        self._collection.drop_fulltext()
        drop_lite_dense(self._collection)  # the dense index beside Lite (lite_dense.py)
        self._collection.invalidate()
        return existed

    def describe(self) -> dict[str, object]:
        """What an operator wants to know: name, dimension, BM25, rows, server version."""
        layout = self._layout()
        try:
            server = self._connection.capabilities()
        except SearchError as error:
            raise IngestError(f"{error.code}: {error.message}") from error
        return {
            "collection": self._collection.name,
            "uri": self._connection.uri,
            "exists": layout is not None,
            "dimension": layout.dimension if layout else None,
            "bm25": layout.bm25 if layout else None,
            "analysis": layout.analysis if layout else None,
            "schemaVersion": layout.schema_version if layout else None,
            "embedder": layout.embedder.describe() if layout and layout.embedder else None,
            "rows": self.count(),
            "serverVersion": server.version,
        }

    def seal(self) -> None:
        """Flush the growing segments and have every segment indexed before returning.

        Milvus Lite searches unflushed rows far slower (benchmarks/README.md). And Lite
        builds the index of a flushed segment on a background thread, searching the
        segment exactly (brute force) until it is done: the first searches after an
        ingest returned other neighbours than later ones. Releasing and loading the
        collection builds the missing indexes synchronously, so every search after
        ``seal`` sees the same, indexed, state."""
        if self._layout() is None:
            return
        client = self._client()
        self._call("flush", client.flush, self._collection.name)
        self._unflushed = 0
        if self._connection.is_lite:
            self._reload_indexed(client)
            index = self._collection.fulltext()
            self._collection.invalidate()
            if index is not None:
                index.settle()  # Milvus has flushed: both sides hold the same rows
            if (dense := lite_dense(self._collection)) is not None:
                dense.settle()  # the dense index beside Lite, likewise (lite_dense.py)
            self._advise()
        self._store_background(client)

    def _store_background(self, client: Any) -> None:
        """Measure the dense background of the sealed rows and store it with the
        collection (a property), so a lookup reads it instead of measuring it."""
        try:
            background = self._collection.measure_background()
        except SearchError as error:
            raise IngestError(f"{error.code}: {error.message}") from error
        if background is None:
            return
        self._call(
            "alter_collection_properties",
            client.alter_collection_properties,
            self._collection.name,
            properties={BACKGROUND_PROPERTY: background_property(background)},
        )
        self._collection.invalidate()

    def _advise(self) -> None:
        """Say once, in the run that crosses it, that the collection outgrew Lite."""
        before, self._rows_before = self._rows_before, None
        if before is None or before >= LITE_SERVER_ADVICE_ROWS:
            return
        rows = self.count()
        if rows >= LITE_SERVER_ADVICE_ROWS:
            notice = lite_size_notice(rows)
            logger.info(notice)
            self._notices.append(notice)

    def notices(self) -> tuple[str, ...]:
        out, self._notices = tuple(self._notices), []
        return out

    def _reload_indexed(self, client: Any) -> None:
        """Release and load (Lite): ``load`` builds or reads every segment's index;
        ``load_lite`` retries a load that met an index file being written and repairs
        one a crash left damaged (``lite_load.py``)."""
        try:
            load_lite(
                client,
                self._collection.name,
                timeout_s=max(self._connection.timeout_s, 600.0),
                lite_path=self._connection.lite_path,
                release_first=True,
            )
        except DRIVER_ERRORS as error:
            raise translate_ingest(error, "load_collection", self._collection.where) from error

    # ------------------------------------------------------------------ reads

    def count(self) -> int:
        if self._layout() is None:
            return 0
        client = self._client()
        rows = self._read(
            "count", client.query, self._collection.name, filter="", output_fields=["count(*)"]
        )
        return int(rows[0]["count(*)"]) if rows else 0

    def documents(self, doc_ids: Sequence[str] | None = None) -> dict[str, StoredDocument]:
        layout = self._layout()
        if layout is None:
            return {}
        client = self._client()
        head = eq(CHUNK_INDEX, 0)
        filters: list[str]
        if doc_ids is None:
            filters = [head]
        else:
            filters = [all_of([head, e]) for e in self._by_document(layout, doc_ids)]
        fields = [DOC_ID, CONTENT_HASH, SOURCE_NAME, *([TENANT] if layout.access else [])]
        out: dict[str, StoredDocument] = {}
        for expression in filters:
            rows = self._read(
                "read content hashes",
                client.query,
                self._collection.name,
                filter=expression,
                output_fields=fields,
            )
            for row in rows:
                tenant = row.get(TENANT)
                key = storage_key(tenant if isinstance(tenant, str) else "", str(row[DOC_ID]))
                out[key] = StoredDocument(
                    content_hash=str(row[CONTENT_HASH]),
                    source_name=str(row.get(SOURCE_NAME) or ""),
                )
        return out

    def _by_document(self, layout: CollectionLayout, doc_keys: Sequence[str]) -> list[str]:
        """Expressions (one per tenant and batch) that select the rows of ``doc_keys``."""
        by_tenant: dict[str, list[str]] = defaultdict(list)
        for key in dict.fromkeys(doc_keys):
            tenant, doc_id = doc_key_parts(key)
            if not storable_doc_id(doc_id):
                continue
            if tenant and not layout.access:
                continue  # a version-2 collection holds no tenant's document
            by_tenant[tenant].append(doc_id)
        out: list[str] = []
        for tenant, ids in by_tenant.items():
            scope = eq(TENANT, tenant) if layout.access else None
            for i in range(0, len(ids), self._filter_batch):
                out.append(all_of([scope, in_list(DOC_ID, ids[i : i + self._filter_batch])]))
        return out

    # ------------------------------------------------------------------ writes

    def upsert_chunks(self, records: Sequence[ChunkRecord]) -> int:
        if not records:
            return 0
        layout = self._require()
        client = self._client()
        if self._connection.is_lite:
            install_lite_flush()  # Lite's flush without a Python object per value
        index = self._collection.fulltext()
        dense = lite_dense(self._collection)
        written = 0
        for start in range(0, len(records), self._batch):
            rows = [
                chunk_row(r, layout, self._text, self._collection.where)
                for r in records[start : start + self._batch]
            ]
            keys = [doc_key(row) for row in rows]
            with self._mirrored(index, keys), self._mirrored(dense, keys):
                self._call("upsert", client.upsert, self._collection.name, data=rows)
                if index is not None:
                    index.upsert([fulltext_row(row) for row in rows])
                if dense is not None:
                    dense.upsert([dense_row(row) for row in rows])
            written += len(rows)
            self._bound_unflushed(client, rows)
        return written

    def _bound_unflushed(self, client: Any, rows: Sequence[Mapping[str, Any]]) -> None:
        """On Lite, flush once ``LITE_FLUSH_BYTES`` of rows are written and unflushed,
        so the memory a flush takes does not grow with the corpus. The rows are durable
        either way (Lite's write-ahead log); ``seal`` flushes the rest."""
        if not self._connection.is_lite:
            return
        self._unflushed += sum(row_bytes(row) for row in rows)
        if self._unflushed >= self._flush_bytes:
            self._call("flush", client.flush, self._collection.name)
            self._unflushed = 0

    @contextlib.contextmanager
    def _mirrored(
        self, index: FullTextIndex | DenseIndex | None, doc_keys: Sequence[str]
    ) -> Iterator[None]:
        """A Milvus write and the same change to an index beside Lite (full-text, dense):
        the document keys (``storage_key(tenant, doc_id)``) are journalled first, and a
        failure leaves the index to be repaired from Milvus before its next use
        (``fulltext.py``, ``dense_index.py``)."""
        if index is None:
            yield
            return
        try:
            index.mark(doc_keys)
        except OSError as error:
            raise IngestError(
                f"cannot write the journal of the index in {index.root}: {error}"
            ) from error
        try:
            yield
        except BaseException:
            index.failed()
            raise

    def delete_chunks_except(self, doc_ids: Sequence[str], keep_keys: Sequence[str]) -> int:
        if not doc_ids:
            return 0
        layout = self._require()
        client = self._client()
        keep: dict[str, list[str]] = defaultdict(list)
        for key in keep_keys:
            keep[key.rsplit(_CHUNK_MARK, 1)[0]].append(key)
        deleted = 0
        unique = list(dict.fromkeys(doc_ids))
        index = self._collection.fulltext()
        dense = lite_dense(self._collection)
        for start in range(0, len(unique), self._filter_batch):
            docs = unique[start : start + self._filter_batch]
            kept = [k for d in docs for k in keep.get(d, ())]
            with self._mirrored(index, docs), self._mirrored(dense, docs):
                for expression in self._by_document(layout, docs):
                    selected = all_of([expression, not_in_list(PK, kept) if kept else None])
                    result = self._read(
                        "delete stale chunks", client.delete, self._collection.name, filter=selected
                    )
                    deleted += deleted_count(result)
                if index is not None:
                    index.delete_except(docs, kept)
                if dense is not None:
                    dense.delete_except(docs, kept)
        return deleted

    def delete_documents(self, doc_ids: Sequence[str]) -> int:
        layout = self._layout()
        if not doc_ids or layout is None:
            return 0
        client = self._client()
        unique = list(dict.fromkeys(doc_ids))
        index = self._collection.fulltext()
        dense = lite_dense(self._collection)
        deleted = 0
        with self._mirrored(index, unique), self._mirrored(dense, unique):
            for expression in self._by_document(layout, unique):
                result = self._read(
                    "delete documents", client.delete, self._collection.name, filter=expression
                )
                deleted += deleted_count(result)
            if index is not None:
                index.delete_documents(unique)
            if dense is not None:
                dense.delete_documents(unique)
        return deleted


__all__ = [
    "LITE_SERVER_ADVICE_ROWS",
    "MilvusKnowledgeStore",
    "bm25_input",
    "fit_bytes",
    "lite_size_notice",
    "read_layout",
]
