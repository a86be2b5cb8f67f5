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
import random
from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
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
    #: A block whose evidence is below this share of the best block's is not returned
    #: (no padding to reach return-n with what is far weaker than the best).
    min_share_of_best: float = 0.02
    #: The logistic per search mode that turns per-list evidence into relevance.
    model: RelevanceModel = field(default_factory=lambda: DEFAULT_MODEL)

    def __post_init__(self) -> None:
        if not 0.0 <= self.min_share_of_best <= 1.0:
            raise ValueError("min_share_of_best must be in [0, 1]")
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


# --------------------------------------------------------------------------- evidence scale
#
# ``normalise_relevance`` above keeps deciding the order of hits. The functions below put
# each list's raw score on one *evidence* scale in [0, 1], comparable across modes and
# collections of any size; ``min-relevance``, ``relevanceLevel``, ``found`` and a block's
# ``relevance`` are read on it.


@dataclass(frozen=True, slots=True)
class DenseBackground:
    """How similar *unrelated* chunks of one collection are: the mean and standard
    deviation of the cosine similarity of random pairs of its stored vectors (chunks of
    different documents), measured when the collection is sealed and stored with it."""

    mean: float
    std: float
    pairs: int = 0

    def __post_init__(self) -> None:
        if not (math.isfinite(self.mean) and -1.0 <= self.mean <= 1.0):
            raise ValueError("background mean must be a cosine in [-1, 1]")
        if not (math.isfinite(self.std) and 0.0 < self.std <= 2.0):
            raise ValueError("background std must be in (0, 2]")
        if self.pairs < 0:
            raise ValueError("pairs must be >= 0")


@dataclass(frozen=True, slots=True)
class HitCalibration:
    """What the engine knows to put one search's raw scores on the evidence scale.

    ``bm25_reference``: the BM25 score of an average-length chunk that holds each query
    concept once (``query_reference``: ``sum idf(t)`` over the analysed query terms, with
    the engine's own idf, or for an expanded query the cheapest form of each concept; a
    term the collection has never seen counts as if one chunk held it).
    ``dense_background``: the collection's ``DenseBackground``.
    """

    bm25_reference: float | None = None
    dense_background: DenseBackground | None = None

    def __post_init__(self) -> None:
        ref = self.bm25_reference
        if ref is not None and not (math.isfinite(ref) and ref > 0):
            raise ValueError("bm25_reference must be a positive finite number")


#: The background assumed for a collection whose own could not be measured (fewer than
#: ``MIN_BACKGROUND_PAIRS`` pairs of chunks of different documents, or no stored
#: vectors readable): about the sample corpus' under all-MiniLM-L6-v2.
FALLBACK_BACKGROUND = DenseBackground(mean=0.15, std=0.12)


def bm25_idf(documents: int, containing: int) -> float:
    """Okapi BM25's idf (Lucene, tantivy, Milvus): ``ln(1 + (N - n + 0.5) / (n + 0.5))``."""
    n = max(0, min(containing, documents))
    return math.log(1.0 + (max(documents, 0) - n + 0.5) / (n + 0.5))


def reference_idf(documents: int, containing: int) -> float:
    """A query term's share of the query's BM25 reference: its idf, with a term that no
    chunk holds counted as if one chunk held it (the most the term could add, were it
    there). Counting it at ``bm25_idf(N, 0)`` made the words of a natural question that a
    small collection lacks ("how", "many") outweigh the words its only document matches,
    since in a collection of one or two chunks every present term has the lowest idf;
    in a large one the two differ by a few percent."""
    return bm25_idf(documents, max(containing, 1))


#: What a BM25 query asks for, as its reference counts it: one entry per concept of the
#: query, each the forms a chunk can hold the concept in, each form the analysed terms
#: that match it. A query without expansion has one single-term form per term.
QueryConcepts = Sequence[Sequence[Sequence[str]]]


def concepts_of_terms(terms: Sequence[str]) -> tuple[tuple[tuple[str], ...], ...]:
    """The concepts of a query that is searched for exactly its ``terms``: each term
    its own concept with one form (a repeated term counts twice, as BM25 scores it)."""
    return tuple(((term,),) for term in terms)


def query_reference(concepts: QueryConcepts, idf: Callable[[str], float]) -> float | None:
    """The query's BM25 reference: the score of an average-length chunk that holds each
    concept once, in the form that scores least (``sum idf`` of its terms; ``idf`` is
    ``reference_idf`` with the engine's statistics). For a query of plain terms this is
    ``sum idf(t)``; for a query whose analyzer added alternatives (English glosses of a
    Chinese word) a concept is met by any one of its forms, so the sum of every
    alternative's idf is no score a chunk could reach, and the dearest form would ask an
    English chunk to hold the Chinese word. None for a query without terms."""
    total = 0.0
    for forms in concepts:
        costs = [sum(idf(term) for term in form) for form in forms if form]
        if costs:
            total += min(costs)
    return total if total > 0 and math.isfinite(total) else None


def bm25_evidence(score: float, reference: float) -> float:
    """The share of what the query could reach: ``|s| / reference``, at most 1.

    Independent of corpus size: a term in one of two chunks and a term in one of a
    million both reach 1 in the average-length chunk that holds them once.
    """
    if math.isnan(score):
        return 0.0
    return _clamp(abs(score) / reference)


#: Bounds of the dense evidence (background standard deviations).
Z_BOUND = 20.0


def cosine_evidence(score: float, background: DenseBackground) -> float:
    """How many background standard deviations a cosine lies above the mean cosine of
    unrelated chunks of the collection (``z``), within ``[-Z_BOUND, Z_BOUND]``."""
    if math.isnan(score):
        return -Z_BOUND
    z = (score - background.mean) / background.std if math.isfinite(score) else score
    return max(-Z_BOUND, min(Z_BOUND, z))


@dataclass(frozen=True, slots=True)
class EvidenceWeights:
    """``relevance = 1 / (1 + exp(-(dense * z + sparse * r + bias)))``: a logistic
    model of "judged relevant" on the dense evidence ``z`` and the BM25 evidence ``r``
    (Platt scaling). Non-negative weights: more evidence never lowers relevance."""

    dense: float
    sparse: float
    bias: float

    def __post_init__(self) -> None:
        for name in ("dense", "sparse", "bias"):
            if not math.isfinite(getattr(self, name)):
                raise ValueError(f"evidence weight {name} must be finite")
        if self.dense < 0 or self.sparse < 0:
            raise ValueError("evidence weights must be >= 0 (relevance is monotone)")


@dataclass(frozen=True, slots=True)
class RelevanceModel:
    """One logistic per search mode: each mode has its own evidence (a dense search has
    no BM25 score), and one relevance means one share judged relevant in every mode."""

    dense: EvidenceWeights
    sparse: EvidenceWeights
    hybrid: EvidenceWeights


#: Maximum likelihood per mode on the judged hits of Cranfield dev and SciFact train
#: pooled, each collection's questions unanswerable for the other, with off-topic
#: questions (benchmarks/README.md, "Calibrated relevance").
DEFAULT_MODEL: RelevanceModel = RelevanceModel(
    dense=EvidenceWeights(dense=1.04, sparse=0.0, bias=-5.62),
    sparse=EvidenceWeights(dense=0.0, sparse=6.54, bias=-6.32),
    hybrid=EvidenceWeights(dense=0.65, sparse=3.84, bias=-6.20),
)

#: The dense evidence of a hybrid hit the dense list did not return (its cosine is below
#: every returned one): the background's mean.
Z_ABSENT = 0.0


def relevance_from_evidence(z: float | None, r: float | None, weights: EvidenceWeights) -> float:
    """The modelled relevance of a hit from its lists' evidence (None: that list did not
    find it; absent dense evidence counts as ``Z_ABSENT``, absent BM25 as 0)."""
    x = (
        weights.dense * (Z_ABSENT if z is None else z)
        + weights.sparse * (0.0 if r is None else r)
        + weights.bias
    )
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    e = math.exp(x)
    return e / (1.0 + e)


def hit_relevance(
    per_list: Sequence[tuple[ScoreKind, float]],
    calibration: HitCalibration | None,
    weights: EvidenceWeights,
    fallback: RelevanceCalibration | None = None,
) -> float:
    """A hit's relevance from the raw scores of the lists that found it. What the engine
    could not calibrate: BM25 by ``normalise_relevance`` (saturation), cosine against
    ``FALLBACK_BACKGROUND``; another score kind is read by ``normalise_relevance``."""
    z: float | None = None
    r: float | None = None
    other: list[float] = []
    cal = calibration or HitCalibration()
    for kind, score in per_list:
        if kind is ScoreKind.BM25:
            r = (
                bm25_evidence(score, cal.bm25_reference)
                if cal.bm25_reference is not None
                else normalise_relevance(score, kind, fallback)
            )
        elif kind in (ScoreKind.COSINE, ScoreKind.INNER_PRODUCT):
            z = cosine_evidence(score, cal.dense_background or FALLBACK_BACKGROUND)
        else:
            other.append(normalise_relevance(score, kind, fallback))
    if z is None and r is None:
        return max(other, default=0.0)
    return relevance_from_evidence(z, r, weights)


#: Fewer pairs of chunks from different documents than this say too little about a
#: collection's background; cosine is then read by ``normalise_relevance``.
MIN_BACKGROUND_PAIRS = 30
#: A background spread below this is a collection of near-copies: it is taken as this.
MIN_BACKGROUND_STD = 0.02


def measure_background(
    vectors: Sequence[tuple[str, Sequence[float]]], max_pairs: int = 4000, seed: int = 0
) -> DenseBackground | None:
    """The ``DenseBackground`` of ``(document, vector)`` rows: the cosine of up to
    ``max_pairs`` pairs of rows from different documents, drawn with a fixed seed (the
    same rows give the same background). None with fewer than ``MIN_BACKGROUND_PAIRS``."""

    unit: list[tuple[str, array[float]]] = []  # 8 bytes a value, not a float object's 32
    for document, vector in vectors:
        norm = math.sqrt(sum(x * x for x in vector))
        if norm > 0 and math.isfinite(norm):
            unit.append((document, array("d", (x / norm for x in vector))))
    n = len(unit)
    if n < 2:
        return None
    rng = random.Random(seed)
    possible = n * (n - 1) // 2
    if possible <= max_pairs:
        pairs = [(i, j) for i in range(n) for j in range(i + 1, n)]
    else:
        pairs = [tuple(rng.sample(range(n), 2)) for _ in range(max_pairs)]  # type: ignore[misc]
    sims: list[float] = []
    for i, j in pairs:
        (doc_a, a), (doc_b, b) = unit[i], unit[j]
        if doc_a == doc_b:
            continue
        sims.append(_clamp_cosine(sum(x * y for x, y in zip(a, b, strict=True))))
    if len(sims) < MIN_BACKGROUND_PAIRS:
        return None
    mean = sum(sims) / len(sims)
    std = math.sqrt(sum((s - mean) ** 2 for s in sims) / (len(sims) - 1))
    return DenseBackground(mean=mean, std=max(std, MIN_BACKGROUND_STD), pairs=len(sims))


def _clamp_cosine(value: float) -> float:
    return -1.0 if value < -1.0 else 1.0 if value > 1.0 else value
