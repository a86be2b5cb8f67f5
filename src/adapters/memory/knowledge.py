"""``InMemoryKnowledgeBase``: brute-force search over rows held in memory.

A real adapter for small corpora, demos and tests (``search.backend=memory``), and
the reference the search-port contract suite holds Milvus to. It follows Milvus'
semantics where they show through the port:

- DENSE: cosine similarity, best first (score kind ``cosine``);
- SPARSE: Okapi BM25 (k1=1.2, b=0.75) over the analysed title, breadcrumb and text
  (the same ``TextAnalyzer`` as Milvus' ``bm25_text``, applied to the query too);
  documents without a query term are not hits (score kind ``bm25``, positive);
- HYBRID: the dense and the sparse list, fused by the application's ``HybridSearch``
  (reciprocal rank fusion, or Milvus' ``WeightedRanker`` formula when weights are set);
- grouping: native (at most ``group_size`` hits for each of the first ``top_k``
  documents), unless built with ``grouping=False``: then ``HybridSearch`` groups;
- the category filter is an exact string comparison;
- access: rows are keyed by ``storage_key(tenant, evidence_key)``, documents by doc
  key, and every search and ``fetch_content`` keeps only rows the request's
  ``AccessScope`` allows (``domain.access.can_see``), as the Milvus filter does. BM25
  statistics are over every row, as in Milvus.

Thread-safe; ``close()`` makes later calls fail with ``SearchUnavailable``.
"""

from __future__ import annotations

import math
import threading
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from lookup_knowledge.adapters.text import SnowballJiebaAnalyzer
from lookup_knowledge.application.analysis import lexical_text
from lookup_knowledge.application.hybrid_search import FusionSettings, HybridSearch
from lookup_knowledge.application.ports import (
    ChunkRecord,
    EmbedderIdentity,
    KnowledgeSearchHit,
    KnowledgeSearchPort,
    KnowledgeSearchRequest,
    KnowledgeStore,
    RankedList,
    RankedListSource,
    SearchCapabilities,
    StoredDocument,
    TextAnalyzer,
)
from lookup_knowledge.domain.access import UNRESTRICTED, AccessScope, DocumentAccess, storage_key
from lookup_knowledge.domain.errors import (
    IngestError,
    SchemaMismatch,
    SearchUnavailable,
    UnsupportedSearchMode,
)
from lookup_knowledge.domain.identity import extract_identity
from lookup_knowledge.domain.model import SearchMode
from lookup_knowledge.domain.postprocess import group_by_document
from lookup_knowledge.domain.relevance import (
    DenseBackground,
    HitCalibration,
    ScoreKind,
    measure_background,
    query_reference,
    reference_idf,
)

_ALL_MODES = frozenset(SearchMode)


@dataclass(frozen=True, slots=True)
class _Row:
    record: ChunkRecord
    tokens: Counter[str]
    length: int
    norm: float


def _cosine(a: Sequence[float], b: Sequence[float], norm_b: float) -> float:
    norm_a = math.sqrt(sum(x * x for x in a))
    if norm_a == 0.0 or norm_b == 0.0:
        return 0.0
    return sum(x * y for x, y in zip(a, b, strict=True)) / (norm_a * norm_b)


class InMemoryKnowledgeBase(KnowledgeSearchPort, KnowledgeStore, RankedListSource):
    def __init__(
        self,
        *,
        rrf_k: int = 60,
        hybrid_weights: tuple[float, float] | None = None,
        modes: Iterable[SearchMode] | None = None,
        grouping: bool = True,
        bm25_k1: float = 1.2,
        bm25_b: float = 0.75,
        analyzer: TextAnalyzer | None = None,
    ) -> None:
        self._fusing = HybridSearch(self, FusionSettings(rrf_k=rrf_k, weights=hybrid_weights))
        self._text = analyzer if analyzer is not None else SnowballJiebaAnalyzer()
        self._modes = frozenset(modes) if modes is not None else _ALL_MODES
        self._grouping = grouping
        self._k1 = bm25_k1
        self._b = bm25_b
        self._rows: dict[str, _Row] = {}
        self._created = False
        self._dimension: int | None = None
        self._embedder: EmbedderIdentity | None = None
        self._closed = False
        self._lock = threading.RLock()
        #: The dense background of the rows, measured on the first search after a write.
        self._background: DenseBackground | None = None
        self._background_known = False

    # ------------------------------------------------------------------ common

    def _check_open(self) -> None:
        if self._closed:
            raise SearchUnavailable("the in-memory knowledge base is closed")

    def close(self) -> None:
        with self._lock:
            self._closed = True

    def _available_modes(self) -> frozenset[SearchMode]:
        modes = set(self._modes)
        if self._created and self._dimension is None:
            modes -= {SearchMode.DENSE, SearchMode.HYBRID}
        return frozenset(modes)

    def holds_nothing(self) -> bool:
        return not self._rows

    def capabilities(self) -> SearchCapabilities:
        self._check_open()
        return SearchCapabilities(
            modes=self._available_modes(), grouping=self._grouping, server_version="memory"
        )

    # ------------------------------------------------------------------ store

    def ensure_collection(
        self,
        dimension: int | None,
        embedder: EmbedderIdentity | None = None,
        *,
        create: bool = True,
    ) -> None:
        with self._lock:
            self._check_open()
            if not self._created:
                if create:
                    self._created, self._dimension = True, dimension
                    self._embedder = embedder
                return
            if dimension != self._dimension:
                raise SchemaMismatch(
                    f"the in-memory knowledge base holds {self._dimension}-dim vectors; the "
                    f"embedder produces {dimension}: use one embedder for ingest and lookup"
                )
            self._check_embedder(embedder)

    def _check_embedder(self, embedder: EmbedderIdentity | None) -> None:
        if embedder is None or self._embedder is None or embedder == self._embedder:
            return
        raise SchemaMismatch(
            f"the in-memory knowledge base was built with the embedder "
            f"{self._embedder.describe()}, but the configured embedder is "
            f"{embedder.describe()}: use one embedder for ingest and lookup"
        )

    def documents(self, doc_ids: Sequence[str] | None = None) -> dict[str, StoredDocument]:
        with self._lock:
            self._check_open()
            wanted = set(doc_ids) if doc_ids is not None else None
            return {
                _doc_key(row.record): StoredDocument(
                    row.record.content_hash, row.record.source_name
                )
                for row in self._rows.values()
                if row.record.chunk_index == 0
                and (wanted is None or _doc_key(row.record) in wanted)
            }

    def upsert_chunks(self, records: Sequence[ChunkRecord]) -> int:
        with self._lock:
            self._check_open()
            if not self._created:
                raise IngestError("the in-memory knowledge base has no collection yet")
            rows: list[_Row] = []
            for record in records:
                if self._dimension is not None and (
                    record.vector is None or len(record.vector) != self._dimension
                ):
                    raise SchemaMismatch(
                        f"chunk {record.evidence_key!r} needs a {self._dimension}-dim vector"
                    )
                tokens = Counter(
                    self._text.terms(lexical_text(record.title, record.breadcrumb, record.text))
                )
                norm = math.sqrt(sum(x * x for x in record.vector)) if record.vector else 0.0
                rows.append(_Row(record, tokens, sum(tokens.values()), norm))
            for row in rows:
                self._rows[row.record.storage_key] = row
            self._background_known = False
            return len(rows)

    def delete_chunks_except(self, doc_ids: Sequence[str], keep_keys: Sequence[str]) -> int:
        with self._lock:
            self._check_open()
            docs, keep = set(doc_ids), set(keep_keys)
            doomed = [
                k for k, r in self._rows.items() if _doc_key(r.record) in docs and k not in keep
            ]
            for key in doomed:
                del self._rows[key]
            if doomed:
                self._background_known = False
            return len(doomed)

    def delete_documents(self, doc_ids: Sequence[str]) -> int:
        return self.delete_chunks_except(doc_ids, ())

    def count(self) -> int:
        with self._lock:
            self._check_open()
            return len(self._rows)

    def records(self) -> list[ChunkRecord]:
        """Every row (tests and tools)."""
        with self._lock:
            return [r.record for r in self._rows.values()]

    # ------------------------------------------------------------------ search

    def search(self, request: KnowledgeSearchRequest) -> list[KnowledgeSearchHit]:
        with self._lock:
            self._check_open()
            return self._fusing.search(request)

    def native_grouping(self) -> bool:
        return self._grouping

    def ranked_lists(
        self, request: KnowledgeSearchRequest, *, limit: int, group_size: int | None
    ) -> tuple[RankedList, ...]:
        with self._lock:
            self._check_open()
            mode = request.mode
            if mode not in self._available_modes():
                raise UnsupportedSearchMode(
                    f"{mode.value} search is not enabled on this in-memory knowledge base"
                )
            if group_size is not None and not self._grouping:
                raise UnsupportedSearchMode("grouping is not enabled on this knowledge base")
            rows = [r for r in self._rows.values() if _matches(request, r)]
            if mode.needs_query_vector:
                assert request.query_vector is not None
                self._check_embedder(request.embedder)
                if self._dimension is not None and len(request.query_vector) != self._dimension:
                    raise SchemaMismatch(
                        f"the query vector has {len(request.query_vector)} dimensions; the "
                        f"knowledge base holds {self._dimension}-dim vectors"
                    )
            calibration = HitCalibration(
                bm25_reference=self._bm25_reference(request.query_text)
                if mode is not SearchMode.DENSE
                else None,
                dense_background=self._dense_background() if mode.needs_query_vector else None,
            )
            scored: dict[SearchMode, list[tuple[_Row, float]]] = {}
            if mode.needs_query_vector:
                scored[SearchMode.DENSE] = self._dense(rows, request.query_vector or ())
            if mode is not SearchMode.DENSE:
                scored[SearchMode.SPARSE] = self._bm25(rows, request.query_text)
            return tuple(
                _ranked(each, found, limit, group_size, request.include_content, calibration)
                for each, found in scored.items()
            )

    def list_scores(
        self, request: KnowledgeSearchRequest, mode: SearchMode, keys: Sequence[str]
    ) -> dict[str, float]:
        with self._lock:
            self._check_open()
            rows = [
                row
                for key in dict.fromkeys(keys)
                if (row := self._rows.get(key)) is not None and _matches(request, row)
            ]
            if mode is SearchMode.DENSE:
                if request.query_vector is None:
                    return {}
                scored = self._dense(rows, request.query_vector)
            else:
                scored = self._bm25(rows, request.query_text)
            return {row.record.storage_key: score for row, score in scored}

    def _dense(self, rows: list[_Row], vector: Sequence[float]) -> list[tuple[_Row, float]]:
        scored = [(r, _cosine(vector, r.record.vector, r.norm)) for r in rows if r.record.vector]
        return sorted(scored, key=lambda p: (-p[1], p[0].record.evidence_key))

    def _dense_background(self) -> DenseBackground | None:
        """The rows' background (what a Milvus collection stores at seal), kept until
        the next write."""
        if not self._background_known:
            self._background = measure_background(
                [
                    (_doc_key(r.record), r.record.vector)
                    for r in self._rows.values()
                    if r.record.vector
                ]
            )
            self._background_known = True
        return self._background

    def _bm25_reference(self, text: str) -> float | None:
        """The score of an average-length row holding each query concept once, in its
        cheapest form (``query_reference``), with the terms' idf over every row (a term
        no row holds as if one did: ``reference_idf``). Each distinct concept once, as
        ``_bm25`` scores each distinct term once."""
        concepts = tuple(dict.fromkeys(self._text.query_concepts(text)))
        if not concepts or not self._rows:
            return None
        n = len(self._rows)
        return query_reference(
            concepts,
            lambda t: reference_idf(n, sum(1 for r in self._rows.values() if t in r.tokens)),
        )

    def _bm25(self, rows: list[_Row], text: str) -> list[tuple[_Row, float]]:
        terms = set(self._text.query_terms(text))
        if not terms or not self._rows:
            return []
        everything = list(self._rows.values())
        n = len(everything)
        avg = sum(r.length for r in everything) / n or 1.0
        df = {t: sum(1 for r in everything if t in r.tokens) for t in terms}
        scored: list[tuple[_Row, float]] = []
        for row in rows:
            score = 0.0
            for term in terms:
                tf = row.tokens.get(term, 0)
                if tf == 0:
                    continue
                idf = math.log(1.0 + (n - df[term] + 0.5) / (df[term] + 0.5))
                score += (
                    idf
                    * tf
                    * (self._k1 + 1)
                    / (tf + self._k1 * (1 - self._b + self._b * row.length / avg))
                )
            if score > 0.0:
                scored.append((row, score))
        return sorted(scored, key=lambda p: (-p[1], p[0].record.evidence_key))

    def fetch_content(
        self, evidence_keys: Sequence[str], access: AccessScope = UNRESTRICTED
    ) -> dict[str, str]:
        with self._lock:
            self._check_open()
            return {
                k: self._rows[k].record.text
                for k in evidence_keys
                if isinstance(k, str)
                and k in self._rows
                and access.allows(self._rows[k].record.access)
            }

    def document_access(self, document_ids: Sequence[str]) -> dict[str, tuple[DocumentAccess, ...]]:
        with self._lock:
            self._check_open()
            wanted = set(document_ids)
            out: dict[str, list[DocumentAccess]] = {}
            for row in self._rows.values():
                if row.record.evidence_key in wanted:
                    out.setdefault(row.record.evidence_key, []).append(row.record.access)
            return {k: tuple(v) for k, v in out.items()}


def _matches(request: KnowledgeSearchRequest, row: _Row) -> bool:
    """The request's filter: its category, if any, and who may see the row."""
    category = request.category_filter
    return (category is None or row.record.category == category) and request.access.allows(
        row.record.access
    )


def _doc_key(record: ChunkRecord) -> str:
    return storage_key(record.access.tenant, record.doc_id)


def _ranked(
    mode: SearchMode,
    scored: list[tuple[_Row, float]],
    limit: int,
    group_size: int | None,
    include_content: bool,
    calibration: HitCalibration,
) -> RankedList:
    """One mode's list, best first: ``limit`` hits, or with ``group_size`` at most that
    many hits of each of the first ``limit`` documents."""
    if group_size is None:
        selected = scored[:limit]
    else:
        selected = group_by_document(scored, lambda p: p[0].record.doc_id, limit, group_size)
    kind = ScoreKind.COSINE if mode is SearchMode.DENSE else ScoreKind.BM25
    return RankedList(
        mode,
        tuple(
            _hit(row, score, kind, rank, include_content, calibration)
            for rank, (row, score) in enumerate(selected, 1)
        ),
    )


def _hit(
    row: _Row,
    score: float,
    kind: ScoreKind,
    rank: int,
    include_content: bool,
    calibration: HitCalibration,
) -> KnowledgeSearchHit:
    record = row.record
    metadata: dict[str, object] = {
        "doc_id": record.doc_id,
        "chunk_index": record.chunk_index,
        "category": record.category,
        "source": record.source,
        "title": record.title,
        "breadcrumb": record.breadcrumb,
        "source_type": record.source_type,
    }
    return KnowledgeSearchHit(
        id=record.storage_key,
        score=score,
        score_kind=kind,
        identity=extract_identity(metadata, record.evidence_key, rank),
        content=record.text if include_content else None,
        metadata=metadata,
        access=record.access,
        calibration=calibration,
    )
