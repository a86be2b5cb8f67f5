"""HybridSearch: fusion, grouping and the engine-or-client grouping choice over an
engine's per-mode ranked lists."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lookup_knowledge.application.hybrid_search import FusionSettings, HybridSearch, fuse
from lookup_knowledge.application.ports import (
    KnowledgeSearchHit,
    KnowledgeSearchRequest,
    RankedList,
    RankedListSource,
)
from lookup_knowledge.domain.errors import InvalidInputError
from lookup_knowledge.domain.identity import extract_identity
from lookup_knowledge.domain.model import SearchMode
from lookup_knowledge.domain.relevance import ScoreKind

_KIND = {SearchMode.DENSE: ScoreKind.COSINE, SearchMode.SPARSE: ScoreKind.BM25}


def hit(key: str, score: float, mode: SearchMode) -> KnowledgeSearchHit:
    doc = key.split("#")[0]
    metadata = {"doc_id": doc, "chunk_index": int(key.rsplit("-", 1)[1])}
    return KnowledgeSearchHit(
        id=key,
        score=score,
        score_kind=_KIND[mode],
        identity=extract_identity(metadata, key, 1),
        metadata=metadata,
    )


@dataclass
class ListsOnly(RankedListSource):
    """An engine of fixed lists per mode, recording what it was asked."""

    lists: dict[SearchMode, list[tuple[str, float]]]
    grouping: bool = False
    asked: list[tuple[int, int | None]] = field(default_factory=list)
    #: What ``list_scores`` answers: each mode's score of rows outside its list, if any.
    scores: dict[SearchMode, dict[str, float]] = field(default_factory=dict)
    scored: list[tuple[SearchMode, tuple[str, ...]]] = field(default_factory=list)

    def native_grouping(self) -> bool:
        return self.grouping

    def list_scores(
        self, request: KnowledgeSearchRequest, mode: SearchMode, keys: Sequence[str]
    ) -> dict[str, float]:
        self.scored.append((mode, tuple(keys)))
        known = {**dict(self.lists.get(mode, [])), **self.scores.get(mode, {})}
        return {key: known[key] for key in keys if key in known}

    def ranked_lists(
        self, request: KnowledgeSearchRequest, *, limit: int, group_size: int | None
    ) -> tuple[RankedList, ...]:
        self.asked.append((limit, group_size))
        modes: Sequence[SearchMode] = (
            (SearchMode.DENSE, SearchMode.SPARSE)
            if request.mode is SearchMode.HYBRID
            else (request.mode,)
        )
        return tuple(
            RankedList(m, tuple(hit(k, s, m) for k, s in self.lists.get(m, [])[:limit]))
            for m in modes
        )


def request(mode: SearchMode, top_k: int = 10, group: int | None = None) -> KnowledgeSearchRequest:
    vector = (1.0,) if mode.needs_query_vector else None
    return KnowledgeSearchRequest(
        query_text="q", top_k=top_k, mode=mode, query_vector=vector, group_size=group
    )


def test_hybrid_fuses_by_reciprocal_rank_and_keeps_each_lists_raw_score() -> None:
    source = ListsOnly(
        {
            SearchMode.DENSE: [("a#chunk-0", 0.9), ("b#chunk-0", 0.8)],
            SearchMode.SPARSE: [("b#chunk-0", 7.0), ("c#chunk-0", 3.0)],
        }
    )
    hits = HybridSearch(source, FusionSettings(rrf_k=60)).search(request(SearchMode.HYBRID))
    assert [h.id for h in hits] == ["b#chunk-0", "a#chunk-0", "c#chunk-0"]
    assert hits[0].score == pytest.approx(1 / 62 + 1 / 61)
    assert all(h.score_kind is ScoreKind.RRF for h in hits)
    assert hits[0].component_scores == ((ScoreKind.COSINE, 0.8), (ScoreKind.BM25, 7.0))
    assert hits[2].component_scores == ((ScoreKind.BM25, 3.0),)


def test_hybrid_with_weights_reports_the_weighted_score_as_cosine() -> None:
    source = ListsOnly(
        {SearchMode.DENSE: [("a#chunk-0", 1.0)], SearchMode.SPARSE: [("b#chunk-0", 1e9)]}
    )
    settings = FusionSettings(weights=(0.0, 1.0))
    hits = HybridSearch(source, settings).search(request(SearchMode.HYBRID))
    assert [h.id for h in hits] == ["b#chunk-0", "a#chunk-0"]
    assert hits[0].score_kind is ScoreKind.COSINE
    assert hits[0].score == pytest.approx(1.0)


def test_hybrid_lists_are_fetched_ungrouped_and_the_fused_list_is_grouped() -> None:
    dense = [(f"a#chunk-{i}", 1.0 - i / 10) for i in range(3)] + [("b#chunk-0", 0.1)]
    source = ListsOnly({SearchMode.DENSE: dense, SearchMode.SPARSE: []}, grouping=True)
    hits = HybridSearch(source).search(request(SearchMode.HYBRID, top_k=2, group=2))
    assert source.asked == [(4, None)]  # top_k * group_size hits per list, no grouping
    assert [h.id for h in hits] == ["a#chunk-0", "a#chunk-1", "b#chunk-0"]


def test_an_engine_that_groups_is_asked_to_group() -> None:
    source = ListsOnly({SearchMode.DENSE: [("a#chunk-0", 0.5)]}, grouping=True)
    HybridSearch(source).search(request(SearchMode.DENSE, top_k=3, group=2))
    assert source.asked == [(3, 2)]


def test_without_engine_grouping_the_list_is_over_fetched_until_it_holds_top_k_documents() -> None:
    # Ten chunks of one document come first: the first fetch (2 * 1 * 4 = 8) holds one
    # document, so the list is fetched again, four times longer.
    dense = [(f"a#chunk-{i}", 1.0 - i / 100) for i in range(10)] + [("b#chunk-0", 0.01)]
    source = ListsOnly({SearchMode.DENSE: dense}, grouping=False)
    hits = HybridSearch(source).search(request(SearchMode.DENSE, top_k=2, group=1))
    assert source.asked == [(8, None), (32, None)]
    assert [h.id for h in hits] == ["a#chunk-0", "b#chunk-0"]


def test_client_grouping_stops_at_the_longest_list_the_engine_returns() -> None:
    dense = [(f"a#chunk-{i}", 1.0 - i / 100) for i in range(50)]
    source = ListsOnly({SearchMode.DENSE: dense}, grouping=False)
    HybridSearch(source, FusionSettings(max_list=20)).search(
        request(SearchMode.DENSE, top_k=2, group=1)
    )
    assert source.asked == [(8, None), (20, None)]


def test_grouped_results_are_presented_best_score_first() -> None:
    sparse = [("a#chunk-0", -2.0), ("b#chunk-0", -9.0), ("a#chunk-1", -1.0)]  # Lite: negative
    source = ListsOnly({SearchMode.SPARSE: sparse}, grouping=True)
    hits = HybridSearch(source).search(request(SearchMode.SPARSE, top_k=3, group=2))
    assert [h.id for h in hits] == ["b#chunk-0", "a#chunk-0", "a#chunk-1"]


def test_fusion_settings_refuse_bad_values() -> None:
    with pytest.raises(InvalidInputError, match="hybrid_candidates"):
        FusionSettings(hybrid_candidates=0)
    with pytest.raises(InvalidInputError, match="rrf_k"):
        FusionSettings(rrf_k=-1)


def test_a_hybrid_hit_one_list_did_not_return_gets_that_lists_score_from_the_engine() -> None:
    source = ListsOnly(
        {
            SearchMode.DENSE: [("a#chunk-0", 0.9), ("b#chunk-0", 0.8)],
            SearchMode.SPARSE: [("b#chunk-0", 7.0), ("c#chunk-0", 3.0)],
        },
        scores={SearchMode.DENSE: {"c#chunk-0": 0.41}, SearchMode.SPARSE: {}},
    )
    hits = HybridSearch(source).search(request(SearchMode.HYBRID))
    by_id = {h.id: h.component_scores for h in hits}
    assert by_id == {
        "b#chunk-0": ((ScoreKind.COSINE, 0.8), (ScoreKind.BM25, 7.0)),
        "a#chunk-0": ((ScoreKind.COSINE, 0.9),),  # no query word: no BM25 score to add
        "c#chunk-0": ((ScoreKind.COSINE, 0.41), (ScoreKind.BM25, 3.0)),
    }
    assert [h.id for h in hits] == ["b#chunk-0", "a#chunk-0", "c#chunk-0"]  # order: RRF's
    assert sorted(source.scored) == [
        (SearchMode.DENSE, ("c#chunk-0",)),
        (SearchMode.SPARSE, ("a#chunk-0",)),
    ]


def test_a_hybrid_hits_evidence_is_the_same_whatever_the_list_depth() -> None:
    dense = [(f"d{n}#chunk-0", 0.9 - n / 100) for n in range(30)]
    sparse = [(f"d{29 - n}#chunk-0", 20.0 - n / 2) for n in range(30)]
    source = ListsOnly({SearchMode.DENSE: dense, SearchMode.SPARSE: sparse})
    search = HybridSearch(source)
    shallow = {h.id: h.component_scores for h in search.search(request(SearchMode.HYBRID, 4))}
    deep = {h.id: h.component_scores for h in search.search(request(SearchMode.HYBRID, 30))}
    assert shallow
    for key, scores in shallow.items():
        assert len(scores) == 2
        assert scores == deep[key]


def test_only_the_hits_returned_are_scored_and_only_for_the_lists_they_miss() -> None:
    dense = [(f"d{n}#chunk-0", 0.9 - n / 100) for n in range(10)]
    sparse = [(f"s{n}#chunk-0", 10.0 - n) for n in range(10)]
    source = ListsOnly({SearchMode.DENSE: dense, SearchMode.SPARSE: sparse})
    hits = HybridSearch(source, FusionSettings(hybrid_candidates=10)).search(
        request(SearchMode.HYBRID, 4)
    )
    returned = {h.id for h in hits}
    assert len(returned) == 4
    asked = {key for _mode, keys in source.scored for key in keys}
    assert asked == returned


def test_an_engine_that_cannot_score_leaves_the_hits_as_fused() -> None:
    class CannotScore(ListsOnly):
        def list_scores(
            self, request: KnowledgeSearchRequest, mode: SearchMode, keys: Sequence[str]
        ) -> dict[str, float]:
            return RankedListSource.list_scores(self, request, mode, keys)

    source = CannotScore(
        {SearchMode.DENSE: [("a#chunk-0", 0.9)], SearchMode.SPARSE: [("c#chunk-0", 3.0)]}
    )
    hits = HybridSearch(source).search(request(SearchMode.HYBRID))
    assert {h.id: h.component_scores for h in hits} == {
        "a#chunk-0": ((ScoreKind.COSINE, 0.9),),
        "c#chunk-0": ((ScoreKind.BM25, 3.0),),
    }


_LISTS = st.lists(st.tuples(st.integers(0, 12), st.floats(0.0, 10.0, allow_nan=False)), max_size=15)


@given(dense=_LISTS, sparse=_LISTS, limit=st.integers(0, 30), weighted=st.booleans())
def test_a_fusion_cut_to_a_limit_is_the_head_of_the_whole_fusion(
    dense: list[tuple[int, float]],
    sparse: list[tuple[int, float]],
    limit: int,
    weighted: bool,
) -> None:
    lists = tuple(
        RankedList(mode, tuple(hit(f"d{n}#chunk-0", score, mode) for n, score in each))
        for mode, each in ((SearchMode.DENSE, dense), (SearchMode.SPARSE, sparse))
    )
    settings = FusionSettings(weights=(0.3, 0.7) if weighted else None)
    assert fuse(lists, settings, limit=limit) == fuse(lists, settings)[:limit]
