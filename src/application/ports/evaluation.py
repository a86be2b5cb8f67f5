"""Evaluation ports: the IR metrics library an eval scores runs with."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence

#: Query id -> document id -> relevance grade (0 = judged not relevant).
Qrels = Mapping[str, Mapping[str, int]]
#: Query id -> document id -> score (higher is better).
Run = Mapping[str, Mapping[str, float]]


class RankingMetrics(ABC):
    """Scores a run against relevance judgements (an IR evaluation library)."""

    @abstractmethod
    def evaluate(
        self, qrels: Qrels, run: Run, measures: Sequence[str]
    ) -> dict[str, dict[str, float]]:
        """Query id -> measure -> value, for *every* query of ``qrels``.

        A query the run has no documents for scores 0.0 on every measure (as
        ``trec_eval -c`` does); queries of the run without qrels are ignored.
        Raises ``InvalidInputError`` for a measure the library does not know.
        """
