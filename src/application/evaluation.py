"""Eval and Replay: the second consumer of the audit store (DESIGN.md, section 5).

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

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from types import MappingProxyType

from lookup_knowledge.application.ingest import IngestDocuments, IngestProgress, IngestReport
from lookup_knowledge.application.lookup import LookupConfig, LookupKnowledge
from lookup_knowledge.application.ports import (
    MAX_PAGE_SIZE,
    AuditQueries,
    Clock,
    DocumentSource,
    EvidenceView,
    InvocationFilter,
    InvocationSummary,
    Qrels,
    RankingMetrics,
    RecordOutcome,
    TimeRange,
    ToolInvocationRecorder,
    nearest_rank,
)
from lookup_knowledge.application.tool import MAX_ID_CHARS, TOOL_NAME
from lookup_knowledge.domain.errors import (
    AuditError,
    ConfigurationError,
    InvalidInputError,
    NotFoundError,
)
from lookup_knowledge.domain.model import InvocationStatus
from lookup_knowledge.domain.overlap import DEFAULT_PERSISTENCE, jaccard, rank_biased_overlap

#: The measures an eval reports, in ir-measures notation (RR@10 is MRR@10 once averaged).
MEASURES: tuple[str, ...] = ("nDCG@10", "R@5", "R@10", "R@20", "RR@10")

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+=-]{0,99}$")
_EMPTY: Mapping[str, object] = MappingProxyType({})


# --------------------------------------------------------------------------- inputs


@dataclass(frozen=True, slots=True)
class EvalQuery:
    query_id: str
    text: str


@dataclass(frozen=True, slots=True)
class EvalDataset:
    """A test collection: the corpus to ingest, the queries to run and their qrels."""

    name: str
    corpus: DocumentSource
    queries: tuple[EvalQuery, ...]
    qrels: Qrels

    def __post_init__(self) -> None:
        if not self.name.strip():
            raise InvalidInputError("a dataset needs a name")
        if not self.queries:
            raise InvalidInputError(f"dataset {self.name!r} has no queries to run")
        seen: set[str] = set()
        for query in self.queries:
            if not query.query_id or len(query.query_id) > MAX_ID_CHARS:
                raise InvalidInputError(
                    f"query id {query.query_id!r} must have 1..{MAX_ID_CHARS} characters"
                )
            if query.query_id in seen:
                raise InvalidInputError(f"query id {query.query_id!r} appears twice")
            seen.add(query.query_id)
            if not any(grade > 0 for grade in self.qrels.get(query.query_id, {}).values()):
                raise InvalidInputError(
                    f"query {query.query_id!r} has no relevant document in the qrels; "
                    "an eval runs only judged queries"
                )


@dataclass(frozen=True, slots=True)
class EvalConfiguration:
    """One named configuration to compare. ``changes`` records what it changes relative
    to the base configuration, as the caller names it (e.g. settings keys)."""

    name: str
    config: LookupConfig
    changes: Mapping[str, object] = field(default_factory=lambda: _EMPTY)

    def __post_init__(self) -> None:
        if not _NAME.match(self.name):
            raise InvalidInputError(
                f"configuration name {self.name!r} must be 1..100 letters, digits or "
                "_ . + = - (starting with a letter or digit)"
            )


def describe_config(config: LookupConfig) -> dict[str, object]:
    """The settings of a lookup configuration that shape which evidence comes back."""
    retrieval = config.retrieval
    return {
        "mode": config.mode.value,
        "retrieveK": retrieval.retrieve_k,
        "returnN": retrieval.return_n,
        "maxChunksPerDocument": retrieval.max_chunks_per_document,
        "minRelevance": retrieval.min_relevance,
        "engineGrouping": config.engine_grouping,
        "rerank": config.rerank.enabled,
        "lateMaterialisation": config.late_materialisation,
        "maxBlocks": config.projection.max_blocks,
    }


# --------------------------------------------------------------------------- results


@dataclass(frozen=True, slots=True)
class EvalProgress:
    """One progress event. ``phase``: ingest, lookup, score or done."""

    phase: str
    configuration: str
    done: int
    total: int | None


EvalProgressCallback = Callable[[EvalProgress], None]


@dataclass(frozen=True, slots=True)
class QueryResult:
    """One query under one configuration, as recorded."""

    query_id: str
    invocation_id: str
    status: str
    duration_ms: float
    documents: tuple[str, ...]  # document-level ranking: best chunk rank first
    blocks: int  # evidence rows (chunks) recorded for the invocation
    metrics: Mapping[str, float]

    def as_dict(self) -> dict[str, object]:
        return {
            "queryId": self.query_id,
            "invocationId": self.invocation_id,
            "status": self.status,
            "durationMs": round(self.duration_ms, 3),
            "documents": list(self.documents),
            "blocks": self.blocks,
            "metrics": {k: round(v, 6) for k, v in self.metrics.items()},
        }


@dataclass(frozen=True, slots=True)
class ConfigurationResult:
    """The figures of one configuration. Metric values are means over all its queries;
    ``distinct_documents`` and ``blocks`` are means over the results with evidence."""

    name: str
    session_id: str
    changes: Mapping[str, object]
    settings: Mapping[str, object]
    queries: int
    metrics: Mapping[str, float]
    distinct_documents: float | None
    blocks: float | None
    no_evidence_rate: float
    error_rate: float
    latency_p50_ms: float | None
    latency_p95_ms: float | None
    first_error: str | None
    per_query: tuple[QueryResult, ...]

    def as_dict(self, *, per_query: bool = True) -> dict[str, object]:
        data: dict[str, object] = {
            "name": self.name,
            "sessionId": self.session_id,
            "changes": dict(self.changes),
            "settings": dict(self.settings),
            "queries": self.queries,
            "metrics": {k: round(v, 6) for k, v in self.metrics.items()},
            "distinctDocumentsPerResult": _rounded(self.distinct_documents),
            "blocksPerResult": _rounded(self.blocks),
            "noEvidenceRate": round(self.no_evidence_rate, 6),
            "errorRate": round(self.error_rate, 6),
            "latencyP50Ms": _rounded(self.latency_p50_ms),
            "latencyP95Ms": _rounded(self.latency_p95_ms),
            "firstError": self.first_error,
        }
        if per_query:
            data["perQuery"] = [q.as_dict() for q in self.per_query]
        return data


@dataclass(frozen=True, slots=True)
class EvalReport:
    run_id: str
    dataset: str
    started_at: datetime
    finished_at: datetime
    measures: tuple[str, ...]
    ingest: IngestReport | None
    configurations: tuple[ConfigurationResult, ...]

    def configuration(self, name: str) -> ConfigurationResult:
        for result in self.configurations:
            if result.name == name:
                return result
        raise NotFoundError(f"no configuration {name!r} in eval run {self.run_id}")

    def as_dict(self, *, per_query: bool = True) -> dict[str, object]:
        return {
            "runId": self.run_id,
            "dataset": self.dataset,
            "startedAt": self.started_at.isoformat(),
            "finishedAt": self.finished_at.isoformat(),
            "measures": list(self.measures),
            "ingest": self.ingest.as_dict() if self.ingest is not None else None,
            "configurations": [c.as_dict(per_query=per_query) for c in self.configurations],
        }


def _rounded(value: float | None, digits: int = 6) -> float | None:
    return None if value is None else round(value, digits)


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


# --------------------------------------------------------------------------- reading the audit store


@dataclass(frozen=True, slots=True)
class RecordedInvocation:
    """An invocation as the audit store holds it, with its evidence in rank order."""

    summary: InvocationSummary
    evidence: tuple[EvidenceView, ...]

    @property
    def document_ids(self) -> tuple[str, ...]:
        """Chunk-level evidence keys, best rank first."""
        return tuple(e.document_id for e in self.evidence)

    @property
    def documents(self) -> tuple[str, ...]:
        """Document-level ranking: each document once, at its best chunk's rank."""
        return document_ranking(self.evidence)


def document_ranking(evidence: Sequence[EvidenceView]) -> tuple[str, ...]:
    """Documents in order of their best-ranked chunk; a row without doc_id is its own
    document (its evidence key)."""
    ordered = sorted(evidence, key=lambda e: e.rank)
    return tuple(dict.fromkeys(e.doc_id or e.document_id for e in ordered))


def run_scores(documents: Sequence[str]) -> dict[str, float]:
    """Scores for a document ranking: 1 / (position), so higher is better, no ties."""
    return {doc: 1.0 / position for position, doc in enumerate(documents, 1)}


def _list_invocations(audit: AuditQueries, query: InvocationFilter) -> list[InvocationSummary]:
    items: list[InvocationSummary] = []
    offset: int | None = 0
    while offset is not None:
        page = audit.list_invocations(
            InvocationFilter(
                session_id=query.session_id,
                step_id=query.step_id,
                status=query.status,
                time_range=query.time_range,
                limit=MAX_PAGE_SIZE,
                offset=offset,
            )
        )
        items.extend(page.items)
        offset = page.next_offset
    return items


def read_session(
    audit: AuditQueries,
    recorder: ToolInvocationRecorder,
    session_id: str,
    *,
    flush_timeout_s: float = 30.0,
) -> list[RecordedInvocation]:
    """Every invocation of a session with its evidence, oldest first.

    Flushes the recorder's spool for the session first; raises ``AuditError`` when
    records are still pending (the store would give an incomplete answer).
    """
    recorder.flush(session_id, flush_timeout_s)
    pending = recorder.pending_count(session_id)
    if pending:
        raise AuditError(
            f"{pending} record(s) of session {session_id!r} are still in the recorder's "
            "spool (the audit database is unreachable); the session cannot be read completely"
        )
    summaries = _list_invocations(audit, InvocationFilter(session_id=session_id))
    by_invocation: dict[str, list[EvidenceView]] = {}
    for shown in audit.session_evidence(session_id):
        by_invocation.setdefault(shown.invocation_id, []).append(shown.evidence)
    return [
        RecordedInvocation(s, tuple(sorted(by_invocation.get(s.id, ()), key=lambda e: e.rank)))
        for s in summaries
    ]


def _check_recorded(outcome: RecordOutcome | None) -> None:
    if outcome is RecordOutcome.DISABLED:
        raise ConfigurationError(
            "audit.enabled",
            False,
            "eval and replay read their results from the audit store; enable recording",
        )
    if outcome is None:
        raise AuditError(
            "a lookup's audit record could neither be written nor spooled; see the log"
        )


def new_run_id(at: datetime) -> str:
    """A sortable, unique id for one eval or replay run."""
    return f"{at:%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:6]}"


# --------------------------------------------------------------------------- RunEval


class RunEval:
    """The Eval harness. One instance may run many evals."""

    def __init__(
        self,
        *,
        ingest: IngestDocuments,
        lookup: LookupKnowledge,
        audit: AuditQueries,
        recorder: ToolInvocationRecorder,
        metrics: RankingMetrics,
        clock: Clock,
        measures: Sequence[str] = MEASURES,
        flush_timeout_s: float = 30.0,
        after_ingest: Callable[[], None] | None = None,
    ) -> None:
        """``after_ingest`` runs once the corpus is written, before the first lookup: the
        composition root passes what makes fresh rows searchable at full speed (Milvus
        Lite searches rows still in growing segments ~50x slower until a flush)."""
        if not measures:
            raise InvalidInputError("an eval needs at least one measure")
        self._ingest = ingest
        self._lookup = lookup
        self._audit = audit
        self._recorder = recorder
        self._metrics = metrics
        self._clock = clock
        self._measures = tuple(measures)
        self._flush_timeout_s = flush_timeout_s
        self._after_ingest = after_ingest

    def execute(
        self,
        dataset: EvalDataset,
        configurations: Sequence[EvalConfiguration],
        *,
        progress: EvalProgressCallback | None = None,
        run_id: str | None = None,
        ingest: bool = True,
    ) -> EvalReport:
        """Ingest (unless ``ingest`` is False: the collection is already loaded), run
        every configuration, score it from the audit store."""
        if not configurations:
            raise InvalidInputError("an eval needs at least one configuration")
        names = [c.name for c in configurations]
        if len(set(names)) != len(names):
            raise InvalidInputError(f"configuration names must be unique: {names}")
        notify = progress or (lambda _event: None)
        started = self._clock.now()
        run = run_id or new_run_id(started)
        if not _NAME.match(run):
            raise InvalidInputError(f"run id {run!r} must be 1..100 letters, digits or _ . + = -")

        ingest_report: IngestReport | None = None
        if ingest:

            def on_ingest(event: IngestProgress) -> None:
                notify(EvalProgress("ingest", "", event.documents_done, event.documents_total))

            ingest_report = self._ingest.execute(dataset.corpus, sync=True, progress=on_ingest)
            if self._after_ingest is not None:
                self._after_ingest()

        results = tuple(
            self._run_configuration(dataset, configuration, run, notify)
            for configuration in configurations
        )
        notify(EvalProgress("done", "", len(results), len(results)))
        return EvalReport(
            run_id=run,
            dataset=dataset.name,
            started_at=started,
            finished_at=self._clock.now(),
            measures=self._measures,
            ingest=ingest_report,
            configurations=results,
        )

    def _run_configuration(
        self,
        dataset: EvalDataset,
        configuration: EvalConfiguration,
        run_id: str,
        notify: EvalProgressCallback,
    ) -> ConfigurationResult:
        session = f"eval-{run_id}-{configuration.name}"
        use_case = self._lookup.with_config(configuration.config)
        total = len(dataset.queries)
        first_error: str | None = None
        notify(EvalProgress("lookup", configuration.name, 0, total))
        for done, query in enumerate(dataset.queries, 1):
            result = use_case.execute(query.text, session_id=session, step_id=query.query_id)
            _check_recorded(result.record_outcome)
            if result.error_code is not None and first_error is None:
                first_error = f"query {query.query_id}: {result.message}"
            notify(EvalProgress("lookup", configuration.name, done, total))

        notify(EvalProgress("score", configuration.name, 0, total))
        recorded = self._recorded_by_query(session, dataset)
        run: dict[str, dict[str, float]] = {
            qid: run_scores(inv.documents) for qid, inv in recorded.items() if inv.evidence
        }
        qrels = {q.query_id: dict(dataset.qrels[q.query_id]) for q in dataset.queries}
        per_query_metrics = self._metrics.evaluate(qrels, run, self._measures)
        missing = [q.query_id for q in dataset.queries if q.query_id not in per_query_metrics]
        if missing:
            raise InvalidInputError(
                f"the metrics library returned no scores for {len(missing)} queries "
                f"(first: {missing[0]!r})"
            )

        per_query: list[QueryResult] = []
        for query in dataset.queries:
            inv = recorded[query.query_id]
            scores = per_query_metrics[query.query_id]
            per_query.append(
                QueryResult(
                    query_id=query.query_id,
                    invocation_id=inv.summary.id,
                    status=inv.summary.status,
                    duration_ms=inv.summary.duration_ms,
                    documents=inv.documents,
                    blocks=len(inv.evidence),
                    metrics=MappingProxyType(
                        {m: float(scores.get(m, 0.0)) for m in self._measures}
                    ),
                )
            )
        notify(EvalProgress("score", configuration.name, total, total))
        return _summarise(configuration, session, per_query, self._measures, first_error)

    def _recorded_by_query(
        self, session: str, dataset: EvalDataset
    ) -> dict[str, RecordedInvocation]:
        invocations = read_session(
            self._audit, self._recorder, session, flush_timeout_s=self._flush_timeout_s
        )
        by_query: dict[str, RecordedInvocation] = {}
        for inv in invocations:
            step = inv.summary.step_id
            if step is None:
                continue
            if step in by_query:
                raise AuditError(f"session {session!r} holds two invocations for query {step!r}")
            by_query[step] = inv
        absent = [q.query_id for q in dataset.queries if q.query_id not in by_query]
        if absent:
            raise AuditError(
                f"the audit store holds {len(dataset.queries) - len(absent)} of "
                f"{len(dataset.queries)} invocations of session {session!r} "
                f"(first missing query: {absent[0]!r})"
            )
        return by_query


def _summarise(
    configuration: EvalConfiguration,
    session: str,
    per_query: Sequence[QueryResult],
    measures: Sequence[str],
    first_error: str | None,
) -> ConfigurationResult:
    n = len(per_query)
    with_evidence = [q for q in per_query if q.blocks > 0]
    durations = sorted(q.duration_ms for q in per_query)
    statuses = [q.status for q in per_query]
    return ConfigurationResult(
        name=configuration.name,
        session_id=session,
        changes=MappingProxyType(dict(configuration.changes)),
        settings=MappingProxyType(describe_config(configuration.config)),
        queries=n,
        metrics=MappingProxyType({m: sum(q.metrics[m] for q in per_query) / n for m in measures}),
        distinct_documents=_mean([float(len(q.documents)) for q in with_evidence]),
        blocks=_mean([float(q.blocks) for q in with_evidence]),
        no_evidence_rate=statuses.count(InvocationStatus.NO_EVIDENCE.value) / n,
        error_rate=statuses.count(InvocationStatus.ERROR.value) / n,
        latency_p50_ms=nearest_rank(durations, 50),
        latency_p95_ms=nearest_rank(durations, 95),
        first_error=first_error,
        per_query=tuple(per_query),
    )


# --------------------------------------------------------------------------- Replay


class OverlapMeasure(StrEnum):
    JACCARD = "jaccard"
    RBO = "rbo"


@dataclass(frozen=True, slots=True)
class ReplaySelection:
    """Which logged invocations to replay: one session, or a time range (at least one
    bound, so that a forgotten option never replays the whole store)."""

    session_id: str | None = None
    time_range: TimeRange | None = None
    limit: int | None = None

    def __post_init__(self) -> None:
        if (self.session_id is None) == (self.time_range is None):
            raise InvalidInputError("replay needs either a session id or a time range")
        if self.time_range is not None and (
            self.time_range.started_from is None and self.time_range.started_to is None
        ):
            raise InvalidInputError("a replay time range needs a start or an end")
        if self.limit is not None and (isinstance(self.limit, bool) or self.limit < 1):
            raise InvalidInputError("limit must be >= 1")

    def describe(self) -> dict[str, object]:
        if self.session_id is not None:
            return {"sessionId": self.session_id, "limit": self.limit}
        assert self.time_range is not None
        start, end = self.time_range.started_from, self.time_range.started_to
        return {
            "since": start.isoformat() if start else None,
            "until": end.isoformat() if end else None,
            "limit": self.limit,
        }


@dataclass(frozen=True, slots=True)
class ReplayThreshold:
    """Pass when the mean overlap is at least ``min_overlap`` and (when set) no more
    than ``max_lost`` queries lost all their evidence."""

    min_overlap: float
    measure: OverlapMeasure = OverlapMeasure.JACCARD
    max_lost: int | None = None

    def __post_init__(self) -> None:
        value = self.min_overlap
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
            raise InvalidInputError("min_overlap must be a number in [0, 1]")
        if self.max_lost is not None and (isinstance(self.max_lost, bool) or self.max_lost < 0):
            raise InvalidInputError("max_lost must be >= 0")


@dataclass(frozen=True, slots=True)
class ReplayedQuery:
    original_invocation_id: str
    original_session_id: str
    step_id: str | None
    query: str
    replay_invocation_id: str
    status_before: str
    status_after: str
    before: tuple[str, ...]  # document_ids, best rank first
    after: tuple[str, ...]
    jaccard: float
    rbo: float

    @property
    def lost_all(self) -> bool:
        return bool(self.before) and not self.after

    @property
    def gained(self) -> bool:
        return not self.before and bool(self.after)

    @property
    def unchanged(self) -> bool:
        return self.before == self.after

    def as_dict(self) -> dict[str, object]:
        kept = set(self.after)
        had = set(self.before)
        return {
            "originalInvocationId": self.original_invocation_id,
            "originalSessionId": self.original_session_id,
            "stepId": self.step_id,
            "query": self.query,
            "replayInvocationId": self.replay_invocation_id,
            "statusBefore": self.status_before,
            "statusAfter": self.status_after,
            "jaccard": round(self.jaccard, 6),
            "rbo": round(self.rbo, 6),
            "lostAll": self.lost_all,
            "gained": self.gained,
            "unchanged": self.unchanged,
            "before": list(self.before),
            "after": list(self.after),
            "added": [d for d in self.after if d not in had],
            "removed": [d for d in self.before if d not in kept],
        }


@dataclass(frozen=True, slots=True)
class ReplayReport:
    replay_session_id: str
    selection: ReplaySelection
    settings: Mapping[str, object]
    queries: tuple[ReplayedQuery, ...]
    threshold: ReplayThreshold | None
    rbo_persistence: float = DEFAULT_PERSISTENCE

    @property
    def mean_jaccard(self) -> float:
        return sum(q.jaccard for q in self.queries) / len(self.queries) if self.queries else 1.0

    @property
    def mean_rbo(self) -> float:
        return sum(q.rbo for q in self.queries) / len(self.queries) if self.queries else 1.0

    @property
    def lost_all(self) -> tuple[ReplayedQuery, ...]:
        return tuple(q for q in self.queries if q.lost_all)

    @property
    def gained(self) -> tuple[ReplayedQuery, ...]:
        return tuple(q for q in self.queries if q.gained)

    @property
    def unchanged(self) -> int:
        return sum(1 for q in self.queries if q.unchanged)

    def mean_overlap(self, measure: OverlapMeasure) -> float:
        return self.mean_jaccard if measure is OverlapMeasure.JACCARD else self.mean_rbo

    @property
    def failures(self) -> tuple[str, ...]:
        """Why the threshold check failed (empty when it passed or there is none)."""
        threshold = self.threshold
        if threshold is None:
            return ()
        reasons: list[str] = []
        mean = self.mean_overlap(threshold.measure)
        if mean < threshold.min_overlap:
            reasons.append(
                f"mean {threshold.measure.value} overlap {mean:.4f} is below "
                f"{threshold.min_overlap:.4f}"
            )
        lost = len(self.lost_all)
        if threshold.max_lost is not None and lost > threshold.max_lost:
            reasons.append(
                f"{lost} queries lost all their evidence (at most {threshold.max_lost} allowed)"
            )
        return tuple(reasons)

    @property
    def passed(self) -> bool:
        return not self.failures

    def as_dict(self, *, per_query: bool = True) -> dict[str, object]:
        threshold = self.threshold
        data: dict[str, object] = {
            "replaySessionId": self.replay_session_id,
            "selection": self.selection.describe(),
            "settings": dict(self.settings),
            "queries": len(self.queries),
            "meanJaccard": round(self.mean_jaccard, 6),
            "meanRbo": round(self.mean_rbo, 6),
            "rboPersistence": self.rbo_persistence,
            "unchanged": self.unchanged,
            "lostAll": len(self.lost_all),
            "gained": len(self.gained),
            "threshold": (
                None
                if threshold is None
                else {
                    "measure": threshold.measure.value,
                    "minOverlap": threshold.min_overlap,
                    "maxLost": threshold.max_lost,
                }
            ),
            "passed": self.passed,
            "failures": list(self.failures),
        }
        if per_query:
            data["perQuery"] = [q.as_dict() for q in self.queries]
        return data


class Replay:
    """Re-run logged queries under another configuration and compare the evidence."""

    def __init__(
        self,
        *,
        lookup: LookupKnowledge,
        audit: AuditQueries,
        recorder: ToolInvocationRecorder,
        clock: Clock,
        rbo_persistence: float = DEFAULT_PERSISTENCE,
        flush_timeout_s: float = 30.0,
    ) -> None:
        if not 0.0 < rbo_persistence < 1.0:
            raise InvalidInputError("rbo_persistence must be in (0, 1)")
        self._lookup = lookup
        self._audit = audit
        self._recorder = recorder
        self._clock = clock
        self._p = rbo_persistence
        self._flush_timeout_s = flush_timeout_s

    def execute(
        self,
        selection: ReplaySelection,
        config: LookupConfig,
        *,
        threshold: ReplayThreshold | None = None,
        progress: EvalProgressCallback | None = None,
        session_id: str | None = None,
    ) -> ReplayReport:
        notify = progress or (lambda _event: None)
        originals = self._originals(selection)
        if not originals:
            raise NotFoundError(f"no logged lookups to replay for {selection.describe()}")
        session = session_id or f"replay-{new_run_id(self._clock.now())}"
        use_case = self._lookup.with_config(config)
        total = len(originals)
        notify(EvalProgress("replay", "", 0, total))
        for done, original in enumerate(originals, 1):
            result = use_case.execute(
                original.summary.query, session_id=session, step_id=original.summary.id
            )
            _check_recorded(result.record_outcome)
            notify(EvalProgress("replay", "", done, total))

        replayed = {
            inv.summary.step_id: inv
            for inv in read_session(
                self._audit, self._recorder, session, flush_timeout_s=self._flush_timeout_s
            )
        }
        queries: list[ReplayedQuery] = []
        for original in originals:
            after = replayed.get(original.summary.id)
            if after is None:
                raise AuditError(
                    f"the replay of invocation {original.summary.id} is not in the audit store"
                )
            before_ids, after_ids = original.document_ids, after.document_ids
            queries.append(
                ReplayedQuery(
                    original_invocation_id=original.summary.id,
                    original_session_id=original.summary.session_id,
                    step_id=original.summary.step_id,
                    query=original.summary.query,
                    replay_invocation_id=after.summary.id,
                    status_before=original.summary.status,
                    status_after=after.summary.status,
                    before=before_ids,
                    after=after_ids,
                    jaccard=jaccard(before_ids, after_ids),
                    rbo=rank_biased_overlap(before_ids, after_ids, self._p),
                )
            )
        return ReplayReport(
            replay_session_id=session,
            selection=selection,
            settings=MappingProxyType(describe_config(config)),
            queries=tuple(queries),
            threshold=threshold,
            rbo_persistence=self._p,
        )

    def _originals(self, selection: ReplaySelection) -> list[RecordedInvocation]:
        if selection.session_id is not None:
            chosen = read_session(
                self._audit,
                self._recorder,
                selection.session_id,
                flush_timeout_s=self._flush_timeout_s,
            )
        else:
            assert selection.time_range is not None
            self._recorder.flush(None, self._flush_timeout_s)
            summaries = _list_invocations(
                self._audit, InvocationFilter(time_range=selection.time_range)
            )
            wanted = {s.id for s in summaries}
            evidence: dict[str, list[EvidenceView]] = {}
            for session in dict.fromkeys(s.session_id for s in summaries):
                for shown in self._audit.session_evidence(session):
                    if shown.invocation_id in wanted:
                        evidence.setdefault(shown.invocation_id, []).append(shown.evidence)
            chosen = [
                RecordedInvocation(s, tuple(sorted(evidence.get(s.id, ()), key=lambda e: e.rank)))
                for s in summaries
            ]
        chosen = [inv for inv in chosen if inv.summary.tool_name == TOOL_NAME]
        if selection.limit is not None:
            chosen = chosen[: selection.limit]
        return chosen
