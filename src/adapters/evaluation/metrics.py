"""``RankingMetrics`` over ir-measures (pytrec_eval underneath): the standard trec_eval
definitions of nDCG, recall and reciprocal rank, not a re-implementation.

Graded qrels (Cranfield's 1..4) feed nDCG's gains as they are (trec_eval's linear
gain); recall and reciprocal rank count any grade > 0 as relevant.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lookup_knowledge.adapters.extras import load
from lookup_knowledge.application.ports import Qrels, RankingMetrics, Run
from lookup_knowledge.domain.errors import InvalidInputError


def parse_measures(names: Sequence[str]) -> dict[Any, str]:
    """ir-measures measure object -> the name the caller used; rejects unknown names."""
    ir_measures = load("eval", "scoring an eval run", "ir_measures")

    parsed: dict[Any, str] = {}
    for name in names:
        try:
            measure = ir_measures.parse_measure(name)
        except (ValueError, NameError, TypeError, KeyError, AssertionError) as error:
            raise InvalidInputError(f"unknown measure {name!r}: {error}") from None
        parsed[measure] = name
    return parsed


class IrMeasuresMetrics(RankingMetrics):
    def evaluate(
        self, qrels: Qrels, run: Run, measures: Sequence[str]
    ) -> dict[str, dict[str, float]]:
        ir_measures = load("eval", "scoring an eval run", "ir_measures")
        parsed = parse_measures(measures)
        scores: dict[str, dict[str, float]] = {q: dict.fromkeys(measures, 0.0) for q in qrels}
        judged = {
            str(q): {str(d): int(g) for d, g in docs.items()} for q, docs in qrels.items() if docs
        }
        ranked = {
            str(q): {str(d): float(s) for d, s in docs.items()}
            for q, docs in run.items()
            if q in judged and docs
        }
        if not ranked:
            return scores
        for metric in ir_measures.iter_calc(list(parsed), judged, ranked):
            if metric.query_id in scores:
                scores[metric.query_id][parsed[metric.measure]] = float(metric.value)
        return scores
