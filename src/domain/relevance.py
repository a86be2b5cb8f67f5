"""Relevance normalisation: every score kind maps to [0, 1] with an absolute function.

The functions do not depend on the other hits in a response (no min-max scaling), so a
filtered pass and an unfiltered pass over the same store give comparable relevance, and
one ``min-relevance`` threshold means the same thing in every mode.

- ``cosine`` / ``inner_product``: similarity of normalised vectors, clamped to [0, 1]
  (negative similarity carries no evidence).
- ``l2``: a distance, mapped by ``1 / (1 + d)``.
- ``bm25``: unbounded, sign depends on the engine (Milvus Lite returns negatives); the
  magnitude is saturated by ``|s| / (|s| + bm25_saturation)``.
- ``rrf``: a fused rank score, ``sum 1/(k + rank)`` over ``n`` lists; divided by its
  maximum ``n / (k + 1)``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum


class ScoreKind(StrEnum):
    COSINE = "cosine"
    INNER_PRODUCT = "inner_product"
    L2 = "l2"
    BM25 = "bm25"
    RRF = "rrf"


@dataclass(frozen=True, slots=True)
class RelevanceCalibration:
    bm25_saturation: float = 10.0
    rrf_k: int = 60
    rrf_lists: int = 2

    def __post_init__(self) -> None:
        if not (self.bm25_saturation > 0 and math.isfinite(self.bm25_saturation)):
            raise ValueError("bm25_saturation must be a positive finite number")
        if self.rrf_k < 0:
            raise ValueError("rrf_k must be >= 0")
        if self.rrf_lists < 1:
            raise ValueError("rrf_lists must be >= 1")


def _clamp(value: float) -> float:
    return 0.0 if value < 0.0 else 1.0 if value > 1.0 else value


def normalise_relevance(
    score: float, kind: ScoreKind, calibration: RelevanceCalibration | None = None
) -> float:
    cal = calibration or RelevanceCalibration()
    if not math.isfinite(score):
        # NaN carries no evidence; +inf similarity is as good as it gets, -inf none.
        if math.isnan(score):
            return 0.0
        if kind is ScoreKind.L2:
            return 0.0 if score > 0 else 1.0
        if kind is ScoreKind.BM25:
            return 1.0
        return 1.0 if score > 0 else 0.0
    if kind in (ScoreKind.COSINE, ScoreKind.INNER_PRODUCT):
        return _clamp(score)
    if kind is ScoreKind.L2:
        return _clamp(1.0 / (1.0 + max(score, 0.0)))
    if kind is ScoreKind.BM25:
        magnitude = abs(score)
        return _clamp(magnitude / (magnitude + cal.bm25_saturation))
    if kind is ScoreKind.RRF:
        best = cal.rrf_lists / (cal.rrf_k + 1)
        return _clamp(max(score, 0.0) / best)
    raise ValueError(f"unknown score kind {kind!r}")  # pragma: no cover
