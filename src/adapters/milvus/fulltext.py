"""BM25 for Milvus Lite through tantivy: a full-text index kept beside the Lite file.

Why: Milvus Lite 3.2's BM25 is a pure-Python inverted index (``SparseInvertedIndex``:
a dict lookup per posting, ~640k per search at 100k chunks), 30 ms per search at 8.6k
chunks and 430 ms at 100k. tantivy (a Rust engine, ``tantivy`` on PyPI) answers the
same query in about a millisecond. A Milvus server keeps using its own BM25 function.

What is indexed: per chunk row its evidence key, ``doc_id``, the metadata a hit
carries, the text, and the analysed ``bm25_text`` (the product's ``TextAnalyzer``
output, space-separated terms: the index only splits on whitespace, so documents and
queries are analysed exactly as for Milvus' BM25). Scoring is tantivy's BM25 (k1 1.2,
b 0.75, statistics over the whole index; Lite uses k1 1.5 per segment, a Milvus server
k1 1.2). Filters are exact term matches on raw (untokenised) fields, the same
equality Milvus applies (``category`` today).

Where: ``<lite folder>/lookup_knowledge_fulltext/<collection>/`` (the Lite "file" is a
folder; the index sits inside it, so it is moved, copied, locked and protected with
it). ``meta.json`` holds the format and the analysis fingerprint; ``pending.jsonl`` is
the journal that makes the pair crash-safe.

Consistency with the Milvus rows (Milvus stays the source of truth):

- before every Milvus write (upsert, delete) the document keys it touches
  (``storage_key(tenant, doc_id)``) are appended to the journal and fsync'd; the index
  applies the same change after the Milvus call and commits (tantivy commits are
  atomic);
- ``settle`` (called by the store's ``seal`` after Milvus' flush) clears the journal:
  from then on both sides hold the same rows;
- on open, a non-empty journal (a crash or a failed write between the two sides)
  makes the index re-read exactly those documents from Milvus; a missing or foreign
  index (other format or analysis, unreadable), or a row count that differs from the
  collection's, rebuilds it from Milvus (``bm25_text`` is stored there, nothing is
  re-analysed). A write that fails in this process marks the index for the same
  repair before its next use.
"""

from __future__ import annotations

import contextlib
import json
import logging
import shutil
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lookup_knowledge.adapters.durable_files import FSYNCED, DurableFiles
from lookup_knowledge.adapters.milvus.pending_writes import JournalledIndex, PendingWrites
from lookup_knowledge.domain.access import UNRESTRICTED, AccessScope, storage_key
from lookup_knowledge.domain.relevance import QueryConcepts, query_reference, reference_idf

logger = logging.getLogger(__name__)

#: The folder inside a Milvus Lite folder that holds one full-text index per collection.
FULLTEXT_DIR = "lookup_knowledge_fulltext"
#: Format of the index (its fields): another value is rebuilt from Milvus.
FORMAT = 2  # 2: rows carry their document key (tenant-scoped doc_id)
_META = "meta.json"
_INDEX = "index"
#: Fields matched exactly (raw, untokenised), usable in ``where``.
FILTER_FIELDS = ("category",)
_TENANT, _GROUPS, _PUBLIC = "tenant", "allowed_groups", "access_public"
#: ``allowed_groups`` term of a row without groups (the whole tenant may see it): a NUL
#: cannot be in a group name (``validate_access_name``), so it matches no real group.
_ANY_GROUP = "\x00"
_TRUE = "true"
#: The longest list ``_one_of`` asks as a term query each (past it: one term-set query).
_TERM_CLAUSES = 256
_STORED_TEXT = ("doc_id", "category", "source", "title", "breadcrumb", "source_type", "text")


@dataclass(frozen=True, slots=True)
class FullTextRow:
    """One chunk row as the index keeps it (``terms``: the analysed ``bm25_text``)."""

    key: str
    doc_id: str
    chunk_index: int
    category: str
    source: str
    title: str
    breadcrumb: str
    source_type: str
    text: str
    terms: str
    # Access metadata (``domain/access.py``); rows written before access control: none.
    tenant: str = ""
    allowed_groups: tuple[str, ...] = ()
    public: bool = False

    @property
    def doc_key(self) -> str:
        """The store's document key: the doc_id, scoped to the row's tenant."""
        return storage_key(self.tenant, self.doc_id)


#: Reads rows from Milvus: all of them (None) or those of the given doc_ids.
RowReader = Callable[[Sequence[str] | None], Iterable[FullTextRow]]


def fulltext_root(lite_path: str, collection: str) -> Path:
    return Path(lite_path) / FULLTEXT_DIR / collection


def available() -> bool:
    """True when the ``tantivy`` package can be imported (it is a core dependency)."""
    try:
        import tantivy  # noqa: F401
    except ImportError:  # pragma: no cover - a core dependency; guarded for broken installs
        return False
    return True


def _schema() -> Any:
    import tantivy

    builder = tantivy.SchemaBuilder()
    builder.add_text_field("key", stored=True, tokenizer_name="raw", index_option="basic")
    # The document key (``storage_key(tenant, doc_id)``): what writes, deletes and repairs
    # select by, so one tenant's re-ingest of a path never touches another tenant's rows.
    builder.add_text_field("doc_key", stored=False, tokenizer_name="raw", index_option="basic")
    for name in _STORED_TEXT:  # raw: one term per value (exact match), no positions
        builder.add_text_field(name, stored=True, tokenizer_name="raw", index_option="basic")
    builder.add_integer_field("chunk_index", stored=True)
    for name in (_TENANT, _GROUPS, _PUBLIC):
        builder.add_text_field(name, stored=True, tokenizer_name="raw", index_option="basic")
    builder.add_text_field("terms", stored=False, tokenizer_name="whitespace", index_option="freq")
    return builder.build()


class FullTextIndex(JournalledIndex):
    """One collection's tantivy index and its journal; thread-safe; opened lazily."""

    def __init__(
        self,
        root: Path,
        *,
        analysis: str | None,
        read_rows: RowReader,
        count_rows: Callable[[], int],
        heap_bytes: int = 16_000_000,
        files: DurableFiles = FSYNCED,
    ) -> None:
        """``files``: how the journal and the meta file are made durable. ``heap_bytes``:
        the writer's indexing budget (tantivy's floor is 15 MB); each write batch is
        committed, so one batch's postings are what it must hold, and the hash table
        tantivy sizes from it is allocated up front (64 MB cost ~20 MB more resident
        memory on the SciFact sample ingest, benchmarks/README.md)."""
        self._root = root
        self._files = files
        self._pending = PendingWrites(root, files)
        self._analysis = analysis
        self._read_rows = read_rows
        self._count_rows = count_rows
        self._heap = heap_bytes
        self._lock = threading.RLock()
        self._index: Any = None
        self._ready = False  # opened, and rebuilt or repaired as the open found it
        self._schema: Any = None
        self._writer: Any = None
        self._searcher: Any = None
        self._needs_repair = False

    @property
    def root(self) -> Path:
        return self._root

    # ------------------------------------------------------------------ open / repair

    def _meta_ok(self) -> bool:
        try:
            meta = json.loads((self._root / _META).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return False
        return (
            isinstance(meta, dict)
            and meta.get("format") == FORMAT
            and meta.get("analysis") == self._analysis
        )

    def _write_meta(self) -> None:
        tmp = self._root / (_META + ".tmp")
        tmp.write_text(json.dumps({"format": FORMAT, "analysis": self._analysis}), "utf-8")
        with open(tmp, "rb+") as handle:
            self._files.sync(handle)
        self._files.replace(tmp, self._root / _META)

    def _ensure_open(self) -> None:
        # ``_ready``, not ``_index``: the index is set before the open's rebuild reads
        # every row, and a search let through then would see part of them.
        if self._ready and not self._needs_repair:
            return
        with self._lock:
            if self._index is None:
                try:
                    self._open()
                except BaseException:  # let go of the half-built index and its writer:
                    self.close()  # a later call opens (and rebuilds) again
                    raise
            self._ready = True
            if self._needs_repair:
                self._repair(self._pending.doc_keys())

    def _open(self) -> None:
        import tantivy

        self._root.mkdir(parents=True, exist_ok=True, mode=0o700)
        index_dir = self._root / _INDEX
        schema = _schema()
        fresh = not self._meta_ok()
        if not fresh:
            try:
                index = tantivy.Index(schema, path=str(index_dir), reuse=True)
            except ValueError as error:  # unreadable or another schema
                logger.warning(
                    "full-text index at %s unreadable (%s): rebuilding", index_dir, error
                )
                fresh = True
        if fresh:
            shutil.rmtree(index_dir, ignore_errors=True)
            index_dir.mkdir(parents=True, mode=0o700)
            index = tantivy.Index(schema, path=str(index_dir), reuse=False)
        self._index, self._schema = index, schema
        self._searcher = None
        if fresh:
            if self._count_rows():
                self._rebuild("no usable full-text index")
            self._write_meta()
            self._pending.clear()
            return
        pending = self._pending.doc_keys()
        if pending:
            self._repair(pending)
        indexed, stored = self._searcher_now().num_docs, self._count_rows()
        if indexed != stored:
            self._rebuild(f"it holds {indexed} rows, the collection {stored}")
            self._pending.clear()

    def _rebuild(self, why: str) -> None:
        logger.warning("rebuilding the full-text index %s from Milvus: %s", self._root, why)
        writer = self._writer_now()
        writer.delete_all_documents()
        for row in self._read_rows(None):
            writer.add_document(self._document(row))
        self._commit()
        self._needs_repair = False

    def _repair(self, doc_ids: Sequence[str]) -> None:
        """Re-read ``doc_ids`` (document keys) from Milvus (what a crash or a failed write
        left undone)."""
        if doc_ids:
            logger.warning(
                "full-text index %s: re-reading %d document(s) an interrupted write touched",
                self._root,
                len(doc_ids),
            )
            writer = self._writer_now()
            for doc_key in doc_ids:
                writer.delete_documents_by_term("doc_key", doc_key)
            for row in self._read_rows(doc_ids):
                writer.add_document(self._document(row))
            self._commit()
        self._needs_repair = False
        self._pending.clear()

    # ------------------------------------------------------------------ journal

    def _is_open(self) -> bool:
        return self._index is not None

    def _persist(self) -> None:
        self._commit()

    # ------------------------------------------------------------------ writes

    def _writer_now(self) -> Any:
        if self._writer is None:
            self._writer = self._index.writer(heap_size=self._heap, num_threads=1)
        return self._writer

    def _commit(self) -> None:
        self._writer_now().commit()
        self._index.reload()
        self._searcher = None

    def _document(self, row: FullTextRow) -> Any:
        import tantivy

        return tantivy.Document(
            key=row.key,
            doc_key=row.doc_key,
            doc_id=row.doc_id,
            chunk_index=int(row.chunk_index),
            category=row.category,
            source=row.source,
            title=row.title,
            breadcrumb=row.breadcrumb,
            source_type=row.source_type,
            text=row.text,
            terms=row.terms,
            tenant=row.tenant,
            allowed_groups=list(row.allowed_groups) or [_ANY_GROUP],
            access_public=_TRUE if row.public else "false",
        )

    def upsert(self, rows: Sequence[FullTextRow]) -> None:
        """Replace the rows with these keys (after Milvus upserted them)."""
        if not rows:
            return
        self._ensure_open()
        with self._lock:
            writer = self._writer_now()
            for row in rows:
                writer.delete_documents_by_term("key", row.key)
                writer.add_document(self._document(row))
            self._commit()

    def delete_except(self, doc_ids: Sequence[str], keep_keys: Sequence[str]) -> None:
        """Delete the rows of ``doc_ids`` (document keys) whose key is not in
        ``keep_keys`` (the same rows the store's tenant-scoped ``doc_id in [...] and
        evidence_key not in [...]`` deletes in Milvus)."""
        if not doc_ids:
            return
        import tantivy

        self._ensure_open()
        schema = self._schema
        docs = tantivy.Query.term_set_query(schema, "doc_key", list(dict.fromkeys(doc_ids)))
        clauses = [(tantivy.Occur.Must, docs)]
        if keep_keys:
            kept = tantivy.Query.term_set_query(schema, "key", list(keep_keys))
            clauses.append((tantivy.Occur.MustNot, kept))
        with self._lock:
            self._writer_now().delete_documents_by_query(tantivy.Query.boolean_query(clauses))
            self._commit()

    def delete_documents(self, doc_ids: Sequence[str]) -> None:
        if not doc_ids:
            return
        self._ensure_open()
        with self._lock:
            writer = self._writer_now()
            for doc_key in dict.fromkeys(doc_ids):  # document keys (tenant-scoped)
                writer.delete_documents_by_term("doc_key", doc_key)
            self._commit()

    # ------------------------------------------------------------------ reads

    def _searcher_now(self) -> Any:
        searcher = self._searcher
        if searcher is None:
            searcher = self._searcher = self._index.searcher()
        return searcher

    def count(self) -> int:
        self._ensure_open()
        return int(self._searcher_now().num_docs)

    def search(
        self,
        terms: str,
        limit: int,
        where: Mapping[str, str] | None = None,
        *,
        access: AccessScope = UNRESTRICTED,
        with_text: bool = False,
    ) -> list[dict[str, Any]]:
        """The ``limit`` best rows by BM25 for the analysed ``terms`` that match every
        ``where`` field exactly and that ``access`` may see; each a dict of the row's
        fields (the Milvus field names) plus ``distance`` (the BM25 score, positive)."""
        found = self._ranked(terms, limit, where, access, None)
        if not found:
            return []
        searcher, hits = found
        out: list[dict[str, Any]] = []
        for score, address in hits:
            doc = searcher.doc(address)
            row: dict[str, Any] = {
                "evidence_key": doc.get_first("key"),
                "chunk_index": doc.get_first("chunk_index"),
                "distance": float(score),
            }
            for name in _STORED_TEXT:
                if name != "text" or with_text:
                    row[name] = doc.get_first(name)
            row[_TENANT] = doc.get_first(_TENANT) or ""
            row[_GROUPS] = [g for g in doc.get_all(_GROUPS) if g != _ANY_GROUP]
            row[_PUBLIC] = doc.get_first(_PUBLIC) == _TRUE
            out.append(row)
        return out

    def scores(
        self,
        terms: str,
        keys: Sequence[str],
        where: Mapping[str, str] | None = None,
        *,
        access: AccessScope = UNRESTRICTED,
    ) -> dict[str, float]:
        """The BM25 score, as ``search`` ranks it, of each row of ``keys`` that holds a
        query term, matches ``where`` and that ``access`` may see; other keys absent."""
        wanted = list(dict.fromkeys(keys))
        found = self._ranked(terms, len(wanted), where, access, wanted)
        if not found:
            return {}
        searcher, hits = found
        return {str(searcher.doc(address).get_first("key")): float(s) for s, address in hits}

    def _ranked(
        self,
        terms: str,
        limit: int,
        where: Mapping[str, str] | None,
        access: AccessScope,
        keys: Sequence[str] | None,
    ) -> tuple[Any, list[tuple[float, Any]]] | None:
        """The searcher and its ``limit`` best (score, address) pairs; None when nothing
        can match (no terms, no room, no keys)."""
        import tantivy

        words = terms.split()
        if not words or limit < 1 or (keys is not None and not keys):
            return None
        self._ensure_open()
        schema = self._schema
        clauses = [
            (tantivy.Occur.Should, tantivy.Query.term_query(schema, "terms", word))
            for word in words
        ]
        query = tantivy.Query.boolean_query(clauses)
        filters = [
            (tantivy.Occur.Must, tantivy.Query.term_query(schema, name, value))
            for name, value in (where or {}).items()
        ]
        if access.enforced:
            filters.append((tantivy.Occur.Must, self._visible(access)))
        if keys is not None:
            filters.append((tantivy.Occur.Must, self._one_of("key", keys)))
        if filters:
            query = tantivy.Query.boolean_query(
                [
                    (tantivy.Occur.Must, query),
                    (
                        tantivy.Occur.Must,
                        tantivy.Query.const_score_query(tantivy.Query.boolean_query(filters), 0.0),
                    ),
                ]
            )
        searcher = self._searcher_now()
        return searcher, searcher.search(query, limit=limit, count=False).hits

    def _one_of(self, field: str, values: Sequence[str]) -> Any:
        """Rows whose ``field`` holds one of ``values``: a term query each for a short
        list (the case of a lookup: its hits' keys, a principal's groups), tantivy's
        term-set query past ``_TERM_CLAUSES``. The term-set query marks its matches in a
        bitset over the whole index before the intersection starts, ~0.2 ms at 5,000 rows
        whatever the list's length; term queries cost by the list (0.08 ms for 15 keys)
        and catch up with it at several hundred (benchmarks/README.md)."""
        import tantivy

        schema = self._schema
        if len(values) > _TERM_CLAUSES:
            return tantivy.Query.term_set_query(schema, field, list(values))
        return tantivy.Query.boolean_query(
            [(tantivy.Occur.Should, tantivy.Query.term_query(schema, field, v)) for v in values]
        )

    def reference(self, concepts: QueryConcepts) -> float | None:
        """The BM25 score of an average-length row holding each query concept once, in
        its cheapest form (``query_reference``), with the idf tantivy computes
        (statistics over the whole index, like the scores; a term no row holds as if
        one did: ``reference_idf``). None for no terms or an empty index."""
        if not any(form for forms in concepts for form in forms):
            return None
        self._ensure_open()
        searcher = self._searcher_now()
        documents = int(searcher.num_docs)
        if documents < 1:
            return None
        return query_reference(
            concepts, lambda term: reference_idf(documents, int(searcher.doc_freq("terms", term)))
        )

    def _visible(self, access: AccessScope) -> Any:
        """``can_see`` as a query: public, or the principal's tenant and (no groups on
        the row, or a group in common)."""
        import tantivy

        schema = self._schema
        public = tantivy.Query.term_query(schema, _PUBLIC, _TRUE)
        principal = access.principal
        if principal is None:
            return public
        groups = [_ANY_GROUP, *principal.sorted_groups]
        own = tantivy.Query.boolean_query(
            [
                (tantivy.Occur.Must, tantivy.Query.term_query(schema, _TENANT, principal.tenant)),
                (tantivy.Occur.Must, self._one_of(_GROUPS, groups)),
            ]
        )
        return tantivy.Query.boolean_query(
            [(tantivy.Occur.Should, public), (tantivy.Occur.Should, own)]
        )

    # ------------------------------------------------------------------ lifecycle

    def close(self) -> None:
        with self._lock:
            writer, self._writer = self._writer, None
            self._index = self._searcher = None
            self._ready = False
        if writer is not None:
            with contextlib.suppress(ValueError):
                writer.wait_merging_threads()

    def destroy(self) -> None:
        """Drop the index with its collection."""
        self.close()
        self.remove(self._root)
        self._needs_repair = False

    @staticmethod
    def remove(root: Path) -> None:
        shutil.rmtree(root, ignore_errors=True)


def batched(items: Sequence[str], size: int) -> Iterator[Sequence[str]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


__all__ = [
    "FILTER_FIELDS",
    "FULLTEXT_DIR",
    "FullTextIndex",
    "FullTextRow",
    "RowReader",
    "available",
    "batched",
    "fulltext_root",
]
