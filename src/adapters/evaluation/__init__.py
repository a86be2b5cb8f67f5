"""The Eval harness's adapters: the BEIR loader, the ir-measures ``RankingMetrics``, report
writers (JSON, rich tables, PNG / HTML chart). The ``eval`` command line is
``lookup_knowledge.adapters.cli.eval``; the use cases are built by the container.

Importing this package loads neither ir-measures nor matplotlib; they are imported
when a report is scored or drawn.
"""

from lookup_knowledge.adapters.evaluation.beir import (
    BeirCorpusSource,
    BeirDataset,
    eval_collection_name,
    load_beir,
    read_qrels,
    read_queries,
)
from lookup_knowledge.adapters.evaluation.metrics import IrMeasuresMetrics

__all__ = [
    "BeirCorpusSource",
    "BeirDataset",
    "IrMeasuresMetrics",
    "eval_collection_name",
    "load_beir",
    "read_qrels",
    "read_queries",
]
