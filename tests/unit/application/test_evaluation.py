"""RunEval and Replay over fakes: an in-memory knowledge base (BM25), the in-memory audit
store, a fake chunker and a metrics fake that records what it was asked to score."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import timedelta

import pytest

from lookup_knowledge.adapters.memory import InMemoryKnowledgeBase
from lookup_knowledge.application.evaluation import (
    MEASURES,
    EvalConfiguration,
    EvalDataset,
    EvalProgress,
    EvalQuery,
    OverlapMeasure,
    Replay,
    ReplaySelection,
    ReplayThreshold,
    RunEval,
    calibration_table,
    describe_config,
    document_ranking,
)
from lookup_knowledge.application.ingest import IngestDocuments, StaticDocumentSource
from lookup_knowledge.application.lookup import LookupConfig
from lookup_knowledge.application.ports import (
    Chunk,
    Chunker,
    InvocationFilter,
    Qrels,
    RankingMetrics,
    RecordOutcome,
    Run,
    SourceDocument,
    TimeRange,
    ToolInvocation,
    ToolInvocationRecorder,
)
from lookup_knowledge.domain.errors import (
    AuditError,
    ConfigurationError,
    InvalidInputError,
    NotFoundError,
)
from lookup_knowledge.domain.model import SearchMode
from lookup_knowledge.domain.settings import RetrievalSettings
from tests.fakes import InMemoryRecorder, in_memory_audit, make_lookup

# --------------------------------------------------------------------------- fixtures


class ParagraphChunker(Chunker):
    """One chunk per blank-line separated paragraph."""

    @property
    def fingerprint(self) -> str:
        return "paragraphs"

    def chunk(self, document: SourceDocument) -> list[Chunk]:
        parts = [p.strip() for p in document.text.split("\n\n") if p.strip()]
        return [
            Chunk(document.doc_id, i, text, title=document.title) for i, text in enumerate(parts)
        ]


class RecordingMetrics(RankingMetrics):
    """Scores 'hit@1' for every measure and remembers its inputs."""

    def __init__(self) -> None:
        self.calls: list[tuple[dict[str, dict[str, int]], dict[str, dict[str, float]]]] = []

    def evaluate(
        self, qrels: Qrels, run: Run, measures: Sequence[str]
    ) -> dict[str, dict[str, float]]:
        self.calls.append(
            ({q: dict(d) for q, d in qrels.items()}, {q: dict(d) for q, d in run.items()})
        )
        out: dict[str, dict[str, float]] = {}
        for qid, judged in qrels.items():
            docs = run.get(qid, {})
            best = max(docs, key=lambda d: docs[d]) if docs else None
            hit = 1.0 if best is not None and judged.get(best, 0) > 0 else 0.0
            out[qid] = dict.fromkeys(measures, hit)
        return out


CORPUS = [
    # "alpha" is long: three paragraphs, three chunks, all about apples.
    SourceDocument(
        "alpha",
        "apple orchard harvest\n\napple cider pressing\n\napple pie baking",
        title="Apples",
        format="text",
    ),
    SourceDocument("beta", "banana plantation ripening", title="Bananas", format="text"),
    SourceDocument(
        "gamma", "cherry blossom festival\n\napple and cherry jam", title="Cherries", format="text"
    ),
    SourceDocument("delta", "quartz crystal mineral", title="Minerals", format="text"),
]
QUERIES = (
    EvalQuery("q-apple", "apple"),
    EvalQuery("q-banana", "banana ripening"),
    EvalQuery("q-cherry", "cherry"),
    EvalQuery("q-nothing", "zeppelin"),  # matches no word: no evidence
)
QRELS = {
    "q-apple": {"alpha": 1, "gamma": 0},
    "q-banana": {"beta": 1},
    "q-cherry": {"gamma": 2},
    "q-nothing": {"delta": 1},
}


def sparse_config(cap: int | None = 2, return_n: int = 10) -> LookupConfig:
    return LookupConfig(
        retrieval=RetrievalSettings(
            retrieve_k=20, return_n=return_n, max_chunks_per_document=cap, min_relevance=0.0
        ),
        mode=SearchMode.SPARSE,
    )


class Harness:
    def __init__(self, recorder: ToolInvocationRecorder | None = None) -> None:
        self.kb = InMemoryKnowledgeBase()
        self.recorder, self.audit = in_memory_audit()
        built = make_lookup(
            self.kb, recorder=recorder or self.recorder, embedder=None, config=sparse_config()
        )
        self.clock = built.clock
        self.lookup = built.lookup
        self.metrics = RecordingMetrics()
        self.ingest = IngestDocuments(store=self.kb, chunker=ParagraphChunker(), clock=self.clock)

    def run_eval(self) -> RunEval:
        return RunEval(
            ingest=self.ingest,
            lookup=self.lookup,
            audit=self.audit,
            recorder=self.recorder,
            metrics=self.metrics,
            clock=self.clock,
        )

    def replay(self) -> Replay:
        return Replay(
            lookup=self.lookup, audit=self.audit, recorder=self.recorder, clock=self.clock
        )


def dataset(queries: tuple[EvalQuery, ...] = QUERIES) -> EvalDataset:
    return EvalDataset("fruit", StaticDocumentSource(CORPUS), queries, QRELS)


@pytest.fixture
def harness() -> Harness:
    return Harness()


# --------------------------------------------------------------------------- RunEval


def test_ingests_each_corpus_entry_as_a_document_with_its_chunks(harness: Harness) -> None:
    report = harness.run_eval().execute(dataset(), [EvalConfiguration("sparse", sparse_config())])
    assert report.ingest is not None
    assert report.ingest.documents_seen == 4
    assert report.ingest.chunks_written == 7
    assert {r.evidence_key for r in harness.kb.records()} >= {
        "alpha#chunk-0",
        "alpha#chunk-2",
        "gamma#chunk-1",
    }


def test_every_query_runs_in_one_session_per_configuration_with_the_query_id_as_step(
    harness: Harness,
) -> None:
    configs = [
        EvalConfiguration("cap-1", sparse_config(cap=1)),
        EvalConfiguration("cap-off", sparse_config(cap=None)),
    ]
    report = harness.run_eval().execute(dataset(), configs, run_id="r1")
    sessions = [c.session_id for c in report.configurations]
    assert sessions == ["eval-r1-cap-1", "eval-r1-cap-off"]
    for session in sessions:
        page = harness.audit.list_invocations(InvocationFilter(session_id=session))
        assert [i.step_id for i in page.items] == [q.query_id for q in QUERIES]


def test_the_run_is_document_level_best_chunk_rank_first_from_the_audit_rows(
    harness: Harness,
) -> None:
    report = harness.run_eval().execute(
        dataset(), [EvalConfiguration("cap-off", sparse_config(cap=None))]
    )
    result = report.configuration("cap-off")
    apple = next(q for q in result.per_query if q.query_id == "q-apple")
    # Four chunks mention apples (three of alpha, one of gamma): four blocks, two documents.
    assert apple.blocks == 4
    assert set(apple.documents) == {"alpha", "gamma"}
    detail = harness.audit.get_invocation(apple.invocation_id)
    assert apple.documents == document_ranking(detail.evidence)
    _, run = harness.metrics.calls[0]
    assert run["q-apple"] == {apple.documents[0]: 1.0, apple.documents[1]: 0.5}
    assert "q-nothing" not in run  # no evidence: nothing to score, the metrics count 0


def test_the_per_document_cap_changes_what_is_scored(harness: Harness) -> None:
    configs = [
        EvalConfiguration("cap-1", sparse_config(cap=1)),
        EvalConfiguration("cap-off", sparse_config(cap=None)),
    ]
    report = harness.run_eval().execute(dataset(), configs)
    capped = next(q for q in report.configuration("cap-1").per_query if q.query_id == "q-apple")
    free = next(q for q in report.configuration("cap-off").per_query if q.query_id == "q-apple")
    assert capped.blocks == 2
    assert free.blocks == 4
    assert report.configuration("cap-1").blocks is not None
    assert report.configuration("cap-1").blocks < report.configuration("cap-off").blocks  # type: ignore[operator]


def test_summary_figures(harness: Harness) -> None:
    report = harness.run_eval().execute(dataset(), [EvalConfiguration("s", sparse_config())])
    result = report.configuration("s")
    assert result.queries == 4
    assert result.no_evidence_rate == pytest.approx(0.25)
    assert result.error_rate == 0.0
    # q-apple, q-banana and q-cherry score a hit at rank 1; q-nothing scores 0.
    assert result.metrics == dict.fromkeys(MEASURES, 0.75)
    per_query = {q.query_id: q for q in result.per_query}
    assert per_query["q-nothing"].documents == ()
    assert per_query["q-nothing"].status == "no_evidence"
    # distinct documents are averaged over the results that had evidence
    with_evidence = [q for q in result.per_query if q.blocks]
    assert result.distinct_documents == pytest.approx(
        sum(len(q.documents) for q in with_evidence) / 3
    )
    durations = sorted(q.duration_ms for q in result.per_query)
    assert result.latency_p50_ms == durations[1]
    assert result.latency_p95_ms == durations[3]
    assert result.settings == describe_config(sparse_config())
    qrels, _ = harness.metrics.calls[0]
    assert qrels == {q: dict(d) for q, d in QRELS.items()}


def test_scores_come_from_the_audit_store_not_from_memory(harness: Harness) -> None:
    """Rewrite the stored evidence of one invocation: the eval must score the stored rows."""
    run_eval = harness.run_eval()
    report = run_eval.execute(dataset(), [EvalConfiguration("s", sparse_config())], run_id="a")
    banana = next(q for q in report.configuration("s").per_query if q.query_id == "q-banana")
    assert banana.metrics["nDCG@10"] == 1.0
    stored = harness.recorder.store.by_id[banana.invocation_id]
    wrong = replace(stored.invocation.evidence[0], doc_id="delta", document_id="delta#chunk-0")
    harness.recorder.store.by_id[banana.invocation_id] = replace(
        stored, invocation=replace(stored.invocation, evidence=(wrong,))
    )
    rescored = run_eval._recorded_by_query("eval-a-s", dataset())
    assert rescored["q-banana"].documents == ("delta",)


def test_progress_reports_each_phase(harness: Harness) -> None:
    events: list[EvalProgress] = []
    harness.run_eval().execute(
        dataset(), [EvalConfiguration("s", sparse_config())], progress=events.append
    )
    phases = [e.phase for e in events]
    assert phases[0] == "ingest"
    assert ("lookup", "s", 4, 4) in [(e.phase, e.configuration, e.done, e.total) for e in events]
    assert phases[-1] == "done"


def test_skipping_ingest_uses_the_loaded_collection(harness: Harness) -> None:
    run_eval = harness.run_eval()
    run_eval.execute(dataset(), [EvalConfiguration("s", sparse_config())])
    again = run_eval.execute(dataset(), [EvalConfiguration("s", sparse_config())], ingest=False)
    assert again.ingest is None
    assert again.configuration("s").metrics["nDCG@10"] == pytest.approx(0.75)


def test_recording_switched_off_is_a_configuration_error() -> None:
    class Disabled(InMemoryRecorder):
        def record(self, invocation: ToolInvocation) -> RecordOutcome:
            return RecordOutcome.DISABLED

    harness = Harness(recorder=Disabled())
    with pytest.raises(ConfigurationError, match="audit"):
        harness.run_eval().execute(dataset(), [EvalConfiguration("s", sparse_config())])


def test_records_stuck_in_the_journal_fail_the_eval(harness: Harness) -> None:
    harness.recorder.available = False
    with pytest.raises(AuditError, match="journal"):
        harness.run_eval().execute(dataset(), [EvalConfiguration("s", sparse_config())])


def test_a_lost_record_fails_the_eval() -> None:
    class Forgetful(InMemoryRecorder):
        def record(self, invocation: ToolInvocation) -> RecordOutcome:
            if invocation.step_id == "q-cherry":
                return RecordOutcome.COMMITTED  # claims success, writes nothing
            return super().record(invocation)

    harness = Harness()
    forgetful = Forgetful(harness.recorder.store)
    harness.lookup = make_lookup(
        harness.kb, recorder=forgetful, clock=harness.clock, embedder=None, config=sparse_config()
    ).lookup
    with pytest.raises(AuditError, match="3 of 4"):
        harness.run_eval().execute(dataset(), [EvalConfiguration("s", sparse_config())])


def test_bad_inputs_are_rejected(harness: Harness) -> None:
    run_eval = harness.run_eval()
    with pytest.raises(InvalidInputError, match="at least one configuration"):
        run_eval.execute(dataset(), [])
    with pytest.raises(InvalidInputError, match="unique"):
        run_eval.execute(
            dataset(),
            [EvalConfiguration("s", sparse_config()), EvalConfiguration("s", sparse_config())],
        )
    with pytest.raises(InvalidInputError, match="configuration name"):
        EvalConfiguration("has space", sparse_config())
    with pytest.raises(InvalidInputError, match="no relevant document"):
        EvalDataset("x", StaticDocumentSource([]), (EvalQuery("unjudged", "text"),), QRELS)
    with pytest.raises(InvalidInputError, match="twice"):
        EvalDataset("x", StaticDocumentSource([]), (QUERIES[0], QUERIES[0]), QRELS)


def test_report_serialises(harness: Harness) -> None:
    report = harness.run_eval().execute(dataset(), [EvalConfiguration("s", sparse_config())])
    data = report.as_dict()
    config = data["configurations"][0]  # type: ignore[index]
    assert config["sessionId"] == report.configurations[0].session_id
    assert len(config["perQuery"]) == 4
    assert "perQuery" not in report.as_dict(per_query=False)["configurations"][0]  # type: ignore[index]
    with pytest.raises(NotFoundError):
        report.configuration("nope")


# --------------------------------------------------------------------------- Replay


def _logged_session(harness: Harness, config: LookupConfig, session: str = "chat-1") -> None:
    harness.ingest.execute(StaticDocumentSource(CORPUS))
    use_case = harness.lookup.with_config(config)
    for i, q in enumerate(QUERIES):
        use_case.execute(q.text, session_id=session, step_id=f"step-{i}")


def test_replay_under_the_same_config_changes_nothing(harness: Harness) -> None:
    _logged_session(harness, sparse_config())
    report = harness.replay().execute(
        ReplaySelection(session_id="chat-1"),
        sparse_config(),
        threshold=ReplayThreshold(1.0, OverlapMeasure.RBO, max_lost=0),
    )
    assert len(report.queries) == 4
    assert report.unchanged == 4
    assert report.mean_jaccard == 1.0
    assert report.mean_rbo == pytest.approx(1.0)
    assert report.passed
    assert report.replay_session_id.startswith("replay-")
    page = harness.audit.list_invocations(InvocationFilter(session_id=report.replay_session_id))
    originals = harness.audit.list_invocations(InvocationFilter(session_id="chat-1"))
    assert [i.step_id for i in page.items] == [i.id for i in originals.items]


def test_replay_under_a_changed_config_reports_the_differences(harness: Harness) -> None:
    _logged_session(harness, sparse_config(cap=None))
    report = harness.replay().execute(
        ReplaySelection(session_id="chat-1"), sparse_config(cap=1), threshold=ReplayThreshold(0.9)
    )
    apple = next(q for q in report.queries if q.query == "apple")
    assert len(apple.before) == 4
    assert len(apple.after) == 2
    assert apple.jaccard == pytest.approx(0.5)
    assert 0.0 < apple.rbo < 1.0
    assert set(apple.after) <= set(apple.before)
    assert apple.as_dict()["removed"] == [d for d in apple.before if d not in apple.after]
    assert report.mean_jaccard < 0.9
    assert not report.passed
    assert "below 0.9000" in report.failures[0]
    lenient = replace(report, threshold=ReplayThreshold(0.5))
    assert lenient.passed


def test_replay_counts_queries_that_lost_all_evidence(harness: Harness) -> None:
    _logged_session(harness, sparse_config())
    # The documents are gone by the replay (min-relevance 1.0 no longer empties a result:
    # a chunk holding every query term reaches relevance 1 on the calibrated scale).
    harness.kb.delete_documents([d.doc_id for d in CORPUS])
    report = harness.replay().execute(
        ReplaySelection(session_id="chat-1"),
        sparse_config(),
        threshold=ReplayThreshold(0.0, max_lost=2),
    )
    assert len(report.lost_all) == 3  # q-nothing had no evidence to lose
    assert report.mean_jaccard == pytest.approx(0.25)  # only the empty/empty pair agrees
    assert report.failures == ("3 queries lost all their evidence (at most 2 allowed)",)


def test_replay_by_time_range_spans_sessions(harness: Harness) -> None:
    _logged_session(harness, sparse_config(), "chat-1")
    _logged_session(harness, sparse_config(), "chat-2")
    items = harness.audit.list_invocations(InvocationFilter(limit=100)).items
    # from the second invocation of chat-1 to the first of chat-2, inclusive
    start = items[1].started_at
    end = items[4].started_at + timedelta(microseconds=1)
    report = harness.replay().execute(
        ReplaySelection(time_range=TimeRange(start, end)), sparse_config()
    )
    assert [q.original_invocation_id for q in report.queries] == [i.id for i in items[1:5]]
    assert {q.original_session_id for q in report.queries} == {"chat-1", "chat-2"}
    assert report.unchanged == 4
    limited = harness.replay().execute(
        ReplaySelection(time_range=TimeRange(start, end), limit=2), sparse_config()
    )
    assert len(limited.queries) == 2


def test_replay_of_nothing_is_not_found(harness: Harness) -> None:
    with pytest.raises(NotFoundError):
        harness.replay().execute(ReplaySelection(session_id="never"), sparse_config())


def test_replay_selection_and_threshold_rules() -> None:
    with pytest.raises(InvalidInputError):
        ReplaySelection()
    with pytest.raises(InvalidInputError):
        ReplaySelection(session_id="s", time_range=TimeRange())
    with pytest.raises(InvalidInputError, match="start or an end"):
        ReplaySelection(time_range=TimeRange())
    with pytest.raises(InvalidInputError):
        ReplayThreshold(1.5)
    with pytest.raises(InvalidInputError):
        ReplayThreshold(0.5, max_lost=-1)


def test_replay_report_serialises(harness: Harness) -> None:
    _logged_session(harness, sparse_config(cap=None))
    report = harness.replay().execute(
        ReplaySelection(session_id="chat-1"), sparse_config(cap=1), threshold=ReplayThreshold(0.99)
    )
    data = report.as_dict()
    assert data["passed"] is False
    assert data["queries"] == 4
    assert data["threshold"] == {"measure": "jaccard", "minOverlap": 0.99, "maxLost": None}
    assert len(data["perQuery"]) == 4  # type: ignore[arg-type]


def test_the_after_ingest_hook_runs_before_the_first_lookup(harness: Harness) -> None:
    seen: list[int] = []
    run_eval = RunEval(
        ingest=harness.ingest,
        lookup=harness.lookup,
        audit=harness.audit,
        recorder=harness.recorder,
        metrics=harness.metrics,
        clock=harness.clock,
        after_ingest=lambda: seen.append(len(harness.recorder.store.all())),
    )
    run_eval.execute(dataset(), [EvalConfiguration("s", sparse_config())])
    assert seen == [0]
    run_eval.execute(dataset(), [EvalConfiguration("s", sparse_config())], ingest=False)
    assert seen == [0]


def test_unanswerable_queries_give_the_abstention_rate_and_stay_out_of_the_metrics(
    harness: Harness,
) -> None:
    honest = LookupConfig(retrieval=RetrievalSettings(retrieve_k=20), mode=SearchMode.SPARSE)
    unanswerable = (
        EvalQuery("off-1", "zeppelin airship"),  # no word of the corpus
        EvalQuery("off-2", "q-apple"),  # an answerable query's id, a question of its own
        EvalQuery("off-3", "apple"),  # the corpus does answer this one
    )
    data = replace(dataset(), unanswerable=unanswerable)
    report = harness.run_eval().execute(data, [EvalConfiguration("sparse", honest)], run_id="u1")
    result = report.configuration("sparse")
    assert result.unanswerable_queries == 3
    assert result.abstention_rate == pytest.approx(2 / 3)
    assert result.found_rate == pytest.approx(3 / 4)  # q-nothing finds nothing
    assert [q.query_id for q in result.per_query] == [q.query_id for q in QUERIES]
    assert dict(result.unanswerable)["off-3"] == "ok"
    # every returned block is in one relevance bin; unanswerable ones are never relevant
    bins = result.calibration
    assert sum(b.blocks for b in bins) > 0
    assert sum(b.relevant for b in bins) <= sum(b.blocks for b in bins)
    data_dict = result.as_dict()
    assert data_dict["abstentionRate"] == pytest.approx(2 / 3, abs=1e-6)
    assert len(data_dict["calibration"]) == 10  # type: ignore[arg-type]
    steps = [
        i.step_id
        for i in harness.audit.list_invocations(InvocationFilter(session_id="eval-u1-sparse")).items
    ]
    assert steps[-3:] == ["unanswerable:off-1", "unanswerable:off-2", "unanswerable:off-3"]


def test_the_calibration_table_bins_blocks_by_relevance() -> None:
    bins = calibration_table([(0.05, False), (0.95, True), (1.0, True), (0.55, False)])
    assert [b.blocks for b in bins] == [1, 0, 0, 0, 0, 1, 0, 0, 0, 2]
    assert bins[-1].relevant_share == 1.0
    assert bins[1].relevant_share is None
