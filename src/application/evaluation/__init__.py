"""Eval and Replay: the second consumer of the audit store.

``run`` (``RunEval``) scores retrieval on a test collection from what the audit store
recorded of each lookup, not from memory: the numbers describe what the agent was shown
as the store knows it, and a lookup whose record did not arrive fails the eval.
``replay`` (``Replay``) re-runs logged queries under another configuration and reports
how the evidence changed (a ``ReplayThreshold`` makes that a CI gate). ``values`` holds
datasets, configurations and reports; ``recorded`` reads the store. The flow of each is
in docs/architecture.md, "Use cases".
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
