"""The recorder loses nothing: outages, restarts, corrupt spool lines, retries, poison.

Outages are real (``tests/support/audit_outage.py``, the ``db`` fixture of this folder's
conftest): on SQLite another connection holds the write lock (the recorder's
``BEGIN IMMEDIATE`` times out); on PostgreSQL the recorder talks through a TCP proxy that
the test cuts (pooled connections die, new ones are refused) and restores.
"""

from __future__ import annotations

import json
import logging
import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import IO

import pytest
from sqlalchemy import Connection, Engine, func, select, text

from lookup_knowledge.adapters.audit import (
    SqlAuditQueries,
    SqlToolInvocationRecorder,
    build_sql_recorder,
    create_audit_engine,
)
from lookup_knowledge.adapters.audit.journal import Journal
from lookup_knowledge.adapters.audit.journal_format import decode, encode
from lookup_knowledge.adapters.audit.journal_segments import open_for_reading
from lookup_knowledge.adapters.audit.models import invocation_evidence, tool_invocation
from lookup_knowledge.adapters.audit.sql_writer import SqlBatchWriter
from lookup_knowledge.application.ports import InvocationFilter, RecordOutcome
from lookup_knowledge.application.verify_citations import VerifyCitations
from lookup_knowledge.domain.errors import AuditError, AuditUnavailable
from tests.support.audit_data import evidence, invocation, session
from tests.support.audit_outage import Database
from tests.support.tcp_proxy import closed_port


def recorder_for(engine: Engine, spool: Path, **kw: object) -> SqlToolInvocationRecorder:
    """No backoff; no background drainer (unless asked): outcomes depend on the test only."""
    kw.setdefault("background_drain_s", None)
    return build_sql_recorder(engine, spool, backoff_initial_s=0.0, **kw)  # type: ignore[arg-type]


def database_down() -> None:
    """A recorder's ``prepare`` that fails: its database (the test's own) is away."""
    raise AuditUnavailable("the audit database is unreachable (test)")


def stored(engine: Engine, sid: str) -> list[tuple[str, int]]:
    with engine.connect() as conn:
        rows = conn.execute(
            select(tool_invocation.c.id, tool_invocation.c.seq)
            .where(tool_invocation.c.session_id == sid)
            .order_by(tool_invocation.c.seq)
        ).all()
    return [(str(r.id), r.seq) for r in rows]


def evidence_count(conn: Connection, sid: str) -> int:
    return int(
        conn.execute(
            select(func.count()).where(invocation_evidence.c.session_id == sid)
        ).scalar_one()
    )


def journal_files(directory: Path) -> list[Path]:
    """The journal files that hold records: a live recorder keeps its own file open and
    truncates it once everything in it is in the database; ``close`` removes it."""
    return sorted(p for p in directory.glob("journal-*.jsonl") if p.stat().st_size)


# --------------------------------------------------------------------------- outage


def test_outage_loses_nothing_and_keeps_order(db: Database, tmp_path: Path) -> None:
    sid = session()
    recorder = recorder_for(db.engine, tmp_path / "spool")
    records = [invocation(sid, documents=[f"d{i}#chunk-0", f"e{i}#chunk-1"]) for i in range(10)]

    before = [recorder.record(r) for r in records[:3]]
    db.outage.go_away()
    try:
        during = [recorder.record(r) for r in records[3:8]]
        assert recorder.pending_count(sid) == 5
        assert recorder.pending_count(session()) == 0
        assert recorder.failure_count() >= 1
        # The Verifier is told the truth: pending records, answer not conclusive.
        report = VerifyCitations(SqlAuditQueries(db.direct), recorder, flush_timeout_s=0.2).execute(
            sid, ["d0#chunk-0", "d5#chunk-0"]
        )
        assert report.valid_ids == ("d0#chunk-0",)
        assert report.unknown == ("d5#chunk-0",)
        assert report.pending_in_spool == 5
        assert not report.conclusive
    finally:
        db.outage.come_back()
    after = [recorder.record(r) for r in records[8:]]

    assert before == [RecordOutcome.COMMITTED] * 3
    assert during == [RecordOutcome.JOURNALED_OFFLINE] * 5
    assert after == [RecordOutcome.COMMITTED] * 2
    assert recorder.pending_count() == 0
    assert stored(db.direct, sid) == [(r.id, i) for i, r in enumerate(records, 1)]
    with db.direct.connect() as conn:
        assert evidence_count(conn, sid) == 20
    assert journal_files(tmp_path / "spool") == []  # the journal is emptied once all is stored
    report = VerifyCitations(SqlAuditQueries(db.direct), recorder).execute(sid, ["d5#chunk-0"])
    assert report.valid_ids == ("d5#chunk-0",)
    assert report.conclusive
    recorder.close()


def test_flush_waits_for_the_database_to_come_back(db: Database, tmp_path: Path) -> None:
    sid = session()
    recorder = recorder_for(db.engine, tmp_path / "spool")
    db.outage.go_away()
    try:
        assert recorder.record(invocation(sid)) is RecordOutcome.JOURNALED_OFFLINE
        assert recorder.flush(sid, timeout_s=0.1) is False
        assert recorder.pending_count(sid) == 1
    finally:
        db.outage.come_back()
    assert recorder.flush(sid, timeout_s=10) is True
    assert len(stored(db.direct, sid)) == 1
    recorder.close()


def test_backoff_skips_the_database_until_it_expires(tmp_path: Path) -> None:
    now = [100.0]
    dead = create_audit_engine(f"postgresql+psycopg://postgres@127.0.0.1:{closed_port()}/x")
    recorder = build_sql_recorder(
        dead, tmp_path / "spool", backoff_initial_s=5.0, clock=lambda: now[0]
    )
    sid = session()
    recorder.record(invocation(sid))
    recorder.record(invocation(sid))
    assert recorder.failure_count() == 1  # the second call did not touch the database
    now[0] += 6.0
    recorder.record(invocation(sid))
    assert recorder.failure_count() == 2  # backoff over: tried (and failed) again
    assert recorder.pending_count(sid) == 3
    recorder.close()
    dead.dispose()


# --------------------------------------------------------------------------- restarts


def test_startup_replays_a_journal_left_by_a_previous_process(db: Database, tmp_path: Path) -> None:
    sid = session()
    spool = tmp_path / "spool"
    first = recorder_for(db.engine, spool, prepare=database_down)  # its database is away
    records = [invocation(sid, documents=[f"x{i}#chunk-0"]) for i in range(4)]
    assert [first.record(r) for r in records] == [RecordOutcome.JOURNALED_OFFLINE] * 4
    first.close()  # the process ends with records still spooled
    assert len(journal_files(spool)) == 1

    second = recorder_for(db.engine, spool)  # start-up replay

    assert second.pending_count() == 0
    assert stored(db.direct, sid) == [(r.id, i) for i, r in enumerate(records, 1)]
    assert journal_files(spool) == []
    second.close()


def test_a_live_journal_is_not_adopted_by_another_recorder(tmp_path: Path) -> None:
    spool = tmp_path / "spool"
    dead = create_audit_engine(f"postgresql+psycopg://postgres@127.0.0.1:{closed_port()}/x")
    first = recorder_for(dead, spool)
    first.record(invocation(session()))
    [live] = journal_files(spool)
    second = recorder_for(dead, spool)
    assert second.flush(timeout_s=0) is False  # flush adopts orphans, not live spools
    assert journal_files(spool) == [live]  # still owned by the first (it holds the lock)
    assert first.pending_count() == 1
    assert second.pending_count() == 1  # pending in the first's spool: seen, not owned
    first.close()
    second.flush(timeout_s=0)
    assert not live.exists()  # adopted now
    assert second.pending_count() == 1
    second.close()
    dead.dispose()


def test_corrupt_and_truncated_journal_lines_are_reported_and_skipped(
    db: Database, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    sid = session()
    spool = tmp_path / "spool"
    good = [invocation(sid, documents=[f"g{i}#chunk-0"]) for i in range(3)]
    lines = [encode(r) for r in good]
    flipped = lines[1].replace('"query":"how', '"query":"HOW', 1)  # checksum no longer matches
    (spool).mkdir()
    orphan = spool / "spool-00000000000000000000000000000001.jsonl"
    orphan.write_text(
        lines[0] + flipped + "not json at all\n" + lines[1] + lines[2] + lines[2][:40],
        encoding="ascii",
    )

    with caplog.at_level(logging.ERROR):
        recorder = recorder_for(db.engine, spool)

    assert stored(db.direct, sid) == [(r.id, i) for i, r in enumerate(good, 1)]
    assert recorder.rejected_count() == 3
    rejected = [json.loads(x) for x in (spool / "rejected.jsonl").read_text().splitlines()]
    assert [r["line"] for r in rejected] == [flipped, "not json at all\n", lines[2][:40]]
    assert "checksum mismatch" in rejected[0]["reason"]
    assert "truncated" in rejected[2]["reason"]
    assert sum("rejected" in r.getMessage() for r in caplog.records) == 3
    assert not orphan.exists()
    recorder.close()


def test_journal_line_codec_round_trips_and_detects_damage() -> None:
    r = invocation(session(), documents=["a#chunk-0"])
    r = replace(r, query="naïve ✓ \u2028 newline\n inside", retrieval_details={"x": [1, 2.5]})
    line = encode(r)
    assert line.count("\n") == 1
    assert line.isascii()
    back = decode(line)
    assert back.query == r.query
    assert back.evidence == r.evidence
    assert back.started_at == r.started_at
    for damaged in (
        line[:-1],
        line[:-10] + "\n",
        "zz" + line[2:],
        line.replace("a#chunk-0", "b#chunk-0"),
    ):
        with pytest.raises(ValueError, match=r".+"):
            decode(damaged)


# --------------------------------------------------------------------------- idempotency


def test_a_record_committed_and_also_journaled_is_stored_once(db: Database, tmp_path: Path) -> None:
    """The commit reached the database but its acknowledgement did not: the recorder
    spooled it too. Replaying it must be a no-op."""
    sid = session()
    spool = tmp_path / "spool"
    r = invocation(sid, documents=["a#chunk-0"])
    direct = recorder_for(db.engine, tmp_path / "elsewhere")
    assert direct.record(r) is RecordOutcome.COMMITTED
    leftover = Journal(spool)
    leftover.append(r)
    leftover.close()

    recorder = recorder_for(db.engine, spool)
    assert recorder.pending_count() == 0
    nxt = invocation(sid)
    recorder.record(nxt)
    assert stored(db.direct, sid) == [(r.id, 1), (nxt.id, 2)]
    with db.direct.connect() as conn:
        assert evidence_count(conn, sid) == 1
    direct.close()
    recorder.close()


class StaleSeqWriter(SqlBatchWriter):
    """Reads a stale max(seq) once, as a writer that skipped the session lock would."""

    stale_reads = 1

    def _next_seqs(self, conn: Connection, sessions: list[str]) -> dict[str, int]:
        highest = super()._next_seqs(conn, sessions)
        if self.stale_reads:
            self.stale_reads -= 1
            return {}  # as if the session had no record yet: seq 1 again
        return highest


def test_a_seq_conflict_is_retried_not_left_pending(db: Database, tmp_path: Path) -> None:
    sid = session()
    plain = recorder_for(db.engine, tmp_path / "a")
    first = invocation(sid)
    plain.record(first)
    stale = StaleSeqWriter(db.engine)
    racer = build_sql_recorder(db.engine, tmp_path / "b", backoff_initial_s=0.0, writer=stale)
    second = invocation(sid)

    assert racer.record(second) is RecordOutcome.COMMITTED
    assert stale.stale_reads == 0
    assert racer.failure_count() == 0
    assert stored(db.direct, sid) == [(first.id, 1), (second.id, 2)]
    plain.close()
    racer.close()


# --------------------------------------------------------------------------- poison, disk


def _add_poison_rule(db: Database) -> None:
    with db.direct.begin() as conn:
        if db.name == "sqlite":
            conn.execute(
                text(
                    "CREATE TRIGGER IF NOT EXISTS poison BEFORE INSERT ON tool_invocation "
                    "WHEN NEW.query = 'poison' BEGIN SELECT RAISE(ABORT, 'poison record'); END"
                )
            )
        else:
            conn.execute(text("ALTER TABLE tool_invocation DROP CONSTRAINT IF EXISTS poison"))
            conn.execute(
                text("ALTER TABLE tool_invocation ADD CONSTRAINT poison CHECK (query <> 'poison')")
            )


def _drop_poison_rule(db: Database) -> None:
    with db.direct.begin() as conn:
        if db.name == "sqlite":
            conn.execute(text("DROP TRIGGER IF EXISTS poison"))
        else:
            conn.execute(text("ALTER TABLE tool_invocation DROP CONSTRAINT IF EXISTS poison"))


def test_a_record_the_database_always_refuses_is_set_aside_not_retried_forever(
    db: Database, tmp_path: Path
) -> None:
    sid = session()
    spool = tmp_path / "spool"
    _add_poison_rule(db)
    try:
        recorder = recorder_for(db.engine, spool)
        poison = replace(invocation(sid), query="poison")
        assert recorder.record(poison) is RecordOutcome.JOURNALED_OFFLINE
        ok = invocation(sid)
        assert recorder.record(ok) is RecordOutcome.COMMITTED  # the queue moved on
    finally:
        _drop_poison_rule(db)
    assert recorder.pending_count() == 0
    assert recorder.rejected_count() == 1
    assert recorder.failure_count() == 1  # one attempt: refused for good, set aside
    assert stored(db.direct, sid) == [(ok.id, 1)]
    kept = json.loads((spool / "rejected.jsonl").read_text().splitlines()[0])
    assert decode(kept["line"]).id == poison.id  # kept, recoverable
    assert "IntegrityError" in kept["reason"]
    recorder.close()


def test_nul_characters_and_non_finite_details_are_stored(db: Database, tmp_path: Path) -> None:
    sid = session()
    recorder = recorder_for(db.engine, tmp_path / "spool")
    r = replace(
        invocation(sid, documents=["a#chunk-0"]),
        query="bad\x00byte",
        retrieval_details={
            "score": float("nan"),
            "text": "x\x00y",
            "nested": {"inf": float("inf")},
        },
    )
    assert recorder.record(r) is RecordOutcome.COMMITTED
    detail = SqlAuditQueries(db.direct).get_invocation(r.id)
    assert detail.summary.query == "bad\ufffdbyte"
    assert detail.retrieval_details == {
        "score": None,
        "text": "x\ufffdy",
        "nested": {"inf": None},
        "version": 1,
    }
    recorder.close()


def test_an_invalid_record_cannot_be_made(db: Database, tmp_path: Path) -> None:
    """Validation happens where a record is made, so no recorder (and no spool) ever
    holds a record that no store can keep."""
    spool = tmp_path / "spool"
    recorder = recorder_for(db.engine, spool)
    with pytest.raises(AuditError, match="session_id"):
        invocation("x" * 300, documents=["a#chunk-0"])  # session id too long for any store
    assert recorder.failure_count() == 0
    assert recorder.rejected_count() == 0
    recorder.close()


def test_an_unwritable_journal_raises_audit_error(tmp_path: Path) -> None:
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("x")
    dead = create_audit_engine(f"postgresql+psycopg://postgres@127.0.0.1:{closed_port()}/x")
    with pytest.raises(AuditError):
        build_sql_recorder(dead, not_a_dir)

    spool = tmp_path / "spool"
    recorder = build_sql_recorder(dead, spool, backoff_initial_s=0.0)
    shutil.rmtree(spool)
    spool.write_text("now a file")  # the directory is gone and cannot be recreated
    with pytest.raises(AuditError):
        recorder.record(invocation(session()))
    assert recorder.failure_count() == 1
    dead.dispose()


def test_list_after_replay_shows_records_in_lookup_order(db: Database, tmp_path: Path) -> None:
    """A spooled record replayed later keeps its own started_at but a later seq: listing by
    session orders by time, the seq shows the recording order."""
    sid = session()
    recorder = recorder_for(db.engine, tmp_path / "spool")
    db.outage.go_away()
    try:
        a = invocation(sid)
        recorder.record(a)
    finally:
        db.outage.come_back()
    b = invocation(sid)
    recorder.record(b)
    items = SqlAuditQueries(db.direct).list_invocations(InvocationFilter(session_id=sid)).items
    assert [(i.id, i.seq) for i in items] == [(a.id, 1), (b.id, 2)]
    recorder.close()


def test_every_text_field_is_cleaned_of_what_a_database_refuses(
    db: Database, tmp_path: Path
) -> None:
    """NUL (PostgreSQL text and JSONB refuse it) and lone surrogates (no UTF-8 encoder
    takes them) in any stored text become U+FFFD; a surrogate pair becomes its character.
    Without cleaning such a record is refused by the database and ends in rejected.jsonl.
    Evidence ids, source and category are the exception: they must be stored exactly as
    the agent saw them, so a record holding such evidence is refused where it is made
    (the Retriever drops such hits before they are shown)."""
    sid = session()
    recorder = recorder_for(db.engine, tmp_path / "spool")
    shown = replace(evidence(1, "doc#chunk-0"), source="a😀.md")
    for field_name, value in (
        ("document_id", "doc\x00\ud800#chunk-0"),
        ("doc_id", "doc\x00"),
        ("source", "a\udfff.md"),
        ("category", "c\x00"),
    ):
        with pytest.raises(AuditError, match=field_name):
            replace(invocation(sid), evidence=(replace(shown, **{field_name: value}),))
    dirty = replace(
        invocation(sid),
        session_id=f"{sid}\x00\ud800",
        step_id="step\x00",
        tool_call_id="call-\ud83d\ude00",  # a pair, as two code points
        query="q\x00\ud800 keeps\ttabs\nand newlines",
        status="error",
        error_code="E\x00",
        error_message="boom \udc00",
        filter_applied="f\x00",
        fallback_reason="why\x00",
        trace_id="t\x00",
        retrieval_details={"k\ud800": ["v\x00", "\ud83d\ude00"]},
        evidence=(shown,),
    )
    assert recorder.record(dirty) is RecordOutcome.COMMITTED
    # Spooled (the database away) and replayed later: the same.
    later = replace(dirty, id=invocation(sid).id, query="later\ud800")
    db.outage.go_away()
    try:
        assert recorder.record(later) is RecordOutcome.JOURNALED_OFFLINE
    finally:
        db.outage.come_back()
    assert recorder.flush(timeout_s=10) is True
    assert recorder.rejected_count() == 0

    detail = SqlAuditQueries(db.direct).get_invocation(dirty.id)
    s = detail.summary
    assert s.session_id == f"{sid}\ufffd\ufffd"
    assert (s.step_id, s.tool_call_id, s.error_code) == ("step\ufffd", "call-😀", "E\ufffd")
    assert s.query == "q\ufffd\ufffd keeps\ttabs\nand newlines"
    assert (s.filter_applied, s.fallback_reason) == ("f\ufffd", "why\ufffd")
    assert (detail.error_message, detail.trace_id) == ("boom \ufffd", "t\ufffd")
    assert detail.retrieval_details == {"k\ufffd": ["v\ufffd", "😀"], "version": 1}
    [e] = detail.evidence
    assert (e.document_id, e.doc_id, e.source, e.category) == (
        shown.document_id,
        shown.doc_id,
        "a😀.md",
        shown.category,
    )
    assert SqlAuditQueries(db.direct).get_invocation(later.id).summary.query == "later\ufffd"
    recorder.close()


# --------------------------------------------------------------------------- shared spool dir


def test_a_journal_rewritten_while_another_process_adopts_it_is_left_alone(
    tmp_path: Path,
) -> None:
    """The adopter opens a live journal; its owner rewrites it (compaction replaces the
    file and releases the old one's lock); the adopter then locks the *old* file. It
    must notice that the file at the name is another one, and leave it alone."""
    directory = tmp_path / "spool"
    owner = Journal(directory)
    first, second, third = (invocation("s") for _ in range(3))
    owner.append(first)
    owner.append(second)
    compacted: list[bool] = []

    def open_then_owner_compacts(path: Path) -> IO[str]:
        handle = open_for_reading(path)
        if path == owner.path and not compacted:
            head = owner.head()
            assert head is not None
            owner.pop_head(head)  # `first` reached the database
            owner.compact()
            compacted.append(True)
        return handle

    adopter = Journal(directory, open_segment=open_then_owner_compacts)
    assert adopter.adopt_orphans() == 0
    assert compacted
    assert owner.path.exists()
    owner.append(third)  # durable, as far as the owner knows
    adopter.close()
    owner.close()  # the owner's process ends with records still spooled

    survivor = Journal(directory)
    survivor.adopt_orphans()
    assert survivor.pending_ids() == [second.id, third.id]
    survivor.close()


def test_orphans_of_several_dead_processes_replay_in_lookup_order(
    db: Database, tmp_path: Path
) -> None:
    """Two workers served one session and died with records spooled. Their files' names
    (random tokens) say nothing about time: replay merges them by started_at, keeping
    each file's own order, so seq follows the order of the lookups."""
    sid = session()
    spool = tmp_path / "spool"
    spool.mkdir()
    records = [invocation(sid, documents=[f"o{i}#chunk-0"]) for i in range(5)]
    (spool / f"spool-{'f' * 32}.jsonl").write_text(
        "".join(encode(records[i]) for i in (0, 2, 4)), encoding="ascii"
    )
    (spool / f"spool-{'0' * 32}.jsonl").write_text(
        "".join(encode(records[i]) for i in (1, 3)), encoding="ascii"
    )

    recorder = recorder_for(db.engine, spool)

    assert stored(db.direct, sid) == [(r.id, i) for i, r in enumerate(records, 1)]
    assert journal_files(spool) == []
    recorder.close()


def test_records_in_another_process_live_journal_are_pending_for_a_verifier(
    db: Database, tmp_path: Path
) -> None:
    """The lookup server spooled a record (its database was briefly unreachable); a
    Verifier in another process must not call the citation "unknown, conclusive"."""
    sid = session()
    spool = tmp_path / "spool"
    server = recorder_for(db.engine, spool, prepare=database_down)  # its database is away
    shown = invocation(sid, documents=["runbooks/a#chunk-0"])
    acked_late = invocation(sid, documents=["runbooks/b#chunk-0"])
    elsewhere = recorder_for(db.engine, tmp_path / "elsewhere")
    assert elsewhere.record(acked_late) is RecordOutcome.COMMITTED  # in the database...
    elsewhere.close()
    assert server.record(shown) is RecordOutcome.JOURNALED_OFFLINE
    assert server.record(acked_late) is RecordOutcome.JOURNALED_OFFLINE  # ...and in the live spool
    [live] = journal_files(spool)
    with open(live, "a", encoding="ascii") as out:
        out.write('0badc0de {"half a line')  # damaged / half-written: tolerated

    verifier = recorder_for(db.engine, spool)  # another process on the same directory
    verify = VerifyCitations(SqlAuditQueries(db.direct), verifier, flush_timeout_s=0)
    report = verify.execute(sid, ["runbooks/a#chunk-0"])

    assert report.unknown == ("runbooks/a#chunk-0",)
    assert report.pending_in_spool == 1  # `acked_late` is in the database: not pending
    assert not report.conclusive
    assert verifier.pending_count() == 1
    assert verifier.pending_count(session()) == 0
    assert journal_files(spool) == [live]  # read, not adopted

    server.close()  # the server stops; its spool is an orphan now
    report = verify.execute(sid, ["runbooks/a#chunk-0"])  # flush adopts and replays it
    assert report.valid_ids == ("runbooks/a#chunk-0",)
    assert report.conclusive
    assert verifier.rejected_count() == 1  # the damaged line, kept in rejected.jsonl
    verifier.close()


def _wait_until(condition: Callable[[], bool], timeout_s: float = 10.0) -> bool:
    """Poll (real time, generously bounded) for what another thread does."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.005)
    return True


def test_an_idle_recorder_replays_its_journal_once_the_backoff_is_over(
    db: Database, tmp_path: Path
) -> None:
    """No further lookups, no flush: the background drainer replays the spool after the
    backoff (on the recorder's clock, here a fake one), and stops on close."""
    sid = session()
    now = [1000.0]
    clock_reads = [0]

    def clock() -> float:
        clock_reads[0] += 1
        return now[0]

    threads_before = set(threading.enumerate())
    recorder = build_sql_recorder(
        db.engine,
        tmp_path / "spool",
        backoff_initial_s=5.0,
        clock=clock,
        background_drain_s=0.001,
    )
    [drainer] = set(threading.enumerate()) - threads_before
    db.outage.go_away()
    try:
        spooled = invocation(sid)
        assert recorder.record(spooled) is RecordOutcome.JOURNALED_OFFLINE
    finally:
        db.outage.come_back()
    failures = recorder.failure_count()

    # The drainer keeps looking, but the backoff is not over: the database is left alone.
    reads = clock_reads[0]
    assert _wait_until(lambda: clock_reads[0] > reads + 20)
    assert recorder.failure_count() == failures
    assert recorder.pending_count(sid) == 1

    def replayed() -> bool:
        now[0] += 60.0  # past any backoff (a first attempt may meet a dying pooled link)
        return recorder.pending_count(sid) == 0

    assert _wait_until(replayed)
    assert stored(db.direct, sid) == [(spooled.id, 1)]
    recorder.close()
    assert not drainer.is_alive()


def test_a_record_that_arrives_after_close_is_kept_for_the_next_recorder(
    db: Database, tmp_path: Path
) -> None:
    """A lookup in flight when the recorder closes must not lose its record."""
    sid = session()
    spool = tmp_path / "spool"
    recorder = recorder_for(db.engine, spool)
    before = invocation(sid, documents=["c0#chunk-0"])
    late = invocation(sid, documents=["c1#chunk-0"])
    db.outage.go_away()
    try:
        assert recorder.record(before) is RecordOutcome.JOURNALED_OFFLINE
        recorder.close()
        assert recorder.record(late) is RecordOutcome.JOURNALED_OFFLINE  # durable, not an error
        assert recorder.pending_count(sid) == 2
        assert len(journal_files(spool)) == 2  # its own file: no live spool to append to
        assert recorder.flush(sid, timeout_s=0) is False
    finally:
        db.outage.come_back()
    recorder.close()  # idempotent

    successor = recorder_for(db.engine, spool)
    assert stored(db.direct, sid) == [(before.id, 1), (late.id, 2)]
    assert journal_files(spool) == []
    assert recorder.pending_count(sid) == 0  # the closed one sees them gone, too
    successor.close()
