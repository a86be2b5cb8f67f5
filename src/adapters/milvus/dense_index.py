"""Dense search for Milvus Lite through FAISS HNSW: a vector index kept beside the Lite file.

Why: Milvus Lite filters every row in Python on each search, so its dense lookup grows
with the collection; this index stays flat (figures: benchmarks/README.md,
``bench_scaling.py``, ``bench_dense_libraries.py``). A Milvus server keeps its own index.

Milvus Lite stays the store of record: a search returns evidence keys and cosine scores,
and the rows' fields are read from Lite by primary key. Filters are exact: the rows a
request may see are a bitmap; up to ``exact_rows`` of them are scored exactly, up to
``scan_rows`` through a float16 scan that proves its top-k (``dense_scan.py``), more
through the graph with the bitmap as FAISS' ``IDSelector``; a search that cannot prove
its top-k complete is answered exactly.

Consistency with Milvus follows the full-text index's rules (``fulltext.py``): document
keys journalled before every Milvus write, the file (``index.bin``: a JSON header, then
the FAISS index) replaced atomically at ``settle``, a crash's journal re-read from
Milvus on open, and a missing, foreign or miscounted file rebuilt from Milvus. The
layout and the rules are in docs/operations.md.
"""

from __future__ import annotations

import itertools
import logging
import math
import os
import shutil
import struct
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from lookup_knowledge.adapters.durable_files import FSYNCED, DurableFiles
from lookup_knowledge.adapters.milvus.dense_rows import (
    DENSE_DIR,
    Codes,
    DenseRow,
    DenseRowReader,
    available,
    dense_root,
    faiss_module,
)
from lookup_knowledge.adapters.milvus.dense_scan import Scan, exact_top, flat_rows, one_thread
from lookup_knowledge.adapters.milvus.pending_writes import JournalledIndex, PendingWrites
from lookup_knowledge.domain.access import UNRESTRICTED, AccessScope

logger = logging.getLogger(__name__)

#: Format of ``index.bin``: another value is rebuilt from Milvus.
#: 2: the rows' fields as columns, the names as codes (1: a list of rows of names).
FORMAT = 2
READ_FORMATS = (1, 2)
_MAGIC = b"LKDENSE\x00"
_FILE = "index.bin"
#: Rows a request may see at most this many: the top-k is computed exactly over them
#: (one matrix-vector product, a few ms at this size) instead of through the graph, so
#: a collection of this size or less ranks as exact search does (HNSW's recall@50 falls
#: below 1 from a few thousand rows on near-uniform vectors; benchmarks/README.md).
EXACT_ROWS = 32_768
#: Rows a request may see at most this many (and more than ``EXACT_ROWS``): a float16
#: scan of every row with an exact re-rank and a proof of its top-k (``dense_scan.py``),
#: exact, as fast as the graph at 100k rows and ~33 ms per million rows on one core;
#: past it, the graph, whose recall@50 on near-uniform vectors was 0.37 at 1M rows
#: (benchmarks/README.md). Exact evidence is worth the scan's linear cost this far.
SCAN_ROWS = 2_097_152
#: ``ef`` is raised by 1/selectivity of the filter, at most this factor.
MAX_EF_FACTOR = 16
#: Deleted rows past this share of the graph: ``settle`` rebuilds it from the live rows.
COMPACT_SHARE = 0.2


class DenseIndex(JournalledIndex):
    """One collection's HNSW index and its journal; thread-safe; opened lazily."""

    def __init__(
        self,
        root: Path,
        *,
        dimension: int,
        read_rows: DenseRowReader,
        count_rows: Callable[[], int],
        m: int = 16,
        ef_construction: int = 200,
        exact_rows: int = EXACT_ROWS,
        scan_rows: int = SCAN_ROWS,
        files: DurableFiles = FSYNCED,
    ) -> None:
        self._root = root
        self._dimension = dimension
        self._read_rows = read_rows
        self._count_rows = count_rows
        self._params = {"m": m, "efConstruction": ef_construction}
        self._exact_rows = exact_rows
        self._scan_rows = scan_rows
        self._files = files
        self._pending = PendingWrites(root, files)
        self._lock = threading.RLock()
        self._opened = False
        self._needs_repair = False
        self._reset()

    def _reset(self) -> None:
        faiss = faiss_module()
        self._index: Any = faiss.IndexHNSWFlat(
            self._dimension, self._params["m"], faiss.METRIC_INNER_PRODUCT
        )
        self._index.hnsw.efConstruction = self._params["efConstruction"]
        self._keys: list[str] = []
        self._doc_keys: list[str] = []
        self._categories = Codes()
        self._tenants = Codes()
        self._groups = Codes()
        self._category: list[int] = []
        self._tenant: list[int] = []
        self._row_groups: list[tuple[int, ...]] = []
        self._public: list[bool] = []
        self._live: list[bool] = []
        self._by_key: dict[str, int] = {}
        #: The live labels of each document; None: not made yet (``_docs``).
        self._by_doc: dict[str, set[int]] | None = {}
        self._columns: dict[str, Any] | None = None  # numpy views, rebuilt after a write
        self._scan: Scan | None = None  # float16 codes of the rows, made on first use

    @property
    def root(self) -> Path:
        return self._root

    # ------------------------------------------------------------------ open / repair

    def _ensure_open(self) -> None:
        if self._opened and not self._needs_repair:
            return
        with self._lock:
            if not self._opened:
                try:
                    self._open()
                except BaseException:  # let go of the part read or rebuilt:
                    self.close()  # a later call opens (and rebuilds) again
                    raise
            if self._needs_repair:
                self._repair(self._pending.doc_keys())

    def _open(self) -> None:
        self._root.mkdir(parents=True, exist_ok=True, mode=0o700)
        loaded = self._load()
        self._opened = True
        if not loaded:
            # An empty collection (a new one, first written to) has nothing to rebuild
            # from: its index is started without a warning.
            self._rebuild("no usable dense index" if self._count_rows() else None)
            return
        pending = self._pending.doc_keys()
        if pending:
            self._repair(pending)
        stored = self._count_rows()
        if len(self._by_key) != stored:
            self._rebuild(f"it holds {len(self._by_key)} rows, the collection {stored}")

    def _load(self) -> bool:
        """Read ``index.bin``; False (nothing loaded) when it is missing or foreign."""
        faiss = faiss_module()
        path = self._root / _FILE
        try:
            handle = path.open("rb")
        except FileNotFoundError:
            return False
        try:
            with handle:
                if handle.read(len(_MAGIC)) != _MAGIC:
                    raise ValueError("not a dense index file")
                (size,) = struct.unpack("<Q", handle.read(8))
                header = orjson.loads(handle.read(size))
                if (
                    header.get("format") not in READ_FORMATS
                    or header.get("dimension") != self._dimension
                    or header.get("params") != self._params
                ):
                    return False
                # Streamed into FAISS: the file's bytes are not held beside the index.
                index = faiss.read_index(faiss.PyCallbackIOReader(handle.read))
            self._reset()
            self._index = index
            if header["format"] == FORMAT:
                self._columns_of(header["columns"])
            else:  # written before the columns: a list of rows
                self._columns_from(header["rows"])
            if index.ntotal != len(self._keys):
                raise ValueError(f"{index.ntotal} vectors for {len(self._keys)} rows")
        except (ValueError, KeyError, TypeError, struct.error, RuntimeError) as error:
            logger.warning("dense index %s unreadable (%s): rebuilding", path, error)
            self._reset()
            return False
        return True

    def _rebuild(self, why: str | None) -> None:
        if why is not None:
            logger.warning("rebuilding the dense index %s from Milvus: %s", self._root, why)
        self._reset()
        self._add(self._read_rows(None))
        self._write()
        self._pending.clear()
        self._needs_repair = False

    def _repair(self, doc_keys: Sequence[str]) -> None:
        """Re-read ``doc_keys`` from Milvus (what a crash or a failed write left undone)."""
        if doc_keys:
            logger.warning(
                "dense index %s: re-reading %d document(s) an interrupted write touched",
                self._root,
                len(doc_keys),
            )
            self._drop_documents(doc_keys)
            self._add(self._read_rows(doc_keys))
            self._write()
        self._needs_repair = False
        self._pending.clear()

    # ------------------------------------------------------------------ journal

    def _is_open(self) -> bool:
        return self._opened

    def _persist(self) -> None:
        if len(self._keys) - len(self._by_key) > COMPACT_SHARE * max(len(self._keys), 1):
            self._compact()
        self._write()

    def _write(self) -> None:
        faiss = faiss_module()
        header = {
            "format": FORMAT,
            "dimension": self._dimension,
            "params": self._params,
            "columns": self._stored_columns(),
        }
        encoded = orjson.dumps(header)
        tmp = self._root / (_FILE + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(_MAGIC)
            handle.write(struct.pack("<Q", len(encoded)))
            handle.write(encoded)
            # Streamed: a serialised copy of the whole index (~1.7 kB a row) is never made.
            faiss.write_index(self._index, faiss.PyCallbackIOWriter(handle.write))
            handle.flush()
            self._files.sync(handle)
        self._files.replace(tmp, self._root / _FILE)

    # ------------------------------------------------------------------ writes

    def _append(
        self,
        key: str,
        doc_key: str,
        category: str,
        tenant: str,
        groups: Sequence[str],
        public: bool,
        live: bool,
    ) -> None:
        label = len(self._keys)
        self._keys.append(key)
        self._doc_keys.append(doc_key)
        self._category.append(self._categories.code(category))
        self._tenant.append(self._tenants.code(tenant))
        self._row_groups.append(tuple(self._groups.code(g) for g in groups))
        self._public.append(bool(public))
        self._live.append(bool(live))
        if live:
            self._by_key[key] = label
            self._docs().setdefault(doc_key, set()).add(label)

    def _stored_columns(self) -> dict[str, Any]:
        """What the file keeps of the rows (``_columns_of`` reads it back)."""
        return {
            "key": self._keys,
            "docKey": self._doc_keys,
            "categoryNames": self._categories.names,
            "category": self._category,
            "tenantNames": self._tenants.names,
            "tenant": self._tenant,
            "groupNames": self._groups.names,
            "groups": self._row_groups,
            "public": self._public,
            "live": self._live,
        }

    def _columns_of(self, columns: dict[str, Any]) -> None:
        """The row columns as ``_write`` stored them; ``ValueError`` / ``TypeError`` /
        ``KeyError`` when they are not the columns of one set of rows."""
        keys, doc_keys = columns["key"], columns["docKey"]
        category, tenant, groups = columns["category"], columns["tenant"], columns["groups"]
        public, live = columns["public"], columns["live"]
        fields = (keys, doc_keys, category, tenant, groups, public, live)
        if not all(type(field) is list for field in fields):
            raise TypeError("a column is not a list")
        if len({len(field) for field in fields}) != 1:
            raise ValueError("columns of different lengths")
        self._categories = Codes.of(columns["categoryNames"], category)
        self._tenants = Codes.of(columns["tenantNames"], tenant)
        self._groups = Codes.of(columns["groupNames"], itertools.chain.from_iterable(groups))
        if not set(map(type, itertools.chain(keys, doc_keys))) <= {str}:
            raise TypeError("a key is not a string")
        self._keys, self._doc_keys = keys, doc_keys
        self._category, self._tenant = category, tenant
        self._row_groups = [tuple(codes) for codes in groups]
        self._public = list(map(bool, public))
        self._live = list(map(bool, live))
        self._index_live()

    def _columns_from(self, rows: list[list[Any]]) -> None:
        """The row columns from the file's rows, as ``_append`` row by row would make
        them, a column at a time (a million rows: ~1 s less of the first open)."""
        if not isinstance(rows, list):
            raise TypeError("the rows are not a list")
        if not rows:
            return
        # strict: every row as long as the others (ValueError), and seven fields long.
        keys, doc_keys, categories, tenants, groups, public, live = map(
            list, zip(*rows, strict=True)
        )
        self._keys, self._doc_keys = keys, doc_keys
        self._category = self._categories.codes(categories)
        self._tenant = self._tenants.codes(tenants)
        code = self._groups.code
        self._row_groups = [tuple(map(code, names)) if names else () for names in groups]
        self._public = list(map(bool, public))
        self._live = list(map(bool, live))
        self._index_live()

    def _index_live(self) -> None:
        """``_by_key`` from the columns (as ``_append`` keeps it); ``_by_doc`` is made
        by the first write that needs it (``_docs``), not by every open."""
        keys = self._keys
        alive = itertools.compress(range(len(keys)), self._live)
        self._by_key = {keys[label]: label for label in alive}
        self._by_doc = None

    def _docs(self) -> dict[str, set[int]]:
        """The live labels of each document (made from the columns on first use)."""
        if self._by_doc is None:
            by_doc: dict[str, set[int]] = {}
            doc_keys = self._doc_keys
            for label in itertools.compress(range(len(doc_keys)), self._live):
                found = by_doc.get(doc_keys[label])
                if found is None:
                    by_doc[doc_keys[label]] = {label}
                else:
                    found.add(label)
            self._by_doc = by_doc
        return self._by_doc

    def _kill(self, label: int) -> None:
        if self._live[label]:
            self._live[label] = False
            self._by_key.pop(self._keys[label], None)
            docs = self._docs()
            labels = docs.get(self._doc_keys[label])
            if labels is not None:
                labels.discard(label)
                if not labels:
                    del docs[self._doc_keys[label]]

    def _add(self, rows: Iterable[DenseRow]) -> None:
        batch: list[DenseRow] = []
        for row in rows:
            batch.append(row)
            if len(batch) >= 2000:
                self._add_batch(batch)
                batch = []
        self._add_batch(batch)

    def _add_batch(self, rows: Sequence[DenseRow]) -> None:
        if not rows:
            return
        latest = {row.key: row for row in rows}  # the last write of a key wins
        vectors = np.asarray([row.vector for row in latest.values()], dtype=np.float32)
        if vectors.ndim != 2 or vectors.shape[1] != self._dimension:
            raise ValueError(f"vectors of {self._dimension} dimensions expected")
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        vectors /= np.where(norms > 0, norms, 1.0)
        rewritten = self._unchanged(list(latest.values()), vectors)
        if rewritten.any():
            latest = {
                row.key: row
                for row, same in zip(latest.values(), rewritten, strict=True)
                if not same
            }
            vectors = vectors[~rewritten]
            if not latest:
                return
        for row in latest.values():
            old = self._by_key.get(row.key)
            if old is not None:
                self._kill(old)
            self._append(
                row.key, row.doc_key, row.category, row.tenant, row.allowed_groups,
                row.public, True,
            )  # fmt: skip
        self._index.add(vectors)
        self._columns = None

    def _unchanged(self, rows: Sequence[DenseRow], vectors: np.ndarray) -> np.ndarray:
        """Which of ``rows`` the index holds as they are (same vector, document and
        filter fields). Ingest writes a new document's chunk 0 twice, first marked
        pending, with the same vector: a second graph node for it would leave a dead one
        per document and a rebuild of the graph at ``settle``."""
        same = np.zeros(len(rows), dtype=bool)
        stored: np.ndarray | None = None
        for n, row in enumerate(rows):
            label = self._by_key.get(row.key)
            if (
                label is None
                or self._doc_keys[label] != row.doc_key
                or self._categories.names[self._category[label]] != row.category
                or self._tenants.names[self._tenant[label]] != row.tenant
                or tuple(self._groups.names[g] for g in self._row_groups[label])
                != tuple(row.allowed_groups)
                or self._public[label] != bool(row.public)
            ):
                continue
            if stored is None:
                stored = self._vectors()
            same[n] = bool(np.array_equal(stored[label], vectors[n]))
        return same

    def _drop_documents(self, doc_keys: Iterable[str], keep: frozenset[str] = frozenset()) -> None:
        for doc_key in dict.fromkeys(doc_keys):
            for label in list(self._docs().get(doc_key, ())):
                if self._keys[label] not in keep:
                    self._kill(label)
        self._columns = None

    def _compact(self) -> None:
        """A new graph of the live rows only (deleted rows are dropped from the file)."""
        live = [i for i, alive in enumerate(self._live) if alive]
        vectors = self._vectors()[live].copy() if live else np.empty((0, self._dimension))
        rows = [
            DenseRow(
                key=self._keys[i],
                doc_key=self._doc_keys[i],
                vector=vectors[n],
                category=self._categories.names[self._category[i]],
                tenant=self._tenants.names[self._tenant[i]],
                allowed_groups=tuple(self._groups.names[g] for g in self._row_groups[i]),
                public=self._public[i],
            )
            for n, i in enumerate(live)
        ]
        self._reset()
        self._add(rows)

    def upsert(self, rows: Sequence[DenseRow]) -> None:
        """Replace the rows with these keys (after Milvus upserted them)."""
        if not rows:
            return
        self._ensure_open()
        with self._lock:
            self._add_batch(rows)

    def delete_except(self, doc_keys: Sequence[str], keep_keys: Sequence[str]) -> None:
        """Delete the rows of ``doc_keys`` whose key is not in ``keep_keys`` (what the
        store deletes in Milvus for a re-ingested document)."""
        if not doc_keys:
            return
        self._ensure_open()
        with self._lock:
            self._drop_documents(doc_keys, frozenset(keep_keys))

    def delete_documents(self, doc_keys: Sequence[str]) -> None:
        if not doc_keys:
            return
        self._ensure_open()
        with self._lock:
            self._drop_documents(doc_keys)

    # ------------------------------------------------------------------ reads

    def count(self) -> int:
        self._ensure_open()
        return len(self._by_key)

    def _flat(self) -> Any:
        """The graph's float32 rows as a FAISS flat index (what exact search scans)."""
        return faiss_module().downcast_index(self._index.storage)

    def _vectors(self) -> np.ndarray:
        return flat_rows(self._flat())

    def _column_views(self) -> dict[str, Any]:
        columns = self._columns
        if columns is None:
            no_groups = np.fromiter((not g for g in self._row_groups), dtype=bool)
            by_group: dict[int, list[int]] = {}
            for label, groups in enumerate(self._row_groups):
                for g in groups:
                    by_group.setdefault(g, []).append(label)
            columns = self._columns = {
                "live": np.asarray(self._live, dtype=bool),
                "category": np.asarray(self._category, dtype=np.int32),
                "tenant": np.asarray(self._tenant, dtype=np.int32),
                "public": np.asarray(self._public, dtype=bool),
                "no_groups": no_groups,
                "groups": {g: np.asarray(v, dtype=np.int64) for g, v in by_group.items()},
            }
        return columns

    def _allowed(self, where: Mapping[str, str], access: AccessScope) -> np.ndarray:
        """The rows the request may see: live, the ``where`` fields equal, ``can_see``."""
        columns = self._column_views()
        mask: np.ndarray = columns["live"].copy()
        for name, value in where.items():
            if name != "category":
                raise ValueError(f"the dense index cannot filter on {name!r}")
            mask &= columns["category"] == self._categories.find(value)
        if access.enforced:
            visible = columns["public"].copy()
            principal = access.principal
            if principal is not None:
                shared = columns["no_groups"].copy()
                for group in principal.sorted_groups:
                    labels = columns["groups"].get(self._groups.find(group))
                    if labels is not None:
                        shared[labels] = True
                visible |= (columns["tenant"] == self._tenants.find(principal.tenant)) & shared
            mask &= visible
        return mask

    def _query(self, vector: Sequence[float]) -> np.ndarray:
        query = np.asarray(vector, dtype=np.float32).reshape(1, -1)
        if query.shape[1] != self._dimension:
            raise ValueError(f"a {self._dimension}-dim query vector expected")
        norm = float(np.linalg.norm(query))
        return query / norm if norm > 0 else query

    def search(
        self,
        vector: Sequence[float],
        limit: int,
        *,
        ef: int,
        where: Mapping[str, str] | None = None,
        access: AccessScope = UNRESTRICTED,
    ) -> list[tuple[str, float]]:
        """The ``limit`` rows nearest ``vector`` (cosine, best first) among those that
        match every ``where`` field exactly and that ``access`` may see."""
        faiss = faiss_module()
        query = self._query(vector)
        if limit < 1:
            return []
        one_thread()
        self._ensure_open()
        with self._lock:
            total = len(self._keys)
            filtered = bool(where) or access.enforced or len(self._by_key) != total
            mask = self._allowed(where or {}, access) if filtered else None
            rows = int(mask.sum()) if mask is not None else total
            want = min(limit, rows)
            if want == 0:
                return []
            if rows <= self._exact_rows:
                return self._exact(query[0], mask, want)
            if rows <= self._scan_rows:
                return self._scanned(query[0], want, mask, rows)
            depth = max(ef, limit)
            if mask is None:
                params = faiss.SearchParametersHNSW(efSearch=depth)
            else:
                factor = min(MAX_EF_FACTOR, math.ceil(total / rows))
                packed = np.packbits(mask, bitorder="little")
                selector = faiss.IDSelectorBitmap(total, faiss.swig_ptr(packed))
                params = faiss.SearchParametersHNSW(sel=selector, efSearch=depth * factor)
            scores, labels = self._index.search(query, want, params=params)
            found = [
                (int(n), float(s)) for n, s in zip(labels[0], scores[0], strict=True) if n >= 0
            ]
            if len(found) < want:  # the top-k is not provably complete: answer it exactly
                return self._exact(query[0], mask, want)
            return [(self._keys[n], s) for n, s in found]

    def exact(
        self,
        vector: Sequence[float],
        limit: int,
        *,
        where: Mapping[str, str] | None = None,
        access: AccessScope = UNRESTRICTED,
    ) -> list[tuple[str, float]]:
        """What ``search`` approximates: the exact top ``limit`` over every row the
        filter allows (for benchmarks and checks; cost grows with the rows)."""
        query = self._query(vector)
        one_thread()
        self._ensure_open()
        with self._lock:
            mask = self._allowed(where or {}, access)
            want = min(limit, int(mask.sum()))
            return self._exact(query[0], mask, want) if want > 0 else []

    def scores(
        self,
        vector: Sequence[float],
        keys: Sequence[str],
        *,
        where: Mapping[str, str] | None = None,
        access: AccessScope = UNRESTRICTED,
    ) -> dict[str, float]:
        """The cosine of each row of ``keys`` the filter allows (exact, whatever its rank);
        keys the index does not hold are absent."""
        query = self._query(vector)
        self._ensure_open()
        with self._lock:
            labels = np.asarray(
                [
                    label
                    for key in dict.fromkeys(keys)
                    if (label := self._by_key.get(key)) is not None
                ],
                dtype=np.int64,
            )
            if not len(labels):
                return {}
            if where or access.enforced:
                labels = labels[self._allowed(where or {}, access)[labels]]
            found = self._vectors()[labels] @ query[0]
            return {self._keys[int(n)]: float(s) for n, s in zip(labels, found, strict=True)}

    def warm(self) -> None:
        """Open the index now (read, repaired or rebuilt as a search would) and, when an
        unfiltered search would scan (more live rows than ``exact_rows``, at most
        ``scan_rows``), code them for it: what the first search would otherwise pay
        (~2 s at 100k rows, most of it reading the file)."""
        one_thread()
        self._ensure_open()
        with self._lock:
            if self._exact_rows < len(self._by_key) <= self._scan_rows:
                self._scan_codes()

    def _scan_codes(self) -> Scan:
        if self._scan is None:
            self._scan = Scan(self._dimension)
        self._scan.extend(self._vectors())
        return self._scan

    def _scanned(
        self, query: np.ndarray, want: int, mask: np.ndarray | None, rows: int
    ) -> list[tuple[str, float]]:
        found = self._scan_codes().top(query, want, self._flat(), mask, rows)
        return [(self._keys[n], s) for n, s in found]

    def _exact(
        self, query: np.ndarray, mask: np.ndarray | None, want: int
    ) -> list[tuple[str, float]]:
        found = exact_top(self._flat(), query, mask, want)
        return [(self._keys[n], s) for n, s in found]

    # ------------------------------------------------------------------ lifecycle

    def close(self) -> None:
        """Forget the in-memory index (what is not settled is in the journal)."""
        with self._lock:
            self._reset()
            self._opened = False

    def destroy(self) -> None:
        """Drop the index with its collection."""
        self.close()
        self.remove(self._root)
        self._needs_repair = False

    @staticmethod
    def remove(root: Path) -> None:
        shutil.rmtree(root, ignore_errors=True)


__all__ = ["DENSE_DIR", "DenseIndex", "DenseRow", "DenseRowReader", "available", "dense_root"]
