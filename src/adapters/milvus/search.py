"""``KnowledgeSearchPort`` over Milvus: dense, BM25 (sparse) and hybrid (RRF) search.

- DENSE: COSINE over the dense vector field (score kind ``cosine``).
- SPARSE: the BM25 full-text function on the analysed ``text`` field; the query text
  goes to Milvus as is (score kind ``bm25``; Milvus Lite reports negative scores).
- HYBRID: ``hybrid_search`` over both, fused by ``RRFRanker(k)`` (score kind ``rrf``),
  or by ``WeightedRanker(w_dense, w_sparse)`` when weights are configured (its scores
  are weighted sums of [0, 1]-normalised scores: reported as ``cosine``).

The category filter is written by ``filters.eq`` only. ``group_size`` asks Milvus to
group by ``doc_id`` (engine-side grouping); on a server without grouping the adapter
over-fetches and groups itself, with the same result shape. ``include_content`` False
leaves the text out of the request: content is fetched for the survivors by
``fetch_content`` (primary-key lookup).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lookup_knowledge.adapters.milvus.collection import KnowledgeCollection
from lookup_knowledge.adapters.milvus.connection import MilvusConnection, ServerCapabilities
from lookup_knowledge.adapters.milvus.errors import DRIVER_ERRORS, translate
from lookup_knowledge.adapters.milvus.filters import eq, in_list
from lookup_knowledge.adapters.milvus.schema import (
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
)
from lookup_knowledge.application.ports import (
    KnowledgeSearchHit,
    KnowledgeSearchPort,
    KnowledgeSearchRequest,
    SearchCapabilities,
)
from lookup_knowledge.domain.errors import (
    InvalidInputError,
    SchemaMismatch,
    SearchBadRequest,
    SearchError,
    UnsupportedSearchMode,
)
from lookup_knowledge.domain.identity import extract_identity
from lookup_knowledge.domain.model import SearchMode
from lookup_knowledge.domain.relevance import ScoreKind

MAX_TOP_K = 16384  # Milvus' topk limit


def _fits(value: str, max_bytes: int) -> bool:
    return len(value.encode("utf-8", "surrogatepass")) <= max_bytes


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
        owns_connection: bool = False,
    ) -> None:
        if rrf_k < 0:
            raise InvalidInputError("rrf_k must be >= 0")
        if hybrid_weights is not None and (
            len(hybrid_weights) != 2
            or any(w < 0 for w in hybrid_weights)
            or sum(hybrid_weights) <= 0
        ):
            raise InvalidInputError("hybrid_weights must be two non-negative numbers, not both 0")
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

    def capabilities(self) -> SearchCapabilities:
        server = self._connection.capabilities()
        layout = self._collection.layout()
        return SearchCapabilities(
            modes=frozenset(self._modes(server, layout)),
            grouping=server.grouping,
            server_version=server.version,
        )

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
            vector = [float(x) for x in request.query_vector]
            if len(vector) != layout.dimension:
                raise SchemaMismatch(
                    f"the query vector has {len(vector)} dimensions but collection "
                    f"{layout.name!r} holds {layout.dimension}-dim vectors: lookup must use "
                    "the embedder the collection was ingested with"
                )
        if mode is not SearchMode.DENSE and not request.query_text.strip():
            return []
        expression = ""
        if request.category_filter is not None:
            if not _fits(request.category_filter, MAX_BYTES[CATEGORY]):
                return []  # longer than any stored category: nothing can match
            expression = eq(CATEGORY, request.category_filter)
        output_fields = [*LIGHT_FIELDS, TEXT] if request.include_content else list(LIGHT_FIELDS)
        self._collection.ensure_loaded()
        group = request.group_size
        if group is not None and not server.grouping:
            raw = self._client_grouped(request, vector, expression, output_fields, group)
        else:
            raw = self._run(request, vector, expression, output_fields, request.top_k, group)
        hits = self._hits(raw, request)
        if group is not None:
            hits = self._order(hits)
        return hits

    def _run(
        self,
        request: KnowledgeSearchRequest,
        vector: list[float] | None,
        expression: str,
        output_fields: list[str],
        limit: int,
        group: int | None,
    ) -> list[Any]:
        from pymilvus import AnnSearchRequest, RRFRanker, WeightedRanker

        client = self._connection.client()
        name = self._collection.name
        timeout = self._connection.timeout_s
        grouping: dict[str, Any] = {}
        if group is not None:
            grouping = {"group_by_field": DOC_ID, "group_size": group, "strict_group_size": False}
        mode = request.mode
        try:
            if mode is SearchMode.DENSE:
                result = client.search(
                    name,
                    data=[vector],
                    anns_field=DENSE,
                    limit=limit,
                    filter=expression,
                    output_fields=output_fields,
                    search_params={"metric_type": "COSINE"},
                    timeout=timeout,
                    **self._read,
                    **grouping,
                )
            elif mode is SearchMode.SPARSE:
                result = client.search(
                    name,
                    data=[request.query_text],
                    anns_field=SPARSE,
                    limit=limit,
                    filter=expression,
                    output_fields=output_fields,
                    search_params={"metric_type": "BM25"},
                    timeout=timeout,
                    **self._read,
                    **grouping,
                )
            else:
                per_list = self._hybrid_candidates or limit * (group or 1)
                per_list = min(MAX_TOP_K, max(per_list, limit))
                requests = [
                    AnnSearchRequest(
                        data=[vector],
                        anns_field=DENSE,
                        param={"metric_type": "COSINE"},
                        limit=per_list,
                        expr=expression or None,
                    ),
                    AnnSearchRequest(
                        data=[request.query_text],
                        anns_field=SPARSE,
                        param={"metric_type": "BM25"},
                        limit=per_list,
                        expr=expression or None,
                    ),
                ]
                ranker = (
                    WeightedRanker(*self._weights)
                    if self._weights is not None
                    else RRFRanker(self._rrf_k)
                )
                result = client.hybrid_search(
                    name,
                    requests,
                    ranker=ranker,
                    limit=limit,
                    output_fields=output_fields,
                    timeout=timeout,
                    **self._read,
                    **grouping,
                )
        except DRIVER_ERRORS as error:
            raise translate(error, f"{mode.value} search", self._collection.where) from error
        return list(result[0]) if result else []

    def _client_grouped(
        self,
        request: KnowledgeSearchRequest,
        vector: list[float] | None,
        expression: str,
        output_fields: list[str],
        group: int,
    ) -> list[Any]:
        """Grouping for servers without it: over-fetch, keep ``group`` hits per doc_id
        for the first ``top_k`` documents (the shape Milvus grouping returns)."""
        limit = min(MAX_TOP_K, request.top_k * group * self._oversample)
        while True:
            raw = self._run(request, vector, expression, output_fields, limit, None)
            kept: list[Any] = []
            per_doc: dict[object, int] = {}
            for hit in raw:
                doc = hit.get(DOC_ID)
                if doc not in per_doc and len(per_doc) >= request.top_k:
                    continue
                if per_doc.get(doc, 0) >= group:
                    continue
                per_doc[doc] = per_doc.get(doc, 0) + 1
                kept.append(hit)
            exhausted = len(raw) < limit or limit >= MAX_TOP_K
            if len(per_doc) >= request.top_k or exhausted:
                return kept
            limit = min(MAX_TOP_K, limit * 4)

    def _hits(self, raw: list[Any], request: KnowledgeSearchRequest) -> list[KnowledgeSearchHit]:
        kind = {
            SearchMode.DENSE: ScoreKind.COSINE,
            SearchMode.SPARSE: ScoreKind.BM25,
            SearchMode.HYBRID: ScoreKind.RRF if self._weights is None else ScoreKind.COSINE,
        }[request.mode]
        hits: list[KnowledgeSearchHit] = []
        for rank, hit in enumerate(raw, 1):
            key = hit.get(PK)
            if key is None:
                key = hit.get("id")  # servers before 2.4 name the key "id"
            metadata: dict[str, object] = {}
            for name in LIGHT_FIELDS:
                value = hit.get(name)
                if value is not None:
                    metadata[name] = value
            content = hit.get(TEXT) if request.include_content else None
            hits.append(
                KnowledgeSearchHit(
                    id=str(key) if key is not None else None,
                    score=float(hit.get("distance")),
                    score_kind=kind,
                    identity=extract_identity(metadata, key, rank),
                    content=content if isinstance(content, str) else None,
                    metadata=metadata,
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

    def fetch_content(self, evidence_keys: Sequence[str]) -> dict[str, str]:
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
        self._collection.require_layout()
        self._collection.ensure_loaded()
        client = self._connection.client()
        out: dict[str, str] = {}
        for start in range(0, len(keys), self._fetch_batch):
            batch = keys[start : start + self._fetch_batch]
            try:
                rows = client.query(
                    self._collection.name,
                    filter=in_list(PK, batch),
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
