"""An optional cross-encoder reranker's score on the calibrated relevance scale.

A reranker (served over HTTP, see ``application.ports.Reranker``) scores each
(query, text) pair. Its score becomes *evidence* in [0, 1]: taken as is when the server
returns probabilities (TEI with ``raw_scores: false``, the Cohere API), through a sigmoid
when it returns raw logits. That evidence is pooled with the hit's calibrated relevance
(``domain.relevance``, whose weights are fitted elsewhere and not changed here) in
log-odds space::

    relevance = sigmoid((1 - w) * logit(calibrated) + w * logit(reranker))

a weighted logarithmic opinion pool: monotone in both, in [0, 1], ``w = 0`` leaves the
calibrated relevance untouched and ``w = 1`` trusts the reranker alone. The pooled value
is read on the same scale as before (``min-relevance``, ``relevanceLevel``, ``found``),
and it replaces the engine's score (RRF in hybrid) as the base of the rule rerank for the
candidates the reranker saw: with a reranker the order is its evidence plus the rule
bonuses; without one, RRF / the engine score keeps deciding it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

#: Probabilities are kept this far from 0 and 1 so their log-odds stay finite.
_EPSILON = 1e-6


def _sigmoid(x: float) -> float:
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    e = math.exp(x)
    return e / (1.0 + e)


def _logit(p: float) -> float:
    q = min(max(p, _EPSILON), 1.0 - _EPSILON)
    return math.log(q / (1.0 - q))


def reranker_evidence(score: float, *, logits: bool) -> float:
    """A reranker score as evidence in [0, 1]: a sigmoid of a raw logit, else the score
    clamped (a probability a server rounded just outside [0, 1]). NaN carries none."""
    if math.isnan(score):
        return 0.0
    if logits:
        return _sigmoid(max(-50.0, min(50.0, score)))
    return 0.0 if score < 0.0 else 1.0 if score > 1.0 else score


def pooled_relevance(calibrated: float, evidence: float, weight: float) -> float:
    """The calibrated relevance and the reranker's evidence pooled in log-odds space."""
    if weight <= 0.0:
        return calibrated
    x = (1.0 - weight) * _logit(calibrated) + weight * _logit(evidence)
    return min(1.0, max(0.0, _sigmoid(x)))


@dataclass(frozen=True, slots=True)
class RerankerSettings:
    """How the optional reranker stage is used (``rag.rerank.*``).

    ``provider``: the configured adapter's name, ``none`` when off. ``top_k``: the
    candidates (in the engine's order) whose texts are sent; the others are not returned
    when the reranker answered (it did not judge them). ``weight``: ``w`` above.
    ``logits``: the server returns raw logits (a sigmoid turns them into evidence).
    """

    provider: str = "none"
    top_k: int = 20
    weight: float = 0.5
    logits: bool = False

    def __post_init__(self) -> None:
        if self.top_k < 1:
            raise ValueError("reranker top_k must be >= 1")
        if not (math.isfinite(self.weight) and 0.0 <= self.weight <= 1.0):
            raise ValueError("reranker weight must be in [0, 1]")

    @property
    def enabled(self) -> bool:
        return self.provider != "none"
