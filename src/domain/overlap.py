"""How much two ranked lists of evidence agree: Jaccard overlap and rank-biased overlap.

Replay compares the ``document_id`` lists a query got before and after a configuration
change. Two measures:

- ``jaccard(a, b)``: |A ∩ B| / |A ∪ B| of the sets; blind to order.
- ``rank_biased_overlap(a, b, p)``: RBO (Webber, Moffat and Zobel, "A similarity measure
  for indefinite rankings", TOIS 2010) for *complete* finite lists. The agreement at
  depth d is ``A_d = X_d / d`` (``X_d`` = items the two prefixes of length d share; a
  list shorter than d contributes all its items); depth d weighs ``(1 - p) p^(d-1)``.
  The sum runs to k, the length of the longer list, and is divided by the weight of
  those depths, ``1 - p^k``, so identical lists score exactly 1 and disjoint lists 0.
  With ``p = 0.9`` the top 10 ranks carry ~86% of the weight.

  Why not the paper's extrapolated RBO_ext: it assumes each list continues beyond what
  was seen, so a list cut from 20 blocks to its first 4 would still score ~1. Evidence
  lists are complete (the agent saw exactly those blocks), and losing 16 of them is a
  change a replay must show.

Both treat two empty lists as identical (1.0) and an empty list against a non-empty one
as disjoint (0.0). A repeated item counts once, at its first (best) rank.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import TypeVar

T = TypeVar("T", bound=Hashable)

DEFAULT_PERSISTENCE = 0.9


def _unique(items: Sequence[T]) -> list[T]:
    return list(dict.fromkeys(items))


def jaccard(a: Sequence[T], b: Sequence[T]) -> float:
    """|A ∩ B| / |A ∪ B|; 1.0 for two empty lists."""
    sa, sb = set(a), set(b)
    union = sa | sb
    if not union:
        return 1.0
    return len(sa & sb) / len(union)


def rank_biased_overlap(a: Sequence[T], b: Sequence[T], p: float = DEFAULT_PERSISTENCE) -> float:
    """Rank-biased overlap of two complete rankings, in [0, 1] (see the module doc).

    ``p`` in (0, 1) is the persistence: how far down the lists the comparison looks.
    """
    if not 0.0 < p < 1.0:
        raise ValueError("p must be in (0, 1)")
    first, second = _unique(a), _unique(b)
    if not first and not second:
        return 1.0
    if not first or not second:
        return 0.0
    depth_max = max(len(first), len(second))
    seen_first: set[T] = set()
    seen_second: set[T] = set()
    shared = 0  # X_d
    total = 0.0
    weight = 1.0  # p^(d-1)
    for depth in range(1, depth_max + 1):
        x = first[depth - 1] if depth <= len(first) else None
        y = second[depth - 1] if depth <= len(second) else None
        if x is not None and y is not None and x == y:
            shared += 1
        else:
            if x is not None:
                shared += x in seen_second
                seen_first.add(x)
            if y is not None:
                shared += y in seen_first
                seen_second.add(y)
        if x is not None:
            seen_first.add(x)
        if y is not None:
            seen_second.add(y)
        total += weight * shared / depth
        weight *= p
    value = (1.0 - p) * total / (1.0 - p**depth_max)
    # Floating-point sums may land a hair outside [0, 1].
    return min(1.0, max(0.0, value))
