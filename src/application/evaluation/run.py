"""``RunEval``: retrieval quality on a test collection, read back from the audit store."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime
from types import MappingProxyType

from lookup_knowledge.application.evaluation.recorded import (
    RecordedInvocation,
    check_recorded,
    read_session,
    run_scores,
)
from lookup_knowledge.application.evaluation.values import (
    MEASURES,
    NAME_PATTERN,
    UNANSWERABLE_STEP,
    ConfigurationResult,
    EvalConfiguration,
    EvalDataset,
    EvalProgress,
    EvalProgressCallback,
    EvalReport,
    QueryResult,
    calibration_table,
    describe_config,
    mean_or_none,
)
from lookup_knowledge.application.ingest import IngestDocuments, IngestProgress, IngestReport
from lookup_knowledge.application.lookup import LookupKnowledge, LookupOptions
from lookup_knowledge.application.ports import (
    AuditQueries,
    Clock,
    RankingMetrics,
    ToolInvocationRecorder,
    nearest_rank,
)
from lookup_knowledge.domain.errors import (
    AuditError,
    InvalidInputError,
)
from lookup_knowledge.domain.identity import split_chunk_key
from lookup_knowledge.domain.model import InvocationStatus, Traffic

#: The measures an eval reports, in ir-measures notation (RR@10 is MRR@10 once averaged).


NO_EVIDENCE = InvocationStatus.NO_EVIDENCE.value

# Kept apart from production traffic: `audit stats` and `audit list` leave it out.
_EVAL = LookupOptions(traffic=Traffic.EVAL)


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
        Lite searches rows still in growing segments far slower until a flush; figures
        in benchmarks/README.md)."""
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
        if not NAME_PATTERN.match(run):
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
        total = len(dataset.queries) + len(dataset.unanswerable)
        first_error: str | None = None
        # (relevance, judged relevant) of every returned block: the calibration table.
        judged_blocks: list[tuple[float, bool]] = []
        unanswerable: list[tuple[str, str]] = []
        notify(EvalProgress("lookup", configuration.name, 0, total))
        asked = [(q, q.query_id, True) for q in dataset.queries] + [
            (q, f"{UNANSWERABLE_STEP}{q.query_id}", False) for q in dataset.unanswerable
        ]
        for done, (query, step, answerable) in enumerate(asked, 1):
            result = use_case.execute(query.text, session_id=session, step_id=step, options=_EVAL)
            check_recorded(result.record_outcome)
            if result.error_code is not None and first_error is None:
                first_error = f"query {query.query_id}: {result.message}"
            relevant = dataset.qrels.get(query.query_id, {}) if answerable else {}
            for block in result.evidence_blocks:
                doc = split_chunk_key(block.document_id)
                doc_id = doc[0] if doc is not None else block.document_id
                judged_blocks.append((block.relevance, relevant.get(doc_id, 0) > 0))
            if not answerable:
                unanswerable.append((query.query_id, result.status.value))
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
        summary = _summarise(configuration, session, per_query, self._measures, first_error)
        abstained = sum(1 for _q, status in unanswerable if status == NO_EVIDENCE)
        return replace(
            summary,
            abstention_rate=abstained / len(unanswerable) if unanswerable else None,
            unanswerable_queries=len(unanswerable),
            calibration=calibration_table(judged_blocks),
            unanswerable=tuple(unanswerable),
        )

    def _recorded_by_query(
        self, session: str, dataset: EvalDataset
    ) -> dict[str, RecordedInvocation]:
        invocations = read_session(
            self._audit, self._recorder, session, flush_timeout_s=self._flush_timeout_s
        )
        by_query: dict[str, RecordedInvocation] = {}
        for inv in invocations:
            step = inv.summary.step_id
            if step is None or step.startswith(UNANSWERABLE_STEP):
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
        distinct_documents=mean_or_none([float(len(q.documents)) for q in with_evidence]),
        blocks=mean_or_none([float(q.blocks) for q in with_evidence]),
        no_evidence_rate=statuses.count(InvocationStatus.NO_EVIDENCE.value) / n,
        found_rate=statuses.count(InvocationStatus.OK.value) / n,
        error_rate=statuses.count(InvocationStatus.ERROR.value) / n,
        latency_p50_ms=nearest_rank(durations, 50),
        latency_p95_ms=nearest_rank(durations, 95),
        first_error=first_error,
        per_query=tuple(per_query),
    )
