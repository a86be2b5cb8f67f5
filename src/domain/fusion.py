"""Reciprocal rank fusion (Cormack et al., 2009), kept beside the per-list scores.

Engines that fuse inside (Milvus ``hybrid_search``) return only the fused number, which
says where a hit ranked, not whether it is relevant: with k=60 the last of 20 hits still
scores a third of the best. Fusing here keeps each list's own score, so a hit's evidence
strength can be judged on the absolute scale of the list that found it.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from lookup_knowledge.domain.errors import InvalidInputError
from lookup_knowledge.domain.relevance import ScoreKind

K = TypeVar("K", bound=Hashable)


@dataclass(frozen=True, slots=True)
class Fused(Generic[K]):
    key: K
    score: float
    ranks: tuple[int | None, ...]  # 1-based rank in each list, None where absent


def reciprocal_rank_fusion(
    ranked_lists: Sequence[Sequence[K]], k: int = 60, weights: Sequence[float] | None = None
) -> list[Fused[K]]:
    """score(d) = sum_i w_i / (k + rank_i(d)); best first, ties by first appearance."""
    if k < 0:
        raise ValueError("k must be >= 0")
    if weights is not None and len(weights) != len(ranked_lists):
        raise ValueError("one weight per list")
    w = list(weights) if weights is not None else [1.0] * len(ranked_lists)
    scores: dict[K, float] = {}
    ranks: dict[K, list[int | None]] = {}
    order: dict[K, int] = {}
    for i, ranked in enumerate(ranked_lists):
        seen: set[K] = set()
        for rank, key in enumerate(ranked, start=1):
            if key in seen:  # a list names each key once; later repeats do not count
                continue
            seen.add(key)
            if key not in ranks:
                ranks[key] = [None] * len(ranked_lists)
                order[key] = len(order)
                scores[key] = 0.0
            ranks[key][i] = rank
            scores[key] += w[i] / (k + rank)
    fused = [Fused(key, scores[key], tuple(ranks[key])) for key in scores]
    fused.sort(key=lambda f: (-f.score, order[f.key]))
    return fused


def check_fusion_parameters(rrf_k: int, weights: Sequence[float] | None) -> None:
    """The rules every hybrid adapter applies to its fusion settings."""
    if rrf_k < 0:
        raise InvalidInputError("rrf_k must be >= 0")
    if weights is not None and (
        len(weights) != 2 or any(w < 0 for w in weights) or sum(weights) <= 0
    ):
        raise InvalidInputError("hybrid_weights must be two non-negative numbers, not both 0")


def weighted_score_fusion(
    ranked: Sequence[Sequence[K]],
    scores: Sequence[Mapping[K, float]],
    kinds: Sequence[ScoreKind],
    weights: Sequence[float],
) -> list[tuple[K, float]]:
    """Milvus' ``WeightedRanker``: the weighted sum of each list's normalised score
    (COSINE ``(1 + s) / 2``, BM25 ``2/pi * atan(|s|)``: sign-free, as Lite's is negative);
    best first, ties by first appearance."""
    total: dict[K, float] = {}
    for i, keys in enumerate(ranked):
        for key in keys:
            score = scores[i][key]
            if kinds[i] is ScoreKind.BM25:
                normalised = 2.0 / math.pi * math.atan(abs(score))
            else:
                normalised = (1.0 + score) / 2.0
            total[key] = total.get(key, 0.0) + weights[i] * normalised
    first = {key: n for n, key in enumerate(total)}
    return sorted(total.items(), key=lambda pair: (-pair[1], first[pair[0]]))
