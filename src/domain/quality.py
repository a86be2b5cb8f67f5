"""How good and how complete a lookup's evidence is, as the agent and the audit see it.

relevanceLevel (from the best normalised relevance among returned blocks):
    ``none``   no evidence returned
    ``high``   best relevance >= ``high`` (default 0.6)
    ``medium`` best relevance >= ``medium`` (default 0.4)
    ``low``    otherwise (still at or above ``rag.min-relevance``)

completenessHint:
    ``none``       no evidence returned
    ``truncated``  the context pack left blocks out for its character budget
    ``narrow``     a single block, or every block from one document
    ``adequate``   several blocks from several documents, nothing cut

qualityScore in [0, 1], 0 when nothing is returned:
    0.5 * best relevance + 0.3 * mean relevance + 0.2 * min(1, returned / return_n)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum


class RelevanceLevel(StrEnum):
    NONE = "none"
    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"


class CompletenessHint(StrEnum):
    NONE = "none"
    TRUNCATED = "truncated"
    NARROW = "narrow"
    ADEQUATE = "adequate"


@dataclass(frozen=True, slots=True)
class QualityThresholds:
    medium: float = 0.4
    high: float = 0.6

    def __post_init__(self) -> None:
        if not 0.0 <= self.medium <= self.high <= 1.0:
            raise ValueError("quality thresholds need 0 <= medium <= high <= 1")


def relevance_level(
    relevances: Sequence[float], thresholds: QualityThresholds | None = None
) -> RelevanceLevel:
    t = thresholds or QualityThresholds()
    if not relevances:
        return RelevanceLevel.NONE
    best = max(relevances)
    if best >= t.high:
        return RelevanceLevel.HIGH
    if best >= t.medium:
        return RelevanceLevel.MEDIUM
    return RelevanceLevel.LOW


def completeness_hint(
    returned: int, distinct_documents: int, omitted_for_budget: int
) -> CompletenessHint:
    if returned == 0:
        return CompletenessHint.NONE
    if omitted_for_budget > 0:
        return CompletenessHint.TRUNCATED
    if returned == 1 or distinct_documents <= 1:
        return CompletenessHint.NARROW
    return CompletenessHint.ADEQUATE


def quality_score(relevances: Sequence[float], return_n: int) -> float:
    if not relevances or return_n < 1:
        return 0.0
    best = max(relevances)
    mean = sum(relevances) / len(relevances)
    coverage = min(1.0, len(relevances) / return_n)
    score = 0.5 * best + 0.3 * mean + 0.2 * coverage
    return max(0.0, min(1.0, score))
