"""Reciprocal rank fusion (Cormack et al., 2009), kept beside the per-list scores.

Engines that fuse inside (Milvus ``hybrid_search``) return only the fused number, which
says where a hit ranked, not whether it is relevant: with k=60 the last of 20 hits still
scores a third of the best. Fusing here keeps each list's own score, so a hit's evidence
strength can be judged on the absolute scale of the list that found it.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

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
