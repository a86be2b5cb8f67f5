"""``HybridSearch``: a search request answered from an engine's per-mode ranked lists.

The engine (a ``RankedListSource``: Milvus, the in-memory base) returns one ranked list
per mode with each list's own scores; everything else is decided here, the same for
every engine:

- HYBRID: the dense and the BM25 list (``hybrid_candidates`` or ``top_k * group_size``
  hits each, ungrouped) are fused by ``reciprocal_rank_fusion(k=rrf_k)`` (score kind
  ``rrf``) or, with weights, by Milvus' ``WeightedRanker`` formula (reported as
  ``cosine``). Every fused hit keeps ``component_scores``: the raw score of each list,
  the one it ranked with, or for a list that did not return it the score the engine
  gives it there (``RankedListSource.list_scores``), so its evidence does not depend on
  how deep the lists were fetched. Why not the engine's own fusion: it returns only the
  fused score, which says where a hit ranked, not how relevant it is (``domain.fusion``).
- grouping (``group_size``): by the engine where it groups natively; otherwise (and
  always after a fusion, whose lists are fetched ungrouped so a chunk both lists found
  is seen as such) over the ranked list here, with the shape engine grouping returns:
  at most ``group_size`` hits for each of the first ``top_k`` documents, best score
  first. Without native grouping the list is over-fetched until it holds ``top_k``
  documents or the engine has no more.

Order is the fusion's; how strong the evidence is stays with the calibrated relevance
of ``domain.relevance``, read from the per-list scores.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from lookup_knowledge.application.ports.search import (
    KnowledgeSearchHit,
    KnowledgeSearchRequest,
    RankedList,
    RankedListSource,
)
from lookup_knowledge.domain.errors import InvalidInputError
from lookup_knowledge.domain.fusion import (
    check_fusion_parameters,
    reciprocal_rank_fusion,
    weighted_score_fusion,
)
from lookup_knowledge.domain.model import SearchMode
from lookup_knowledge.domain.postprocess import group_by_document
from lookup_knowledge.domain.relevance import ScoreKind

_LIST_KIND = {SearchMode.DENSE: ScoreKind.COSINE, SearchMode.SPARSE: ScoreKind.BM25}
_KIND_ORDER = {kind: n for n, kind in enumerate(_LIST_KIND.values())}


@dataclass(frozen=True, slots=True)
class FusionSettings:
    """How hybrid lists are fused and how grouping without the engine fetches."""

    rrf_k: int = 60
    #: (dense, sparse) weights of the ``WeightedRanker`` formula; None: RRF.
    weights: tuple[float, float] | None = None
    #: Hits per list of a hybrid search; None: ``top_k * group_size``.
    hybrid_candidates: int | None = None
    #: Client-side grouping first fetches ``top_k * group_size`` times this.
    client_grouping_oversample: int = 4
    #: The longest list the engine returns (Milvus' topk limit); None: no limit.
    max_list: int | None = None

    def __post_init__(self) -> None:
        check_fusion_parameters(self.rrf_k, self.weights)
        if self.hybrid_candidates is not None and self.hybrid_candidates < 1:
            raise InvalidInputError("hybrid_candidates must be >= 1")
        if self.client_grouping_oversample < 1:
            raise InvalidInputError("client_grouping_oversample must be >= 1")

    @property
    def fused_kind(self) -> ScoreKind:
        return ScoreKind.RRF if self.weights is None else ScoreKind.COSINE

    def capped(self, limit: int) -> int:
        return limit if self.max_list is None else min(self.max_list, limit)


class HybridSearch:
    """``search(request)`` over a ``RankedListSource``: the capability choice, the fusion
    and the grouping (the ``KnowledgeSearchPort.search`` of the engines that use it)."""

    def __init__(self, source: RankedListSource, settings: FusionSettings | None = None) -> None:
        self._source = source
        self._settings = settings or FusionSettings()

    @property
    def settings(self) -> FusionSettings:
        return self._settings

    def search(self, request: KnowledgeSearchRequest) -> list[KnowledgeSearchHit]:
        group = request.group_size
        if request.mode is SearchMode.HYBRID:
            hits = self._hybrid(request, group)
        elif group is None:
            hits = self._single(request, request.top_k, None)
        elif self._source.native_grouping():
            hits = self._single(request, request.top_k, group)
        else:
            hits = self._client_grouped(request, group)
        return hits if group is None else best_first(hits)

    def _single(
        self, request: KnowledgeSearchRequest, limit: int, group: int | None
    ) -> list[KnowledgeSearchHit]:
        lists = self._source.ranked_lists(request, limit=limit, group_size=group)
        return [hit for ranked in lists for hit in ranked.hits]

    def _hybrid(
        self, request: KnowledgeSearchRequest, group: int | None
    ) -> list[KnowledgeSearchHit]:
        """``top_k`` counts hits, or documents when ``group`` is set."""
        limit = request.top_k
        per_list = self._settings.capped(
            max(self._settings.hybrid_candidates or limit * (group or 1), limit)
        )
        lists = self._source.ranked_lists(request, limit=per_list, group_size=None)
        if group is None:
            return self._completed(request, fuse(lists, self._settings, limit=limit))
        fused = fuse(lists, self._settings)
        return self._completed(request, group_by_document(fused, document_of, limit, group))

    def _completed(
        self, request: KnowledgeSearchRequest, hits: list[KnowledgeSearchHit]
    ) -> list[KnowledgeSearchHit]:
        """Each fused hit with the raw score of every list, asked of the engine for the
        lists that did not return it (``RankedListSource.list_scores``): a hit outside
        one list's top is weaker there than that list's last hit, not without evidence,
        and how much weaker depends on how deep the lists were fetched. Completing it
        makes a hit's relevance the same whatever ``retrieve-k`` is. The order stays the
        fusion's. A list the engine cannot score leaves the hit as it was."""
        completed: dict[str, list[tuple[ScoreKind, float]]] = {}
        for mode, kind in _LIST_KIND.items():
            missing = [
                hit.id
                for hit in hits
                if hit.id is not None and all(k is not kind for k, _ in hit.component_scores)
            ]
            if not missing:
                continue
            for key, score in self._source.list_scores(request, mode, missing).items():
                completed.setdefault(key, []).append((kind, score))
        if not completed:
            return hits
        return [
            hit
            if hit.id is None or hit.id not in completed
            else replace(
                hit,
                component_scores=tuple(
                    sorted(
                        (*hit.component_scores, *completed[hit.id]),
                        key=lambda pair: _KIND_ORDER[pair[0]],
                    )
                ),
            )
            for hit in hits
        ]

    def _client_grouped(
        self, request: KnowledgeSearchRequest, group: int
    ) -> list[KnowledgeSearchHit]:
        """Grouping for engines without it: over-fetch, keep ``group`` hits per document
        for the first ``top_k`` documents (the shape engine grouping returns)."""
        oversample = self._settings.client_grouping_oversample
        limit = self._settings.capped(request.top_k * group * oversample)
        while True:
            found = self._single(request, limit, None)
            kept = group_by_document(found, document_of, request.top_k, group)
            documents = len({document_of(hit) for hit in kept})
            exhausted = len(found) < limit or self._settings.capped(limit + 1) == limit
            if documents >= request.top_k or exhausted:
                return kept
            limit = self._settings.capped(limit * 4)


def fuse(
    lists: Sequence[RankedList], settings: FusionSettings, *, limit: int | None = None
) -> list[KnowledgeSearchHit]:
    """The lists fused into one ranking (RRF, or the weighted formula), each hit with the
    raw score of every list that found it; with ``limit``, its first ``limit`` hits only
    (the others are not rebuilt). A hit without an id cannot be matched across lists and
    is left out; the first list's copy of a hit is the one kept."""
    first: dict[str, KnowledgeSearchHit] = {}
    ranked: list[list[str]] = []
    scores: list[dict[str, float]] = []
    kinds = [_LIST_KIND[each.mode] for each in lists]
    for kind, each in zip(kinds, lists, strict=True):
        # Best first, as each list's own score says (Lite's BM25 is negative).
        ordered = sorted(each.hits, key=lambda hit: _strength(hit.score, kind), reverse=True)
        keys: list[str] = []
        raw: dict[str, float] = {}
        for hit in ordered:
            if hit.id is None or hit.id in raw:
                continue
            raw[hit.id] = hit.score
            keys.append(hit.id)
            first.setdefault(hit.id, hit)
        ranked.append(keys)
        scores.append(raw)
    if settings.weights is None:
        order = [(f.key, f.score) for f in reciprocal_rank_fusion(ranked, settings.rrf_k)]
    else:
        order = weighted_score_fusion(ranked, scores, kinds, settings.weights)
    if limit is not None:
        order = order[: max(limit, 0)]
    return [
        replace(
            first[key],
            score=score,
            score_kind=settings.fused_kind,
            component_scores=tuple(
                (kinds[i], raw[key]) for i, raw in enumerate(scores) if key in raw
            ),
        )
        for key, score in order
    ]


def document_of(hit: KnowledgeSearchHit) -> object:
    """What grouping groups by: the document id the engine stored."""
    return hit.metadata.get("doc_id")


def best_first(hits: list[KnowledgeSearchHit]) -> list[KnowledgeSearchHit]:
    """Grouped results come group by group; present them best score first."""
    return sorted(hits, key=lambda h: -_strength(h.score, h.score_kind))


def _strength(score: float, kind: ScoreKind) -> float:
    """Bigger is better (Milvus Lite reports BM25 scores negative)."""
    return abs(score) if kind is ScoreKind.BM25 else score
