"""One contract for the audit store, run against the in-memory fake, SQLite and PostgreSQL.

Whatever a Verifier or Eval harness can observe through ``ToolInvocationRecorder`` and
``AuditQueries`` must be the same on every backend.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import Engine
from sqlalchemy.engine import URL

from lookup_knowledge.adapters.audit import create_audit_engine
from lookup_knowledge.application.ports import (
    InvocationFilter,
    RecordOutcome,
    SessionFilter,
    SessionOwner,
    TimeRange,
)
from lookup_knowledge.application.verify_citations import VerifyCitations, citations_in_store
from lookup_knowledge.domain.errors import AuditError, InvalidInputError, NotFoundError
from tests.fakes.audit import InMemoryRecorder
from tests.support.audit_backends import (
    BACKENDS,
    AuditBackend,
    clear,
    memory_backend,
    migrated_sqlite_engine,
    sql_backend,
)
from tests.support.audit_data import BASE_TIME, evidence, invocation, session


@pytest.fixture(scope="module")
def postgres_engine(postgres_audit_url: URL) -> Iterator[Engine]:
    engine = create_audit_engine(postgres_audit_url)
    yield engine
    engine.dispose()


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[AuditBackend]:
    name = request.param
    if name == "memory":
        b = memory_backend()
    elif name == "sqlite":
        b = sql_backend(name, migrated_sqlite_engine(tmp_path / "db"), tmp_path / "spool")
    else:
        engine = request.getfixturevalue("postgres_engine")
        clear(engine)
        b = sql_backend(name, engine, tmp_path / "spool")
    yield b
    b.recorder.close()
    if name == "sqlite" and b.engine is not None:
        b.engine.dispose()


def _t(minutes: float) -> datetime:
    return BASE_TIME + timedelta(minutes=minutes)


# --------------------------------------------------------------------------- recording


def test_record_commits_and_round_trips_every_field(backend: AuditBackend) -> None:
    sid = session()
    inv = invocation(sid, documents=["guide#chunk-0", "guide#chunk-3", "vector:77"])
    inv = replace(
        inv,
        query="退款 policy ✓ — \"quoted\" 'and' %s {x}",
        error_code=None,
        fallback_reason="filtered_pass_empty",
    )

    assert backend.recorder.record(inv) is RecordOutcome.COMMITTED

    detail = backend.queries.get_invocation(inv.id)
    s = detail.summary
    assert (s.id, s.session_id, s.seq, s.step_id, s.tool_call_id) == (
        inv.id,
        sid,
        1,
        inv.step_id,
        inv.tool_call_id,
    )
    assert (s.query, s.status, s.tool_name, s.relevance_level, s.retrieval_mode) == (
        inv.query,
        "ok",
        "lookup_knowledge",
        "high",
        "dense",
    )
    assert s.started_at == inv.started_at
    assert s.started_at.utcoffset() == timedelta(0)
    assert s.duration_ms == pytest.approx(inv.duration_ms)
    assert s.quality_score == pytest.approx(inv.quality_score)
    assert (s.filter_applied, s.fallback_reason) == ("billing", "filtered_pass_empty")
    assert (s.candidate_count, s.returned_count) == (9, 3)
    assert (detail.retrieve_k, detail.return_n, detail.trace_id, detail.span_id) == (
        20,
        5,
        inv.trace_id,
        inv.span_id,
    )
    assert detail.retrieval_details == dict(inv.retrieval_details)
    assert [e.document_id for e in detail.evidence] == [
        "guide#chunk-0",
        "guide#chunk-3",
        "vector:77",
    ]
    first = detail.evidence[0]
    expected = inv.evidence[0]
    assert (first.rank, first.doc_id, first.chunk_index, first.source, first.category) == (
        1,
        "guide",
        0,
        "guide.md",
        "billing",
    )
    assert first.score_before == pytest.approx(expected.score_before)
    assert first.score_after == pytest.approx(expected.score_after)
    assert (first.projected, first.in_context_pack, first.content_hash) == (
        True,
        True,
        expected.content_hash,
    )
    assert detail.evidence[2].doc_id is None
    assert detail.evidence[2].chunk_index is None
    assert detail.evidence[2].in_context_pack is False


def test_times_are_stored_as_the_same_instant_in_utc(backend: AuditBackend) -> None:
    sid = session()
    local = datetime(2030, 5, 17, 11, 0, tzinfo=timezone(timedelta(hours=2)))
    inv = invocation(sid, documents=["a#chunk-0"], at=local)
    backend.recorder.record(inv)

    got = backend.queries.get_invocation(inv.id).summary.started_at
    assert got == datetime(2030, 5, 17, 9, 0, tzinfo=UTC)
    assert got.utcoffset() == timedelta(0)


def test_retrieval_details_get_a_version_when_missing(backend: AuditBackend) -> None:
    inv = replace(invocation(session()), retrieval_details={"evidence": []})
    backend.recorder.record(inv)
    assert backend.queries.get_invocation(inv.id).retrieval_details == {
        "evidence": [],
        "version": 1,
    }


def test_text_a_database_refuses_is_stored_cleaned(backend: AuditBackend) -> None:
    """NUL and lone surrogates become U+FFFD, a surrogate pair its character, non-finite
    numbers in the details null: the fake stores what the SQL store stores. Evidence
    fields are kept exactly as the agent saw them, so a record whose evidence holds such
    text is refused where it is made (issue 10, item 3)."""
    sid = session()
    with pytest.raises(AuditError, match="source"):
        replace(invocation(sid), evidence=(replace(evidence(1, "d#chunk-0"), source="a\x00"),))
    with pytest.raises(AuditError, match="category"):
        replace(invocation(sid), evidence=(replace(evidence(1, "d#chunk-0"), category="\udfff"),))
    shown = replace(evidence(1, "doc#chunk-0"), source="a😀.md", category="c")
    dirty = replace(
        invocation(sid),
        query="q\x00\ud800 keeps\ttabs",
        tool_call_id="call-\ud83d\ude00",
        retrieval_details={"k\ud800": ["v\x00", float("nan")], "inf": float("inf")},
        evidence=(shown,),
    )
    assert backend.recorder.record(dirty) is RecordOutcome.COMMITTED
    detail = backend.queries.get_invocation(dirty.id)
    assert detail.summary.query == "q\ufffd\ufffd keeps\ttabs"
    assert detail.summary.tool_call_id == "call-😀"
    assert detail.retrieval_details == {"k\ufffd": ["v\ufffd", None], "inf": None, "version": 1}
    assert (detail.evidence[0].source, detail.evidence[0].category) == ("a😀.md", "c")


def test_a_record_after_close_is_kept_in_the_journal(backend: AuditBackend) -> None:
    """A lookup still in flight when the recorder closes: its record is spooled, not lost
    and not written to the database."""
    sid = session()
    backend.recorder.close()
    assert backend.recorder.record(invocation(sid)) is RecordOutcome.JOURNALED_OFFLINE
    assert backend.queries.list_invocations(InvocationFilter(session_id=sid)).items == ()


def test_a_retried_record_is_a_no_op(backend: AuditBackend) -> None:
    sid = session()
    first = invocation(sid, documents=["a#chunk-0"])
    assert backend.recorder.record(first) is RecordOutcome.COMMITTED
    assert backend.recorder.record(first) is RecordOutcome.COMMITTED
    assert backend.recorder.record(replace(first, id=first.id.upper())) is RecordOutcome.COMMITTED
    second = invocation(sid)
    backend.recorder.record(second)

    page = backend.queries.list_invocations(InvocationFilter(session_id=sid))
    assert [(i.id, i.seq) for i in page.items] == [(first.id, 1), (second.id, 2)]
    assert len(backend.queries.session_evidence(sid)) == 1


def test_seq_is_per_session_and_gap_free(backend: AuditBackend) -> None:
    a, b = session("a"), session("b")
    records = [invocation(a if i % 3 else b) for i in range(9)]
    for r in records:
        assert backend.recorder.record(r) is RecordOutcome.COMMITTED

    for sid in (a, b):
        items = backend.queries.list_invocations(InvocationFilter(session_id=sid)).items
        mine = [r.id for r in records if r.session_id == sid]
        assert [i.id for i in items] == mine
        assert [i.seq for i in items] == list(range(1, len(mine) + 1))


def test_healthy_recorder_has_nothing_pending_and_no_failures(backend: AuditBackend) -> None:
    sid = session()
    backend.recorder.record(invocation(sid))
    assert backend.recorder.pending_count() == 0
    assert backend.recorder.pending_count(sid) == 0
    assert backend.recorder.failure_count() == 0
    assert backend.recorder.flush(sid, timeout_s=1.0) is True


@pytest.mark.parametrize(
    "change",
    [
        {"session_id": ""},
        {"session_id": "x" * 256},
        {"id": "not-a-uuid"},
        {"status": "maybe"},
        {"duration_ms": float("nan")},
        {"step_id": "s" * 300},
    ],
    ids=["empty-session", "long-session", "bad-id", "bad-status", "nan-duration", "long-step"],
)
def test_a_malformed_record_is_refused_with_audit_error(
    backend: AuditBackend, change: dict[str, object]
) -> None:
    """Refused where it is made: no recorder ever receives a record a store cannot keep."""
    sid = session()
    good = invocation(sid, documents=["a#chunk-0"])
    with pytest.raises(AuditError):
        replace(good, **change)  # type: ignore[arg-type]
    assert backend.queries.list_invocations(InvocationFilter(session_id=sid)).items == ()


def test_duplicate_evidence_ranks_are_refused(backend: AuditBackend) -> None:
    inv = invocation(session(), documents=["a#chunk-0"])
    with pytest.raises(AuditError):
        replace(inv, evidence=(evidence(1, "a#chunk-0"), evidence(1, "b#chunk-0")))


# --------------------------------------------------------------------------- listing


def test_list_filters_by_session_step_status_and_time(backend: AuditBackend) -> None:
    sid, other = session(), session()
    r1 = invocation(sid, documents=["a#chunk-0"], at=_t(1), step_id="plan")
    r2 = invocation(sid, at=_t(2), step_id="plan")
    r3 = invocation(sid, documents=["b#chunk-0"], at=_t(3), step_id="answer")
    r4 = replace(invocation(sid, at=_t(4), step_id="answer"), status="error", error_code="x")
    r5 = invocation(other, documents=["a#chunk-0"], at=_t(2.5), step_id="plan")
    for r in (r1, r2, r3, r4, r5):
        backend.recorder.record(r)
    q = backend.queries

    def ids(**kw: object) -> list[str]:
        return [i.id for i in q.list_invocations(InvocationFilter(**kw)).items]  # type: ignore[arg-type]

    assert ids(session_id=sid) == [r1.id, r2.id, r3.id, r4.id]
    assert ids(session_id=sid, step_id="plan") == [r1.id, r2.id]
    assert ids(session_id=sid, status="no_evidence") == [r2.id]
    assert ids(step_id="plan", time_range=TimeRange(_t(0), _t(10))) == [r1.id, r2.id, r5.id]
    assert ids(status="error", time_range=TimeRange(_t(0), _t(10))) == [r4.id]
    # [from, to): the lower bound is included, the upper excluded
    assert ids(time_range=TimeRange(_t(2), _t(3))) == [r2.id, r5.id]
    assert ids(time_range=TimeRange(started_from=_t(3))) == [r3.id, r4.id]
    assert ids(session_id=sid, newest_first=True) == [r4.id, r3.id, r2.id, r1.id]
    errors = q.list_invocations(InvocationFilter(session_id=sid, status="error")).items
    assert errors[0].error_code == "x"


def test_list_pages_through_everything_exactly_once(backend: AuditBackend) -> None:
    sid = session()
    records = [invocation(sid, at=_t(i)) for i in range(7)]
    for r in reversed(records):  # insertion order must not matter
        backend.recorder.record(r)
    seen: list[str] = []
    offset: int | None = 0
    pages = 0
    while offset is not None:
        page = backend.queries.list_invocations(
            InvocationFilter(session_id=sid, limit=3, offset=offset)
        )
        seen += [i.id for i in page.items]
        offset = page.next_offset
        pages += 1
    assert seen == [r.id for r in records]
    assert pages == 3
    last = backend.queries.list_invocations(InvocationFilter(session_id=sid, limit=7))
    assert last.next_offset is None
    assert len(last.items) == 7


def test_list_sessions_counts_filters_and_orders_by_last_call(backend: AuditBackend) -> None:
    a, b, c = "Chat-A_1", "chat-b%", "other"
    for r in (
        invocation(a, documents=["x#chunk-0"], at=_t(1)),
        invocation(a, at=_t(5)),
        replace(invocation(a, at=_t(6)), status="error", error_code="x"),
        invocation(b, documents=["x#chunk-0"], at=_t(3)),
        invocation(c, at=_t(8)),
    ):
        backend.recorder.record(r)
    q = backend.queries

    def ids(**kw: object) -> list[str]:
        return [s.session_id for s in q.list_sessions(SessionFilter(**kw)).items]  # type: ignore[arg-type]

    assert ids() == [c, a, b]  # newest last call first
    first = q.list_sessions(SessionFilter(id_contains="chat-a")).items
    assert [s.session_id for s in first] == [a]  # ASCII case ignored
    s = first[0]
    assert (s.invocation_count, s.ok_count, s.no_evidence_count, s.error_count) == (3, 1, 1, 1)
    assert (s.first_started_at, s.last_started_at) == (_t(1), _t(6))
    assert s.last_started_at.tzinfo is not None
    assert ids(id_contains="%") == [b]  # LIKE wildcards are literal
    assert ids(id_contains="_") == [a]
    assert ids(status="error") == [a]
    assert ids(status="ok") == [a, b]
    # the range selects invocations: counts cover only those in it
    ranged = q.list_sessions(SessionFilter(time_range=TimeRange(_t(2), _t(6)))).items
    assert [(x.session_id, x.invocation_count) for x in ranged] == [(a, 1), (b, 1)]
    assert ids(id_contains="nobody") == []


def test_list_sessions_by_query_text_document_shown_and_traffic(backend: AuditBackend) -> None:
    from lookup_knowledge.domain.model import Traffic

    for r in (
        invocation("asks", query="Replication LAG 50%", documents=["x#chunk-0"], at=_t(1)),
        invocation("asks", query="dns", at=_t(2)),
        invocation("shown", query="other", documents=["y#chunk-0", "x#chunk-1"], at=_t(3)),
        replace(invocation("evals", query="replication", at=_t(4)), traffic=Traffic.EVAL.value),
    ):
        backend.recorder.record(r)
    q = backend.queries

    def ids(**kw: object) -> list[str]:
        return [s.session_id for s in q.list_sessions(SessionFilter(**kw)).items]  # type: ignore[arg-type]

    assert ids(query_contains="replication lag") == ["asks"]  # ASCII case ignored
    assert ids(query_contains="50%") == ["asks"]  # LIKE wildcards are literal
    assert ids(query_contains="g 5_%") == []
    # the session is listed whole: its counts cover every invocation, not just the match
    asks = q.list_sessions(SessionFilter(query_contains="lag")).items[0]
    assert asks.invocation_count == 2
    assert ids(document_id="x#chunk-1") == ["shown"]
    assert ids(document_id="x#chunk-0") == ["asks"]
    assert ids(document_id="x#chunk") == []  # an id, not a part of one
    assert ids(query_contains="replication", traffic=Traffic.EVAL) == ["evals"]
    assert ids(query_contains="replication", traffic="all") == ["evals", "asks"]
    with pytest.raises(InvalidInputError):
        SessionFilter(query_contains="x" * 1001)
    with pytest.raises(InvalidInputError):
        SessionFilter(traffic="bogus")  # type: ignore[arg-type]


def test_list_sessions_pages_through_everything_exactly_once(backend: AuditBackend) -> None:
    sessions = [f"s-{i}" for i in range(5)]
    for i, sid in enumerate(sessions):
        backend.recorder.record(invocation(sid, at=_t(10)))  # one tie, broken by id
        backend.recorder.record(invocation(sid, at=_t(i)))
    seen: list[str] = []
    offset: int | None = 0
    while offset is not None:
        page = backend.queries.list_sessions(SessionFilter(limit=2, offset=offset))
        seen += [x.session_id for x in page.items]
        offset = page.next_offset
    assert seen == sessions
    with pytest.raises(InvalidInputError):
        SessionFilter(limit=0)
    with pytest.raises(InvalidInputError):
        SessionFilter(status="maybe")


def test_get_invocation_unknown_and_malformed_ids(backend: AuditBackend) -> None:
    with pytest.raises(NotFoundError):
        backend.queries.get_invocation("0190a1b2-0000-7000-8000-000000000000")
    with pytest.raises(InvalidInputError):
        backend.queries.get_invocation("'; DROP TABLE tool_invocation; --")


def test_filter_and_range_validation() -> None:
    with pytest.raises(InvalidInputError):
        InvocationFilter(limit=0)
    with pytest.raises(InvalidInputError):
        InvocationFilter(limit=1001)
    with pytest.raises(InvalidInputError):
        InvocationFilter(offset=-1)
    with pytest.raises(InvalidInputError):
        InvocationFilter(status="weird")
    with pytest.raises(InvalidInputError):
        InvocationFilter(session_id="")
    with pytest.raises(InvalidInputError):
        TimeRange(datetime(2030, 1, 1))  # naive
    with pytest.raises(InvalidInputError):
        TimeRange(_t(5), _t(1))


# --------------------------------------------------------------------------- sessions


def test_session_evidence_is_ordered_by_seq_then_rank(backend: AuditBackend) -> None:
    sid = session()
    r1 = invocation(sid, documents=["a#chunk-0", "b#chunk-1"], step_id="s1")
    r2 = invocation(sid, documents=["c#chunk-0", "a#chunk-0"], step_id="s2")
    backend.recorder.record(r1)
    backend.recorder.record(invocation(session(), documents=["zzz#chunk-0"]))
    backend.recorder.record(r2)

    shown = backend.queries.session_evidence(sid)
    assert [(s.seq, s.step_id, s.evidence.rank, s.evidence.document_id) for s in shown] == [
        (1, "s1", 1, "a#chunk-0"),
        (1, "s1", 2, "b#chunk-1"),
        (2, "s2", 1, "c#chunk-0"),
        (2, "s2", 2, "a#chunk-0"),
    ]
    assert [s.invocation_id for s in shown] == [r1.id, r1.id, r2.id, r2.id]
    assert shown[0].started_at == r1.started_at
    assert backend.queries.session_evidence(session()) == ()


def test_session_domains_in_first_returned_order(backend: AuditBackend) -> None:
    sid = session()
    backend.recorder.record(invocation(sid, documents=["a#chunk-0"], category="network"))
    backend.recorder.record(invocation(sid, documents=["b#chunk-0"], category=""))
    backend.recorder.record(invocation(sid, documents=["c#chunk-0"], category="billing"))
    backend.recorder.record(invocation(sid, documents=["d#chunk-0"], category="network"))
    assert backend.queries.session_domains(sid) == ("network", "billing")
    assert backend.queries.session_domains(session()) == ()


# --------------------------------------------------------------------------- citations


def test_verify_citations_valid_unknown_and_where_from(backend: AuditBackend) -> None:
    sid, other = session(), session()
    r1 = invocation(sid, documents=["guide#chunk-0", "faq#chunk-2"], step_id="plan")
    r2 = invocation(sid, documents=["faq#chunk-2", "vector:9"], step_id="answer")
    backend.recorder.record(r1)
    backend.recorder.record(r2)
    backend.recorder.record(invocation(other, documents=["secret#chunk-0"]))

    report = citations_in_store(
        backend.queries,
        sid,
        [
            "vector:9",
            "made-up#chunk-1",
            "faq#chunk-2",
            "secret#chunk-0",
            "vector:9",
            "GUIDE#chunk-0",
        ],
    )

    assert report.session_id == sid
    assert [(v.document_id, v.invocation_id, v.step_id, v.seq, v.rank) for v in report.valid] == [
        ("vector:9", r2.id, "answer", 2, 2),
        ("faq#chunk-2", r1.id, "plan", 1, 2),  # its first return wins
    ]
    # another session's evidence and a case variant are not evidence for this session
    assert report.unknown == ("made-up#chunk-1", "secret#chunk-0", "GUIDE#chunk-0")
    assert report.pending_in_spool == 0
    assert report.conclusive
    assert not report.all_valid


def test_verify_citations_edge_inputs(backend: AuditBackend) -> None:
    sid = session()
    backend.recorder.record(invocation(sid, documents=["a#chunk-0"]))
    empty = citations_in_store(backend.queries, sid, [])
    assert empty.valid == ()
    assert empty.unknown == ()
    assert empty.all_valid
    hostile = "a#chunk-0' OR '1'='1"
    assert citations_in_store(backend.queries, sid, [hostile]).unknown == (hostile,)
    assert citations_in_store(backend.queries, session(), ["a#chunk-0"]).unknown == ("a#chunk-0",)
    with pytest.raises(InvalidInputError):
        citations_in_store(backend.queries, "", ["a#chunk-0"])
    with pytest.raises(InvalidInputError):
        citations_in_store(backend.queries, sid, "a#chunk-0")  # a string is not a list of ids
    with pytest.raises(InvalidInputError):
        citations_in_store(backend.queries, sid, [""])
    with pytest.raises(InvalidInputError):
        citations_in_store(backend.queries, sid, [f"d{i}" for i in range(1001)])


def test_verify_citations_use_case_flushes_and_reports_pending(backend: AuditBackend) -> None:
    sid = session()
    r = invocation(sid, documents=["a#chunk-0", "b#chunk-0"])
    backend.recorder.record(r)
    report = VerifyCitations(backend.queries, backend.recorder, flush_timeout_s=1.0).execute(
        sid, ["b#chunk-0", "nope"]
    )
    assert report.valid_ids == ("b#chunk-0",)
    assert report.unknown == ("nope",)
    assert report.pending_in_spool == 0
    assert report.conclusive


_doc = st.sampled_from([f"doc{i}#chunk-{j}" for i in range(4) for j in range(3)])


@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    lookups=st.lists(st.lists(_doc, max_size=4, unique=True), min_size=1, max_size=5),
    cited=st.lists(_doc, max_size=6),
)
def test_verify_citations_matches_a_model(
    backend: AuditBackend, lookups: list[list[str]], cited: list[str]
) -> None:
    sid = session()
    first_seen: dict[str, tuple[int, int]] = {}
    for seq, docs in enumerate(lookups, 1):
        backend.recorder.record(invocation(sid, documents=docs))
        for rank, d in enumerate(docs, 1):
            first_seen.setdefault(d, (seq, rank))

    report = citations_in_store(backend.queries, sid, cited)

    unique = list(dict.fromkeys(cited))
    assert [(v.document_id, v.seq, v.rank) for v in report.valid] == [
        (d, *first_seen[d]) for d in unique if d in first_seen
    ]
    assert list(report.unknown) == [d for d in unique if d not in first_seen]


# --------------------------------------------------------------------------- eval


def _eval_dataset(backend: AuditBackend) -> TimeRange:
    s1, s2 = session(), session()
    rows = [
        invocation(s1, documents=["a#chunk-0", "b#chunk-0"], at=_t(1), duration_ms=10, quality=0.8),
        invocation(
            s1,
            documents=["a#chunk-0"],
            at=_t(2),
            duration_ms=40,
            quality=0.6,
            fallback_reason="filtered_pass_empty",
        ),
        invocation(s2, documents=["a#chunk-0", "c#chunk-0"], at=_t(3), duration_ms=20, quality=0.4),
        invocation(
            s2, at=_t(4), duration_ms=30, fallback_reason="filtered_pass_below_min_relevance"
        ),
        replace(
            invocation(s2, at=_t(5), duration_ms=50), status="error", error_code="search_error"
        ),
        invocation(s2, documents=["z#chunk-0"], at=_t(60), duration_ms=999),  # outside the range
    ]
    for r in rows:
        backend.recorder.record(r)
    return TimeRange(_t(0), _t(30))


def test_quality_summary_over_a_time_range(backend: AuditBackend) -> None:
    window = _eval_dataset(backend)
    summary = backend.queries.quality_summary(window, top_n=2)

    assert summary.count == 5
    assert (summary.ok_count, summary.no_evidence_count, summary.error_count) == (3, 1, 1)
    assert summary.no_evidence_rate == pytest.approx(0.2)
    assert summary.fallback_rate == pytest.approx(0.4)
    assert summary.error_rate == pytest.approx(0.2)
    # non-error invocations: 0.8, 0.6, 0.4 and 0.0 (no evidence)
    assert summary.mean_quality == pytest.approx(0.45)
    # nearest rank over 10, 20, 30, 40, 50
    assert summary.p50_duration_ms == pytest.approx(30)
    assert summary.p95_duration_ms == pytest.approx(50)
    assert [(d.document_id, d.times_returned, d.sessions) for d in summary.top_documents] == [
        ("a#chunk-0", 3, 2),
        ("b#chunk-0", 1, 1),
    ]
    assert summary.time_range == window


def test_quality_summary_of_an_empty_range(backend: AuditBackend) -> None:
    _eval_dataset(backend)
    summary = backend.queries.quality_summary(TimeRange(_t(-100), _t(-50)))
    assert summary.count == 0
    assert summary.no_evidence_rate == 0.0
    assert summary.fallback_rate == 0.0
    assert summary.mean_quality is None
    assert summary.p50_duration_ms is None
    assert summary.p95_duration_ms is None
    assert summary.top_documents == ()


def test_top_documents_ranks_by_returns_then_id(backend: AuditBackend) -> None:
    window = _eval_dataset(backend)
    top = backend.queries.top_documents(window, limit=10)
    assert [(d.document_id, d.times_returned) for d in top] == [
        ("a#chunk-0", 3),
        ("b#chunk-0", 1),
        ("c#chunk-0", 1),
    ]
    assert (top[0].doc_id, top[0].source) == ("a", "a.md")
    everything = backend.queries.top_documents(TimeRange(), limit=1)
    assert [d.document_id for d in everything] == ["a#chunk-0"]
    with pytest.raises(InvalidInputError):
        backend.queries.top_documents(window, limit=0)


def test_verify_citations_is_honest_about_pending_records_in_the_fake() -> None:
    """The fake's outage switch behaves like the SQL recorder's spool."""
    b = memory_backend()
    recorder = b.recorder
    assert isinstance(recorder, InMemoryRecorder)
    sid = session()
    recorder.record(invocation(sid, documents=["a#chunk-0"]))
    recorder.available = False
    assert (
        recorder.record(invocation(sid, documents=["b#chunk-0"])) is RecordOutcome.JOURNALED_OFFLINE
    )
    use_case = VerifyCitations(b.queries, recorder, flush_timeout_s=0)

    during = use_case.execute(sid, ["a#chunk-0", "b#chunk-0"])
    assert during.valid_ids == ("a#chunk-0",)
    assert during.unknown == ("b#chunk-0",)
    assert during.pending_in_spool == 1
    assert not during.conclusive

    recorder.available = True
    after = use_case.execute(sid, ["a#chunk-0", "b#chunk-0"])
    assert after.valid_ids == ("a#chunk-0", "b#chunk-0")
    assert after.conclusive
    assert [i.seq for i in b.queries.list_invocations(InvocationFilter(session_id=sid)).items] == [
        1,
        2,
    ]


# --------------------------------------------------------------------------- access control


def test_the_principal_round_trips_and_filters_listings_and_stats(backend: AuditBackend) -> None:
    hashed = "ab" * 32
    acme = [
        replace(
            invocation(session(), documents=["d#chunk-0"]),
            principal_tenant="acme",
            principal_user='al"ice',
            principal_groups_hash=hashed,
            access_mode="enforced",
            access_filter='public or (tenant == "acme" and allowed_groups == [])',
        )
        for _ in range(2)
    ]
    globex = replace(
        invocation(session(), documents=["e#chunk-0"]),
        principal_tenant="globex",
        access_mode="enforced",
        access_filter="public",
    )
    nobody = invocation(session(), documents=["f#chunk-0"])
    for inv in (*acme, globex, nobody):
        assert backend.recorder.record(inv) is RecordOutcome.COMMITTED
    s = backend.queries.get_invocation(acme[0].id).summary
    assert (s.principal_tenant, s.principal_user, s.principal_groups_hash) == (
        "acme",
        'al"ice',
        hashed,
    )
    assert (s.access_mode, s.access_filter) == ("enforced", acme[0].access_filter)
    plain = backend.queries.get_invocation(nobody.id).summary
    assert (plain.principal_tenant, plain.access_mode, plain.access_filter) == (None, "off", None)

    listed = backend.queries.list_invocations(InvocationFilter(tenant="acme"))
    assert sorted(i.id for i in listed.items) == sorted(i.id for i in acme)
    stats = backend.queries.quality_summary(TimeRange(), tenant="globex")
    assert stats.count == 1
    assert stats.tenant == "globex"
    assert [d.document_id for d in stats.top_documents] == ["e#chunk-0"]
    assert backend.queries.quality_summary(TimeRange(), tenant="nobody").count == 0
    assert [p.tenant for p in backend.queries.session_principals(acme[0].session_id)] == ["acme"]
    with pytest.raises(InvalidInputError):
        InvocationFilter(tenant="")


def test_session_owners_are_the_recorded_principals(backend: AuditBackend) -> None:
    shared, alone = session(), session()
    records = [
        replace(invocation(shared), principal_tenant="acme", principal_user="al"),
        replace(invocation(shared), principal_tenant="acme", principal_user="al"),
        replace(
            invocation(shared),
            principal_tenant="globex",
            principal_user=None,
            principal_groups_hash="cd" * 32,
        ),
        invocation(alone),
    ]
    for inv in records:
        assert backend.recorder.record(inv) is RecordOutcome.COMMITTED
    assert backend.queries.session_owners(shared) == (
        SessionOwner("acme", "al", None),
        SessionOwner("globex", None, "cd" * 32),
    )
    assert backend.queries.session_owners(alone) == (SessionOwner(None, None, None),)
    assert backend.queries.session_owners(session()) == ()
