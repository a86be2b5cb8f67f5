"""Eval and Replay: the second consumer of the audit store.

Modules: ``values`` (datasets, configurations, reports), ``recorded`` (reading what the
audit store kept), ``run`` (``RunEval``), ``replay`` (``Replay`` and its report).

``RunEval`` measures retrieval quality on a test collection. Read top to bottom,
``RunEval.execute`` is the whole flow:

    ingest the corpus into the eval collection (each corpus entry is one document,
    chunked like any other; sync, so the collection holds exactly the corpus)
    -> for each named configuration: run every query through ``LookupKnowledge`` under
       that configuration (``with_config``), recorded in one eval session per
       configuration, ``step_id`` = the query id
    -> read back what the audit store recorded for the session (status, duration and
       the evidence rows of every invocation)
    -> build a document-level run: the documents of an invocation's evidence rows in
       rank order, a document's score from the best rank of its chunks
    -> ``RankingMetrics`` scores the run against the qrels (nDCG@10, Recall@5/10/20,
       MRR@10), plus distinct documents per result, no-evidence rate and latency
       percentiles of the recorded ``duration_ms``

The numbers therefore describe what the agent was shown *as the audit store knows it*:
a lookup whose record did not reach the database fails the eval instead of being
scored from memory.

``Replay`` re-runs the queries of logged invocations (one session, or a time range)
under another configuration in a new session and reports per query and overall how the
evidence changed: Jaccard overlap and rank-biased overlap of the ``document_id`` lists,
and the queries that lost all evidence. A ``ReplayThreshold`` turns the report into a
pass/fail verdict, so a configuration change can be gated in CI.
"""

from lookup_knowledge.application.evaluation.recorded import (
    RecordedInvocation,
    check_recorded,
    document_ranking,
    list_all_invocations,
    read_session,
    run_scores,
)
from lookup_knowledge.application.evaluation.replay import (
    OverlapMeasure,
    Replay,
    ReplayedQuery,
    ReplayReport,
    ReplaySelection,
    ReplayThreshold,
)
from lookup_knowledge.application.evaluation.run import (
    RunEval,
    new_run_id,
)
from lookup_knowledge.application.evaluation.values import (
    MEASURES,
    NAME_PATTERN,
    CalibrationBin,
    ConfigurationResult,
    EvalConfiguration,
    EvalDataset,
    EvalProgress,
    EvalProgressCallback,
    EvalQuery,
    EvalReport,
    QueryResult,
    calibration_table,
    describe_config,
    mean_or_none,
)

__all__ = [
    "MEASURES",
    "NAME_PATTERN",
    "CalibrationBin",
    "ConfigurationResult",
    "EvalConfiguration",
    "EvalDataset",
    "EvalProgress",
    "EvalProgressCallback",
    "EvalQuery",
    "EvalReport",
    "OverlapMeasure",
    "QueryResult",
    "RecordedInvocation",
    "Replay",
    "ReplayReport",
    "ReplaySelection",
    "ReplayThreshold",
    "ReplayedQuery",
    "RunEval",
    "calibration_table",
    "check_recorded",
    "describe_config",
    "document_ranking",
    "list_all_invocations",
    "mean_or_none",
    "new_run_id",
    "read_session",
    "run_scores",
]
