"""``KnowledgeSearchPort`` over Milvus: dense, BM25 (sparse) and hybrid (RRF) search.

- DENSE: COSINE over the dense vector field (score kind ``cosine``).
- DENSE: the search parameters follow the collection's index: HNSW (and Lite's
  AUTOINDEX, which is HNSW) searches with ``ef = max(search_ef, limit)``; Milvus' own
  default (``ef = limit``) found 0.970 of the exact top 50 on SciFact.
- SPARSE: the BM25 full-text function on ``bm25_text``; the query goes through the same
  ``TextAnalyzer`` as the documents did (score kind ``bm25``). A collection analysed
  otherwise is refused (``SchemaMismatch``). On Milvus Lite, whose BM25 is a pure-Python
  inverted index (430 ms per search at 100k chunks), BM25 is answered by the tantivy
  index the store keeps beside the Lite file (``fulltext.py``: the same analysed terms,
  the same filters, positive scores); a server >= 2.5 uses its own BM25 function.
- HYBRID: the dense and the BM25 search run as two ordinary searches (same filter,
  ``hybrid_candidates`` or ``top_k * group_size`` hits each) and are fused here by
  ``reciprocal_rank_fusion(k=rrf_k)`` (score kind ``rrf``), or, when weights are
  configured, by Milvus' ``WeightedRanker`` formula ``w_d * (1 + cos) / 2 + w_s * 2/pi *
  atan(|bm25|)`` (a weighted sum of [0, 1]-normalised scores: reported as ``cosine``;
  ``|bm25|`` because Milvus Lite's BM25 scores are negative). Every hybrid hit carries
  ``component_scores``: the raw cosine and BM25 score of the lists that found it.
  On a server the BM25 list is fetched on a worker thread while the dense search runs;
  on Milvus Lite one after the other, which measured faster (``_hybrid``).

Why not ``hybrid_search``: Milvus fuses inside and returns only the fused score, which
says where a hit ranked, not how relevant it is (with k=60 the last of 20 hits still
scores a third of the best, so a nonsense query looks like evidence); the per-list
scores are discarded. Getting them back would take the hybrid search plus a filtered
search per list restricted to the returned keys: three round trips instead of two, and
the same two searches in the end. Two plain searches fused here are simpler and give
the per-list scores for free.

Access control: every search request carries an ``AccessScope``; under ``enforced``
its filter (``filters.access_filter``) is ANDed into the one expression every pass
uses: dense, sparse, both hybrid lists, client-side grouping's over-fetch and
``fetch_content``. Hits carry the row's access fields, which the application checks
again. A collection without access fields (schema version 2) is refused under
``enforced``.

The category filter is written by ``filters.eq`` only. ``group_size`` asks Milvus to
group by ``doc_id`` (engine-side grouping); on a server without grouping the adapter
over-fetches and groups itself, with the same result shape. In hybrid mode grouping
follows the fusion, as in ``hybrid_search``: the lists are fetched ungrouped (grouped
lists would keep different chunks of a document in each list, so a chunk both lists
found would look found by one) and the fused list is cut to ``group_size`` hits for
each of the first ``top_k`` documents. ``include_content`` False leaves the text out
of the request: content is fetched for the survivors by ``fetch_content`` (primary-key
lookup).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from lookup_knowledge.adapters.milvus.collection import KnowledgeCollection
from lookup_knowledge.adapters.milvus.connection import MilvusConnection, ServerCapabilities
from lookup_knowledge.adapters.milvus.errors import DRIVER_ERRORS, translate
from lookup_knowledge.adapters.milvus.filters import access_filter, all_of, eq, in_list
from lookup_knowledge.adapters.milvus.schema import (
    ACCESS_FIELDS,
    ACCESS_PUBLIC,
    ALLOWED_GROUPS,
    BM25_TEXT,
    CATEGORY,
    CHUNK_INDEX,
    DEFAULT_COLLECTION,
    DENSE,
    DOC_ID,
    LIGHT_FIELDS,
    MAX_BYTES,
    PK,
    SPARSE,
    TENANT,
    TEXT,
    CollectionLayout,
    check_analysis,
    check_embedder,
)
from lookup_knowledge.adapters.text import SnowballJiebaAnalyzer
from lookup_knowledge.application.ports import (
    KnowledgeSearchHit,
    KnowledgeSearchPort,
    KnowledgeSearchRequest,
    SearchCapabilities,
    TextAnalyzer,
)
from lookup_knowledge.domain.access import (
    NO_ACL,
    UNRESTRICTED,
    AccessScope,
    DocumentAccess,
)
from lookup_knowledge.domain.errors import (
    InvalidInputError,
    SchemaMismatch,
    SearchBadRequest,
    SearchError,
    SearchUnavailable,
    UnsupportedSearchMode,
)
from lookup_knowledge.domain.fusion import (
    check_fusion_parameters,
    reciprocal_rank_fusion,
    weighted_score_fusion,
)
from lookup_knowledge.domain.identity import extract_identity, split_chunk_key
from lookup_knowledge.domain.model import SearchMode
from lookup_knowledge.domain.postprocess import group_by_document
from lookup_knowledge.domain.relevance import HitCalibration, QueryConcepts, ScoreKind

MAX_TOP_K = 16384  # Milvus' topk limit
#: HNSW search depth: the smallest ef whose top 50 held >= 0.995 of the exact top 50
#: on SciFact (benchmarks/bench_dense_recall.py).
DEFAULT_SEARCH_EF = 256
_GRAPH_INDEXES = frozenset({"HNSW", "HNSW_SQ", "HNSW_PQ", "HNSW_PRQ"})


def _fits(value: str, max_bytes: int) -> bool:
    return len(value.encode("utf-8", "surrogatepass")) <= max_bytes


@dataclass(frozen=True, slots=True)
class _Scored:
    """One result row: the driver's hit (fields by ``get``), the score to report and, for
    a fused hit, the raw score of each list that found it."""

    row: Any
    score: float
    components: tuple[tuple[ScoreKind, float], ...] = ()


@dataclass(frozen=True, slots=True)
class _Query:
    """What one search request sends: the query vector, the analysed query terms (the
    BM25 input) and the dense search parameters (``ef`` for a graph index)."""

    vector: list[float] | None
    terms: str
    dense_params: Mapping[str, Any]
    #: The filter as field -> exact value (the Lite full-text index applies it).
    where: Mapping[str, str] = field(default_factory=dict)
    with_text: bool = False
    access: AccessScope = UNRESTRICTED


def _key(hit: Any) -> str | None:
    key = hit.get(PK)
    if key is None:
        key = hit.get("id")  # servers before 2.4 name the key "id"
    return str(key) if key is not None else None


def _flat(hit: Any) -> dict[str, Any]:
    """A pymilvus ``Hit`` (``{pk, "distance", "entity": {...}}``) as one plain dict of its
    key, distance and fields, the shape the Lite full-text index returns. Read once: a
    ``Hit`` looks an entity field up by raising ``KeyError`` on the outer dict first
    (~4 us a field; a search at the eval depth reads ~13 fields of 50 hits)."""
    row = dict(dict.get(hit, "entity") or {})
    for name, value in dict.items(hit):
        if name != "entity":
            row[name] = value
    return row


def _doc_of(item: _Scored) -> object:
    return item.row.get(DOC_ID)


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


def _distance(hit: Any) -> float:
    return float(hit.get("distance"))


def _strength(hit: Any, kind: ScoreKind) -> float:
    """Bigger is better (Milvus Lite reports BM25 scores negative)."""
    return abs(_distance(hit)) if kind is ScoreKind.BM25 else _distance(hit)


class MilvusKnowledgeSearch(KnowledgeSearchPort):
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
        self._rrf_k = rrf_k
        self._weights = hybrid_weights
        self._hybrid_candidates = hybrid_candidates
        self._oversample = client_grouping_oversample
        self._fetch_batch = fetch_batch_size
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

    def _unsupported(
        self, mode: SearchMode, server: ServerCapabilities, layout: CollectionLayout
    ) -> UnsupportedSearchMode:
        if mode.needs_query_vector and not layout.has_dense:
            return UnsupportedSearchMode(
                f"{mode.value} search needs a dense vector field; collection "
                f"{layout.name!r} was built without an embedder (sparse only). Use "
                "mode=sparse, or ingest with an embedder into a new collection."
            )
        if not server.bm25 or not server.hybrid:
            return UnsupportedSearchMode(
                f"{mode.value} search needs the BM25 full-text function and hybrid search "
                f"of {server.requirement()}; the server at {self._connection.uri} is "
                f"{server.version or 'unknown'}. Use mode=dense, or upgrade Milvus."
            )
        return UnsupportedSearchMode(
            f"{mode.value} search needs the BM25 function on the text field, but collection "
            f"{layout.name!r} was created without it (on an older Milvus): create a new "
            "collection on this server and ingest again."
        )

    # ------------------------------------------------------------------ search

    def search(self, request: KnowledgeSearchRequest) -> list[KnowledgeSearchHit]:
        try:
            return self._search(request)
        except SearchError as error:
            if "does not exist" in error.message or "not found" in error.message.lower():
                self._collection.invalidate()
            raise

    def _search(self, request: KnowledgeSearchRequest) -> list[KnowledgeSearchHit]:
        server = self._connection.capabilities()
        layout = self._collection.require_layout()
        mode = request.mode
        if mode not in self._modes(server, layout):
            raise self._unsupported(mode, server, layout)
        if request.top_k > MAX_TOP_K:
            raise SearchBadRequest(f"top_k {request.top_k} exceeds Milvus' limit {MAX_TOP_K}")
        vector: list[float] | None = None
        if mode.needs_query_vector:
            assert request.query_vector is not None  # KnowledgeSearchRequest checks it
            check_embedder(layout, request.embedder, where=self._collection.where)
            vector = [float(x) for x in request.query_vector]
            if len(vector) != layout.dimension:
                raise SchemaMismatch(
                    f"the query vector has {len(vector)} dimensions but collection "
                    f"{layout.name!r} holds {layout.dimension}-dim vectors: lookup must use "
                    "the embedder the collection was ingested with"
                )
        query_terms = ""
        if mode is not SearchMode.DENSE:
            check_analysis(layout, self._text.fingerprint, where=self._collection.where)
            query_terms = self._text.analyse_query(request.query_text)
            if not query_terms and mode is SearchMode.SPARSE:
                return []  # only stop words / punctuation: nothing for BM25 to match
        dense_params: dict[str, Any] = {}
        if mode.needs_query_vector:
            index_type, _params = self._collection.dense_index()
            if self._graph(index_type):
                dense_params = {"ef": self._ef}
        refuse_without_access(layout, request.access, self._collection.where)
        category = ""
        where: dict[str, str] = {}
        if request.category_filter is not None:
            if not _fits(request.category_filter, MAX_BYTES[CATEGORY]):
                return []  # longer than any stored category: nothing can match
            category = eq(CATEGORY, request.category_filter)
            where[CATEGORY] = request.category_filter
        # One expression for every pass of this request: category AND access (the
        # full-text index applies the same: ``where`` and ``request.access``).
        expression = all_of([category, self._access_filter(request.access)])
        light = [*LIGHT_FIELDS, *ACCESS_FIELDS] if layout.access else list(LIGHT_FIELDS)
        output_fields = [*light, TEXT] if request.include_content else light
        self._collection.ensure_loaded()
        group = request.group_size
        query = _Query(
            vector, query_terms, dense_params, where, request.include_content, request.access
        )
        if group is not None and not server.grouping and mode is not SearchMode.HYBRID:
            raw = self._client_grouped(request, query, expression, output_fields, group)
        else:
            raw = self._run(request, query, expression, output_fields, request.top_k, group)
        calibration = HitCalibration(
            bm25_reference=self._bm25_reference(self._text.query_concepts(request.query_text))
            if query_terms
            else None,
            dense_background=self._collection.background() if vector is not None else None,
        )
        hits = self._hits(raw, request, calibration)
        if group is not None:
            hits = self._order(hits)
        return hits

    def _run(
        self,
        request: KnowledgeSearchRequest,
        query: _Query,
        expression: str,
        output_fields: list[str],
        limit: int,
        group: int | None,
    ) -> list[_Scored]:
        mode = request.mode
        try:
            if mode is SearchMode.DENSE:
                found = self._dense(query, expression, output_fields, limit, group)
                return [_Scored(hit, _distance(hit)) for hit in found]
            if mode is SearchMode.SPARSE:
                found = self._sparse(query, expression, output_fields, limit, group)
                return [_Scored(hit, _distance(hit)) for hit in found]
            return self._hybrid(query, expression, output_fields, limit, group)
        except DRIVER_ERRORS as error:
            raise translate(error, f"{mode.value} search", self._collection.where) from error

    def _dense(
        self,
        query: _Query,
        expression: str,
        output_fields: list[str],
        limit: int,
        group: int | None,
    ) -> list[Any]:
        params = dict(query.dense_params)
        if "ef" in params:
            params["ef"] = max(int(params["ef"]), limit)  # Milvus requires ef >= limit
        return self._one(
            DENSE, query.vector, "COSINE", params, expression, output_fields, limit, group
        )

    def _sparse(
        self,
        query: _Query,
        expression: str,
        output_fields: list[str],
        limit: int,
        group: int | None,
    ) -> list[Any]:
        """BM25: Milvus' function, or on Milvus Lite the full-text index beside the file
        (Lite has no engine-side grouping, so ``group`` is None there)."""
        index = self._collection.fulltext()
        if index is None:
            return self._one(
                SPARSE, query.terms, "BM25", {}, expression, output_fields, limit, group
            )
        try:
            return index.search(
                query.terms, limit, query.where, access=query.access, with_text=query.with_text
            )
        except (OSError, ValueError) as error:
            raise SearchUnavailable(
                f"the full-text index of {self._collection.where} failed: {error}"
            ) from error

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
        expression: str,
        output_fields: list[str],
        limit: int,
        group: int | None,
    ) -> list[Any]:
        """One plain search; driver errors propagate (``_run`` translates them)."""
        grouping: dict[str, Any] = {}
        if group is not None:
            grouping = {"group_by_field": DOC_ID, "group_size": group, "strict_group_size": False}
        result = self._connection.client().search(
            self._collection.name,
            data=[data],
            anns_field=field,
            limit=limit,
            filter=expression,
            output_fields=output_fields,
            search_params={"metric_type": metric, "params": dict(params)}
            if params
            else {"metric_type": metric},
            timeout=self._connection.timeout_s,
            **self._read,
            **grouping,
        )
        return [_flat(hit) for hit in result[0]] if result else []

    def _hybrid(
        self,
        query: _Query,
        expression: str,
        output_fields: list[str],
        limit: int,
        group: int | None,
    ) -> list[_Scored]:
        """Dense and BM25 as two searches, fused here so each hit keeps its list scores.

        ``limit`` counts hits, or documents when ``group`` is set. Each list brings
        ``hybrid_candidates`` hits, by default ``limit * group``, ungrouped; grouping
        is applied to the fused list.
        """
        per_list = min(MAX_TOP_K, max(self._hybrid_candidates or limit * (group or 1), limit))
        pending: Future[list[Any]] | None = None
        if query.terms and self._concurrent:
            # A server: the BM25 search waits on its own round trip while the dense one
            # runs here. Not on Lite (``concurrent_hybrid`` None): its BM25 half is the
            # tantivy index, 0.5-1.2 ms, and the dense half is Python in Lite's
            # in-process server holding the GIL, so a worker thread only added its
            # hand-off (bench_scaling.py, p50 concurrent vs sequential: 22.9 vs 19.0 ms
            # at 5k chunks, 38.6 vs 30.4 at 8.6k, 65.0 vs 69.8 at 20k, 512 vs 505 at 100k).
            pending = self._workers().submit(
                self._sparse, query, expression, output_fields, per_list, None
            )
        dense = self._dense(query, expression, output_fields, per_list, None)
        if pending is not None:
            sparse = pending.result()
        elif query.terms:
            sparse = self._sparse(query, expression, output_fields, per_list, None)
        else:
            sparse = []  # a query of stop words only: the dense list alone
        fused = self._fuse(((ScoreKind.COSINE, dense), (ScoreKind.BM25, sparse)))
        if group is None:
            return fused[:limit]
        return group_by_document(fused, _doc_of, limit, group)

    def _fuse(self, lists: Sequence[tuple[ScoreKind, list[Any]]]) -> list[_Scored]:
        rows: dict[str, Any] = {}  # key -> the first list's row (both carry the same fields)
        ranked: list[list[str]] = []
        scores: list[dict[str, float]] = []
        for kind, found in lists:
            # Best first, as each list's own score says (Lite's BM25 is negative).
            ordered = sorted(found, key=lambda hit: _strength(hit, kind), reverse=True)
            keys: list[str] = []
            raw: dict[str, float] = {}
            for hit in ordered:
                key = _key(hit)
                if key is None or key in raw:
                    continue
                raw[key] = _distance(hit)
                keys.append(key)
                rows.setdefault(key, hit)
            ranked.append(keys)
            scores.append(raw)
        kinds = [kind for kind, _found in lists]
        if self._weights is None:
            order = [(f.key, f.score) for f in reciprocal_rank_fusion(ranked, self._rrf_k)]
        else:
            order = weighted_score_fusion(ranked, scores, kinds, self._weights)
        return [
            _Scored(
                rows[key],
                score,
                tuple((kinds[i], raw[key]) for i, raw in enumerate(scores) if key in raw),
            )
            for key, score in order
        ]

    def _client_grouped(
        self,
        request: KnowledgeSearchRequest,
        query: _Query,
        expression: str,
        output_fields: list[str],
        group: int,
    ) -> list[_Scored]:
        """Grouping for servers without it: over-fetch, keep ``group`` hits per doc_id
        for the first ``top_k`` documents (the shape Milvus grouping returns)."""
        limit = min(MAX_TOP_K, request.top_k * group * self._oversample)
        while True:
            raw = self._run(request, query, expression, output_fields, limit, None)
            kept = group_by_document(raw, _doc_of, request.top_k, group)
            documents = len({item.row.get(DOC_ID) for item in kept})
            exhausted = len(raw) < limit or limit >= MAX_TOP_K
            if documents >= request.top_k or exhausted:
                return kept
            limit = min(MAX_TOP_K, limit * 4)

    def _bm25_reference(self, concepts: QueryConcepts) -> float | None:
        """What the query's BM25 scores are read against (``HitCalibration``): known
        where the index's statistics are readable (the Lite full-text index); a Milvus
        server does not expose them, and its scores fall back to ``normalise_relevance``."""
        index = self._collection.fulltext()
        if index is None:
            return None
        try:
            return index.reference(concepts)
        except (OSError, ValueError) as error:
            raise SearchUnavailable(
                f"the full-text index of {self._collection.where} failed: {error}"
            ) from error

    def _hits(
        self,
        raw: list[_Scored],
        request: KnowledgeSearchRequest,
        calibration: HitCalibration | None = None,
    ) -> list[KnowledgeSearchHit]:
        kind = {
            SearchMode.DENSE: ScoreKind.COSINE,
            SearchMode.SPARSE: ScoreKind.BM25,
            SearchMode.HYBRID: ScoreKind.RRF if self._weights is None else ScoreKind.COSINE,
        }[request.mode]
        hits: list[KnowledgeSearchHit] = []
        for rank, item in enumerate(raw, 1):
            hit = item.row
            key = _key(hit)
            metadata: dict[str, object] = {}
            for name in LIGHT_FIELDS:
                value = hit.get(name)
                if value is not None:
                    metadata[name] = value
            content = hit.get(TEXT) if request.include_content else None
            hits.append(
                KnowledgeSearchHit(
                    id=key,
                    score=item.score,
                    score_kind=kind,
                    identity=extract_identity(metadata, key, rank),
                    content=content if isinstance(content, str) else None,
                    metadata=metadata,
                    component_scores=item.components,
                    access=row_access(hit),
                    calibration=calibration,
                )
            )
        return hits

    @staticmethod
    def _order(hits: list[KnowledgeSearchHit]) -> list[KnowledgeSearchHit]:
        """Grouped results come group by group; present them best score first."""
        return sorted(
            hits, key=lambda h: -abs(h.score) if h.score_kind is ScoreKind.BM25 else -h.score
        )

    # ------------------------------------------------------------------ late materialisation

    def fetch_content(
        self, evidence_keys: Sequence[str], access: AccessScope = UNRESTRICTED
    ) -> dict[str, str]:
        keys: list[str] = []
        for key in dict.fromkeys(evidence_keys):
            if not isinstance(key, str) or not key or not _fits(key, MAX_BYTES[PK]):
                continue
            try:
                eq(PK, key)
            except InvalidInputError:
                continue  # a key with control characters cannot exist in the store
            keys.append(key)
        if not keys:
            return {}
        layout = self._collection.require_layout()
        refuse_without_access(layout, access, self._collection.where)
        rule = self._access_filter(access)
        self._collection.ensure_loaded()
        client = self._connection.client()
        out: dict[str, str] = {}
        for start in range(0, len(keys), self._fetch_batch):
            batch = keys[start : start + self._fetch_batch]
            try:
                rows = client.query(
                    self._collection.name,
                    filter=all_of([in_list(PK, batch), rule]),
                    output_fields=[PK, TEXT],
                    timeout=self._connection.timeout_s,
                    **self._read,
                )
            except DRIVER_ERRORS as error:
                raise translate(error, "fetch content", self._collection.where) from error
            for row in rows:
                key, text = row.get(PK), row.get(TEXT)
                if isinstance(key, str) and isinstance(text, str):
                    out[key] = text
        return out

    # ------------------------------------------------------------------ verification

    def document_access(self, document_ids: Sequence[str]) -> dict[str, tuple[DocumentAccess, ...]]:
        """Every row holding each ``doc_id#chunk-N`` (any tenant), with its access."""
        wanted: dict[tuple[str, int], str] = {}
        for document_id in dict.fromkeys(document_ids):
            parts = split_chunk_key(document_id)
            if parts is None:
                continue
            doc_id, index = parts
            if not _fits(doc_id, MAX_BYTES[DOC_ID]):
                continue
            try:
                eq(DOC_ID, doc_id)
            except InvalidInputError:
                continue
            wanted[(doc_id, index)] = document_id
        layout = self._collection.layout()
        if not wanted or layout is None:
            return {}
        self._collection.ensure_loaded()
        fields = [DOC_ID, CHUNK_INDEX, *(ACCESS_FIELDS if layout.access else ())]
        doc_ids = sorted({d for d, _i in wanted})
        out: dict[str, list[DocumentAccess]] = {}
        client = self._connection.client()
        for start in range(0, len(doc_ids), self._fetch_batch):
            try:
                rows = client.query(
                    self._collection.name,
                    filter=in_list(DOC_ID, doc_ids[start : start + self._fetch_batch]),
                    output_fields=fields,
                    timeout=self._connection.timeout_s,
                    **self._read,
                )
            except DRIVER_ERRORS as error:
                raise translate(error, "read access", self._collection.where) from error
            for row in rows:
                key = wanted.get((str(row.get(DOC_ID)), int(row.get(CHUNK_INDEX, -1))))
                if key is not None:
                    out.setdefault(key, []).append(row_access(row))
        return {k: tuple(v) for k, v in out.items()}
