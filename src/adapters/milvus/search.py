"""``MilvusKnowledgeSearch``: Milvus as one ranked list per search mode.

- DENSE: COSINE over the dense vector field (score kind ``cosine``). The search
  parameters follow the collection's index: HNSW (and Lite's AUTOINDEX, which is
  HNSW) searches with ``ef = max(search_ef, limit)``, as Milvus' own ``ef = limit``
  misses neighbours (benchmarks/README.md). On Milvus Lite the list comes from
  ``_lite_dense``.
- SPARSE: the BM25 full-text function on ``bm25_text``; the query goes through the same
  ``TextAnalyzer`` as the documents did (score kind ``bm25``). A collection analysed
  otherwise is refused (``SchemaMismatch``). On Milvus Lite, whose BM25 is a slow
  pure-Python inverted index, BM25 is answered by the tantivy index the store keeps
  beside the Lite file (``fulltext.py``: the same analysed terms, the same filters,
  positive scores); a server >= 2.5 uses its own BM25 function.
- HYBRID: both lists, ungrouped; on a server the BM25 list is fetched on a worker
  thread while the dense search runs, on Lite one after the other.

Fusion, client-side grouping and the choice between engine and client grouping are the
application's ``HybridSearch`` (``search`` delegates to it); why Milvus'
``hybrid_search`` is not used is said there.

Access control: every request carries an ``AccessScope``; under ``enforced`` its filter
(``filters.access_filter``) is ANDed into the one expression every list of the request
uses, and into ``fetch_content``'s. Hits carry the row's access fields, which the
application checks again. A collection without access fields (schema version 2) is
refused under ``enforced``. The category filter is written by ``filters.eq`` only.
``include_content`` False leaves the text out: content is fetched for the survivors by
``fetch_content`` (primary-key lookup).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from typing import Any

from lookup_knowledge.adapters.milvus.collection import KnowledgeCollection
from lookup_knowledge.adapters.milvus.connection import MilvusConnection, ServerCapabilities
from lookup_knowledge.adapters.milvus.errors import (
    DRIVER_ERRORS,
    collection_missing,
    index_failures,
    translate,
)
from lookup_knowledge.adapters.milvus.filters import access_filter, all_of, eq, in_list
from lookup_knowledge.adapters.milvus.hits import (
    RowReader,
    fits,
    flat_hit,
    refuse_without_access,
    row_access,
    row_key,
    storable_keys,
)
from lookup_knowledge.adapters.milvus.lite_dense import (
    expressible,
    index_ef,
    lite_dense,
    lite_dense_search,
)
from lookup_knowledge.adapters.milvus.query import SearchQuery, unsupported_mode
from lookup_knowledge.adapters.milvus.schema import (
    ACCESS_FIELDS,
    BM25_TEXT,
    CATEGORY,
    DEFAULT_COLLECTION,
    DENSE,
    DOC_ID,
    LIGHT_FIELDS,
    MAX_BYTES,
    PK,
    SPARSE,
    TEXT,
    CollectionLayout,
    check_analysis,
    check_embedder,
)
from lookup_knowledge.adapters.text import SnowballJiebaAnalyzer
from lookup_knowledge.application.hybrid_search import FusionSettings, HybridSearch
from lookup_knowledge.application.ports import (
    KnowledgeSearchHit,
    KnowledgeSearchPort,
    KnowledgeSearchRequest,
    RankedList,
    RankedListSource,
    SearchCapabilities,
    TextAnalyzer,
)
from lookup_knowledge.domain.access import UNRESTRICTED, AccessScope, DocumentAccess
from lookup_knowledge.domain.errors import (
    InvalidInputError,
    SchemaMismatch,
    SearchBadRequest,
    SearchError,
)
from lookup_knowledge.domain.fusion import check_fusion_parameters
from lookup_knowledge.domain.identity import extract_identity
from lookup_knowledge.domain.model import SearchMode
from lookup_knowledge.domain.relevance import HitCalibration, QueryConcepts, ScoreKind

MAX_TOP_K = 16384  # Milvus' topk limit
#: HNSW search depth: the smallest ef whose top 50 held >= 0.995 of the exact top 50
#: on SciFact (benchmarks/bench_dense_recall.py).
DEFAULT_SEARCH_EF = 256
_GRAPH_INDEXES = frozenset({"HNSW", "HNSW_SQ", "HNSW_PQ", "HNSW_PRQ"})
_LIST_KIND = {SearchMode.DENSE: ScoreKind.COSINE, SearchMode.SPARSE: ScoreKind.BM25}


class MilvusKnowledgeSearch(KnowledgeSearchPort, RankedListSource):
    def __init__(
        self,
        connection: MilvusConnection,
        *,
        collection: str = DEFAULT_COLLECTION,
        rrf_k: int = 60,
        hybrid_weights: tuple[float, float] | None = None,
        hybrid_candidates: int | None = None,
        client_grouping_oversample: int = 4,
        fetch_batch_size: int = 256,
        consistency_level: str | None = None,
        analyzer: TextAnalyzer | None = None,
        search_ef: int = DEFAULT_SEARCH_EF,
        concurrent_hybrid: bool | None = None,
        owns_connection: bool = False,
    ) -> None:
        check_fusion_parameters(rrf_k, hybrid_weights)
        if search_ef < 1:
            raise InvalidInputError("search_ef must be >= 1")
        if hybrid_candidates is not None and hybrid_candidates < 1:
            raise InvalidInputError("hybrid_candidates must be >= 1")
        if client_grouping_oversample < 1 or fetch_batch_size < 1:
            raise InvalidInputError("client_grouping_oversample and fetch_batch_size must be >= 1")
        self._connection = connection
        self._collection = KnowledgeCollection(connection, collection)
        self._fusing = HybridSearch(
            self,
            FusionSettings(
                rrf_k=rrf_k,
                weights=hybrid_weights,
                hybrid_candidates=hybrid_candidates,
                client_grouping_oversample=client_grouping_oversample,
                max_list=MAX_TOP_K,
            ),
        )
        self._owns_connection = owns_connection
        self._text = analyzer if analyzer is not None else SnowballJiebaAnalyzer()
        self._ef = search_ef
        # None: concurrent on a server, one after the other on Lite (see ``_hybrid``).
        self._concurrent = (
            not connection.is_lite if concurrent_hybrid is None else concurrent_hybrid
        )
        self._pool: ThreadPoolExecutor | None = None
        self._pool_lock = threading.Lock()
        # None: the collection's level (Bounded as created by MilvusKnowledgeStore).
        # "Strong" makes a server wait for its time tick on every read (~0.2-0.4 s).
        self._read: dict[str, Any] = (
            {"consistency_level": consistency_level} if consistency_level else {}
        )
        self._rows = RowReader(self._collection, fetch_batch_size, self._read)

    @classmethod
    def open(
        cls,
        uri: str,
        *,
        token: str | None = None,
        db_name: str | None = None,
        timeout_s: float = 10.0,
        **options: Any,
    ) -> MilvusKnowledgeSearch:
        """A search adapter with its own connection (closed by ``close``)."""
        connection = MilvusConnection(uri, token=token, db_name=db_name, timeout_s=timeout_s)
        return cls(connection, owns_connection=True, **options)

    @property
    def collection_name(self) -> str:
        return self._collection.name

    def close(self) -> None:
        with self._pool_lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)
        if self._owns_connection:
            self._connection.close()

    # ------------------------------------------------------------------ capabilities

    def _modes(
        self, server: ServerCapabilities, layout: CollectionLayout | None
    ) -> set[SearchMode]:
        modes: set[SearchMode] = set()
        dense = layout.has_dense if layout is not None else True
        sparse = server.bm25 and (layout.bm25 if layout is not None else True)
        if dense:
            modes.add(SearchMode.DENSE)
        if sparse:
            modes.add(SearchMode.SPARSE)
        if dense and sparse and server.hybrid:
            modes.add(SearchMode.HYBRID)
        return modes

    def search_parameters(self) -> Mapping[str, object]:
        """Analysis, dense index and search parameters, for the retrieval trace (what
        the collection says where it is reachable; never raises)."""
        try:
            layout = self._collection.layout()
            index_type, index_params = self._collection.dense_index() if layout else ("", {})
        except (SearchError, SchemaMismatch):
            return {
                "analysis": self._text.fingerprint,
                "queryExpansion": self._text.query_expansion,
                "bm25Field": BM25_TEXT,
            }
        dense_search: dict[str, object] = {"metric": "COSINE"}
        if self._graph(index_type):
            dense_search["ef"] = self._ef
            dense_search["efRule"] = "max(ef, limit)"
        return {
            "analysis": self._text.fingerprint,
            "collectionAnalysis": layout.analysis if layout else None,
            "queryExpansion": self._text.query_expansion,
            "bm25Field": BM25_TEXT,
            "denseIndex": {"type": index_type, **index_params},
            "denseSearch": dense_search,
        }

    def _access_filter(self, scope: AccessScope) -> str | None:
        """The scope's filter; groups by LIKE on Lite (fast, no array read), by
        ``array_contains_any`` on a server (before 2.4 it takes prefix patterns only)."""
        return access_filter(scope, array_groups=not self._connection.is_lite)

    def _graph(self, index_type: str) -> bool:
        return index_type in _GRAPH_INDEXES or (
            index_type == "AUTOINDEX" and self._connection.is_lite
        )

    def capabilities(self) -> SearchCapabilities:
        server = self._connection.capabilities()
        layout = self._collection.layout()
        return SearchCapabilities(
            modes=frozenset(self._modes(server, layout)),
            grouping=server.grouping,
            server_version=server.version,
        )

    def check(self) -> str:
        server = self._connection.capabilities()
        exists = self._collection.exists()  # a live round trip, never cached
        state = f"collection {self._collection.name!r}" + ("" if exists else " (not created yet)")
        return f"Milvus {server.version or '(Lite)'}, {state}"

    def holds_nothing(self) -> bool:
        return not self._collection.exists()

    def warm(self) -> None:
        """Load the collection and, on Milvus Lite, open the dense and full-text indexes
        beside the file (the dense one coded for its scan): at 100,000 chunks ~3 s the
        first lookup would otherwise pay. Nothing is made for a collection not ingested."""
        try:
            if not self._collection.exists():
                return
            self._collection.ensure_loaded()
            if (dense := lite_dense(self._collection)) is not None:
                with index_failures("dense", self._collection.where):
                    dense.warm()
            if (text := self._collection.fulltext()) is not None:
                with index_failures("full-text", self._collection.where):
                    text.count()
        except DRIVER_ERRORS as error:
            raise translate(error, "warm-up", self._collection.where) from error

    # ------------------------------------------------------------------ search

    def search(self, request: KnowledgeSearchRequest) -> list[KnowledgeSearchHit]:
        try:
            return self._fusing.search(request)
        except SearchError as error:
            if collection_missing(error.__cause__):
                self._collection.invalidate()  # what was cached about it is stale
            raise

    def native_grouping(self) -> bool:
        return self._connection.capabilities().grouping

    def ranked_lists(
        self, request: KnowledgeSearchRequest, *, limit: int, group_size: int | None
    ) -> tuple[RankedList, ...]:
        query = self._query(request)
        if query is None:
            return ()
        mode = request.mode
        rows: dict[SearchMode, list[Any]]
        try:
            if mode is SearchMode.DENSE:
                rows = {mode: self._dense(query, limit, group_size)}
            elif mode is SearchMode.SPARSE:
                rows = {mode: self._sparse(query, limit, group_size)}
            else:
                rows = self._hybrid_lists(query, limit)
        except DRIVER_ERRORS as error:
            raise translate(error, f"{mode.value} search", self._collection.where) from error
        calibration = HitCalibration(
            bm25_reference=self._bm25_reference(self._text.query_concepts(request.query_text))
            if query.terms
            else None,
            dense_background=self._collection.background() if query.vector is not None else None,
        )
        return tuple(
            RankedList(each, self._hits(found, _LIST_KIND[each], query.with_text, calibration))
            for each, found in rows.items()
        )

    def list_scores(
        self, request: KnowledgeSearchRequest, mode: SearchMode, keys: Sequence[str]
    ) -> dict[str, float]:
        """Each row's score in ``mode``'s list, by a search of that list restricted to the
        rows of ``keys`` (and to the request's filter): on Lite the dense index's exact
        cosine and the full-text index's BM25, on a server the same search with
        ``pk in [...]``. Keys no filter can name are left out."""
        wanted = [key for key in dict.fromkeys(keys) if expressible(key)]
        query = self._query(request) if wanted else None
        if query is None or (mode is SearchMode.SPARSE and not query.terms):
            return {}
        if mode is SearchMode.DENSE and query.vector is None:
            return {}
        try:
            rows = self._restricted(query, mode, wanted)
        except DRIVER_ERRORS as error:
            raise translate(error, f"{mode.value} scoring", self._collection.where) from error
        return {key: float(row["distance"]) for row in rows if (key := row_key(row)) is not None}

    def _restricted(self, query: SearchQuery, mode: SearchMode, keys: list[str]) -> list[Any]:
        """``mode``'s rows among ``keys`` with their scores (driver errors propagate)."""
        if mode is SearchMode.DENSE:
            beside = lite_dense(self._collection)
            if beside is not None:
                with index_failures("dense", self._collection.where):
                    found = beside.scores(
                        query.vector or [], keys, where=query.where, access=query.access
                    )
                return [{PK: key, "distance": score} for key, score in found.items()]
        elif (index := self._collection.fulltext()) is not None:
            with index_failures("full-text", self._collection.where):
                scored = index.scores(query.terms, keys, query.where, access=query.access)
            return [{PK: key, "distance": score} for key, score in scored.items()]
        only = replace(
            query,
            expression=all_of([query.expression, in_list(PK, keys)]),
            output_fields=[PK],
            with_text=False,
        )
        if mode is SearchMode.DENSE:
            params = dict(query.dense_params)
            if "ef" in params:
                params["ef"] = max(int(params["ef"]), len(keys))
            return self._one(DENSE, query.vector, "COSINE", params, only, len(keys), None)
        return self._one(SPARSE, query.terms, "BM25", {}, only, len(keys), None)

    def _query(self, request: KnowledgeSearchRequest) -> SearchQuery | None:
        """What the request sends, checked against the server and the collection; None
        when nothing can match (stop words only for BM25, a category longer than any)."""
        server = self._connection.capabilities()
        layout = self._collection.require_layout()
        mode = request.mode
        if mode not in self._modes(server, layout):
            raise unsupported_mode(mode, server, layout, self._connection.uri)
        if request.top_k > MAX_TOP_K:
            raise SearchBadRequest(f"top_k {request.top_k} exceeds Milvus' limit {MAX_TOP_K}")
        vector: list[float] | None = None
        dense_params: dict[str, Any] = {}
        if mode.needs_query_vector:
            vector = self._query_vector(request, layout)
            index_type, _params = self._collection.dense_index()
            if self._graph(index_type):
                dense_params = {"ef": self._ef}
        query_terms = ""
        if mode is not SearchMode.DENSE:
            check_analysis(layout, self._text.fingerprint, where=self._collection.where)
            query_terms = self._text.analyse_query(request.query_text)
            if not query_terms and mode is SearchMode.SPARSE:
                return None  # only stop words / punctuation: nothing for BM25 to match
        refuse_without_access(layout, request.access, self._collection.where)
        category = ""
        where: dict[str, str] = {}
        if request.category_filter is not None:
            if not fits(request.category_filter, MAX_BYTES[CATEGORY]):
                return None  # longer than any stored category: nothing can match
            category = eq(CATEGORY, request.category_filter)
            where[CATEGORY] = request.category_filter
        light = [*LIGHT_FIELDS, *ACCESS_FIELDS] if layout.access else list(LIGHT_FIELDS)
        self._collection.ensure_loaded()
        return SearchQuery(
            vector=vector,
            terms=query_terms,
            dense_params=dense_params,
            # One expression for every list of this request: category AND access (the
            # full-text index applies the same: ``where`` and ``access``).
            expression=all_of([category, self._access_filter(request.access)]),
            output_fields=[*light, TEXT] if request.include_content else light,
            where=where,
            with_text=request.include_content,
            access=request.access,
        )

    def _query_vector(
        self, request: KnowledgeSearchRequest, layout: CollectionLayout
    ) -> list[float]:
        assert request.query_vector is not None  # KnowledgeSearchRequest checks it
        check_embedder(layout, request.embedder, where=self._collection.where)
        vector = [float(x) for x in request.query_vector]
        if len(vector) != layout.dimension:
            raise SchemaMismatch(
                f"the query vector has {len(vector)} dimensions but collection "
                f"{layout.name!r} holds {layout.dimension}-dim vectors: lookup must use "
                "the embedder the collection was ingested with"
            )
        return vector

    def _dense(self, query: SearchQuery, limit: int, group: int | None) -> list[Any]:
        """The dense ranked list; driver errors propagate (``ranked_lists`` translates)."""
        params = dict(query.dense_params)
        if "ef" in params:
            params["ef"] = max(int(params["ef"]), limit)  # Milvus requires ef >= limit
        if self._connection.is_lite:
            return self._lite_dense(query, params, limit)
        return self._one(DENSE, query.vector, "COSINE", params, query, limit, group)

    def _lite_dense(self, query: SearchQuery, params: Mapping[str, Any], limit: int) -> list[Any]:
        """The dense ranked list on Milvus Lite (which has no engine-side grouping): the
        HNSW index beside the file (``lite_dense.py``), or Lite's own search where that
        index is not available; rows best first as ``_one`` returns them."""
        if (beside := lite_dense(self._collection)) is not None:
            return lite_dense_search(
                self._collection,
                beside,
                query.vector or [],
                limit,
                ef=index_ef(self._ef, limit),
                where=query.where,
                access=query.access,
                output_fields=query.output_fields,
            )
        return self._one(DENSE, query.vector, "COSINE", params, query, limit, None)

    def _sparse(self, query: SearchQuery, limit: int, group: int | None) -> list[Any]:
        """BM25: Milvus' function, or on Milvus Lite the full-text index beside the file
        (Lite has no engine-side grouping, so ``group`` is None there)."""
        index = self._collection.fulltext()
        if index is None:
            return self._one(SPARSE, query.terms, "BM25", {}, query, limit, group)
        with index_failures("full-text", self._collection.where):
            return index.search(
                query.terms, limit, query.where, access=query.access, with_text=query.with_text
            )

    def _workers(self) -> ThreadPoolExecutor:
        with self._pool_lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="lk-sparse")
            return self._pool

    def _one(
        self,
        field: str,
        data: object,
        metric: str,
        params: Mapping[str, Any],
        query: SearchQuery,
        limit: int,
        group: int | None,
    ) -> list[Any]:
        """One plain search; driver errors propagate (``ranked_lists`` translates them)."""
        grouping: dict[str, Any] = {}
        if group is not None:
            grouping = {"group_by_field": DOC_ID, "group_size": group, "strict_group_size": False}
        result = self._connection.client().search(
            self._collection.name,
            data=[data],
            anns_field=field,
            limit=limit,
            filter=query.expression,
            output_fields=list(query.output_fields),
            search_params={"metric_type": metric, "params": dict(params)}
            if params
            else {"metric_type": metric},
            timeout=self._connection.timeout_s,
            **self._read,
            **grouping,
        )
        return [flat_hit(hit) for hit in result[0]] if result else []

    def _hybrid_lists(self, query: SearchQuery, limit: int) -> dict[SearchMode, list[Any]]:
        """The dense and the BM25 list of a hybrid search, ungrouped (``HybridSearch``
        fuses them and groups the fused list)."""
        pending: Future[list[Any]] | None = None
        if query.terms and self._concurrent:
            # A server: the BM25 search waits on its own round trip while the dense one
            # runs here. Not on Lite (``concurrent_hybrid`` None): its BM25 half is the
            # tantivy index and the dense half is Python in Lite's in-process server
            # holding the GIL, so a worker thread only adds its hand-off
            # (benchmarks/README.md, bench_scaling.py).
            pending = self._workers().submit(self._sparse, query, limit, None)
        dense = self._dense(query, limit, None)
        if pending is not None:
            sparse = pending.result()
        elif query.terms:
            sparse = self._sparse(query, limit, None)
        else:
            sparse = []  # a query of stop words only: the dense list alone
        return {SearchMode.DENSE: dense, SearchMode.SPARSE: sparse}

    def _bm25_reference(self, concepts: QueryConcepts) -> float | None:
        """What the query's BM25 scores are read against (``HitCalibration``): known
        where the index's statistics are readable (the Lite full-text index); a Milvus
        server does not expose them, and its scores fall back to ``normalise_relevance``."""
        index = self._collection.fulltext()
        if index is None:
            return None
        with index_failures("full-text", self._collection.where):
            return index.reference(concepts)

    @staticmethod
    def _hits(
        rows: list[Any], kind: ScoreKind, with_text: bool, calibration: HitCalibration
    ) -> tuple[KnowledgeSearchHit, ...]:
        hits: list[KnowledgeSearchHit] = []
        for rank, row in enumerate(rows, 1):
            key = row_key(row)
            metadata: dict[str, object] = {}
            for name in LIGHT_FIELDS:
                value = row.get(name)
                if value is not None:
                    metadata[name] = value
            content = row.get(TEXT) if with_text else None
            hits.append(
                KnowledgeSearchHit(
                    id=key,
                    score=float(row.get("distance")),
                    score_kind=kind,
                    identity=extract_identity(metadata, key, rank),
                    content=content if isinstance(content, str) else None,
                    metadata=metadata,
                    access=row_access(row),
                    calibration=calibration,
                )
            )
        return tuple(hits)

    # ------------------------------------------------------------------ by key

    def fetch_content(
        self, evidence_keys: Sequence[str], access: AccessScope = UNRESTRICTED
    ) -> dict[str, str]:
        keys = storable_keys(evidence_keys)
        if not keys:
            return {}
        layout = self._collection.require_layout()
        refuse_without_access(layout, access, self._collection.where)
        return self._rows.texts(keys, self._access_filter(access))

    def document_access(self, document_ids: Sequence[str]) -> dict[str, tuple[DocumentAccess, ...]]:
        """Every row holding each ``doc_id#chunk-N`` (any tenant), with its access."""
        return self._rows.access(document_ids)
