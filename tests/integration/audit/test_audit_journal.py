"""The audit journal off the critical path: ``record`` returns once the record is durable
in the local journal, a background writer moves entries into SQL in batches, readers
flush first, and a crash anywhere (right after ``lookup`` returns, in the middle of a
batch, after its commit) loses nothing and stores nothing twice. Real processes killed
with SIGKILL; SQLite and PostgreSQL."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from sqlalchemy import Engine, select, text

from lookup_knowledge.adapters.audit import (
    SqlAuditQueries,
    SqlToolInvocationRecorder,
    build_sql_recorder,
)
from lookup_knowledge.adapters.audit.journal import Journal
from lookup_knowledge.adapters.audit.journal_format import decode
from lookup_knowledge.adapters.audit.models import tool_invocation
from lookup_knowledge.adapters.durable_files import DurableFiles
from lookup_knowledge.application.ports import InvocationFilter, RecordOutcome
from lookup_knowledge.application.verify_citations import VerifyCitations
from tests.support.audit_data import invocation, session
from tests.support.audit_outage import Database

ROOT = Path(__file__).resolve().parents[3]


def write_behind(engine: Engine, journal: Path, **kw: object) -> SqlToolInvocationRecorder:
    return build_sql_recorder(
        engine,
        journal,
        write_behind=True,
        backoff_initial_s=0.0,
        **kw,  # type: ignore[arg-type]
    )


def stored(engine: Engine, sid: str) -> list[tuple[str, int]]:
    with engine.connect() as conn:
        rows = conn.execute(
            select(tool_invocation.c.id, tool_invocation.c.seq)
            .where(tool_invocation.c.session_id == sid)
            .order_by(tool_invocation.c.seq)
        ).all()
    return [(str(r.id), r.seq) for r in rows]


def journal_ids(directory: Path) -> list[str]:
    """The ids in the journal files (sound lines only), file by file."""
    ids: list[str] = []
    for path in sorted(directory.glob("journal-*.jsonl")):
        for line in path.read_text(encoding="ascii").splitlines(keepends=True):
            try:
                ids.append(decode(line).id)
            except ValueError:
                continue
    return ids


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOOKUP_KNOWLEDGE_")}
    env["HAYSTACK_TELEMETRY_ENABLED"] = "False"
    return env


@contextmanager
def writes_blocked(engine: Engine) -> Iterator[None]:
    """Readers go on, writers wait: SQLite's write lock (another connection), or an
    EXCLUSIVE table lock on PostgreSQL (reads allowed, INSERT waits)."""
    if engine.dialect.name == "sqlite":
        path = engine.url.database
        assert path
        holder = sqlite3.connect(path, isolation_level=None, timeout=5)
        holder.execute("BEGIN EXCLUSIVE")
        try:
            yield
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        return
    with engine.connect() as conn, conn.begin():
        conn.execute(text("LOCK TABLE tool_invocation IN EXCLUSIVE MODE"))
        yield


def _url(engine: Engine) -> str:
    return engine.url.render_as_string(hide_password=False)


def _kill(child: subprocess.Popen[str]) -> None:
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=30)
    assert child.returncode == -signal.SIGKILL


# --------------------------------------------------------------------------- write-behind


def test_record_returns_journaled_and_every_reader_is_a_barrier(
    audit_engine: Engine, tmp_path: Path
) -> None:
    sid = session()
    recorder = write_behind(audit_engine, tmp_path / "journal")
    records = [invocation(sid, documents=[f"b{i}#chunk-0"]) for i in range(30)]
    assert {recorder.record(r) for r in records} == {RecordOutcome.JOURNALED}

    # Right after the lookups: the readers flush first, so they see every record.
    queries = SqlAuditQueries(audit_engine, barrier=recorder.flush)
    page = queries.list_invocations(InvocationFilter(session_id=sid, limit=100))
    assert sorted(i.id for i in page.items) == sorted(r.id for r in records)
    assert stored(audit_engine, sid) == [(r.id, n) for n, r in enumerate(records, 1)]
    report = VerifyCitations(queries, recorder).execute(sid, ["b29#chunk-0"])
    assert report.valid_ids == ("b29#chunk-0",)
    assert report.conclusive
    recorder.close()
    assert list((tmp_path / "journal").glob("journal-*.jsonl")) == []


def test_threads_journal_and_batch_into_one_gap_free_session(
    audit_engine: Engine, tmp_path: Path
) -> None:
    sid = session()
    recorder = write_behind(audit_engine, tmp_path / "journal")
    records = [invocation(sid, documents=[f"t{i}#chunk-0"]) for i in range(8 * 25)]
    outcomes: list[RecordOutcome] = []
    start = threading.Barrier(8)

    def work(n: int) -> None:
        start.wait()
        outcomes.extend(recorder.record(r) for r in records[n::8])

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)

    assert recorder.flush(sid, timeout_s=30)
    assert outcomes.count(RecordOutcome.JOURNALED) == len(records)
    rows = stored(audit_engine, sid)
    assert [seq for _, seq in rows] == list(range(1, len(records) + 1))
    assert sorted(i for i, _ in rows) == sorted(r.id for r in records)
    # Each thread's records keep their order (the journal's order is the seq order).
    seq_of = dict(rows)
    for n in range(8):
        seqs = [seq_of[r.id] for r in records[n::8]]
        assert seqs == sorted(seqs)
    assert recorder.failure_count() == 0
    recorder.close()


def test_a_lingering_writer_moves_a_full_batch_at_once_and_flush_moves_the_rest(
    audit_engine: Engine, tmp_path: Path
) -> None:
    """The writer lets a lone record wait (``linger_s``) for others to share its
    transaction, but not a full batch; a reader's flush never waits for the linger."""
    sid = session()
    recorder = write_behind(audit_engine, tmp_path / "journal", linger_s=600.0, batch_size=4)
    records = [invocation(sid) for _ in range(5)]
    for r in records[:4]:
        recorder.record(r)
    deadline = time.monotonic() + 30
    while recorder.pending_count(sid) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert [i for i, _ in stored(audit_engine, sid)] == [r.id for r in records[:4]]
    recorder.record(records[4])  # alone: lingers
    assert recorder.flush(sid, timeout_s=30)
    assert [i for i, _ in stored(audit_engine, sid)] == [r.id for r in records]
    recorder.close()


def test_an_outage_keeps_the_records_in_the_journal_and_their_order(
    db: Database, tmp_path: Path
) -> None:
    sid = session()
    recorder = write_behind(db.engine, tmp_path / "journal")
    records = [invocation(sid, documents=[f"o{i}#chunk-0"]) for i in range(10)]
    for r in records[:3]:
        recorder.record(r)
    assert recorder.flush(sid)
    db.outage.go_away()
    try:
        for r in records[3:9]:
            recorder.record(r)
        assert recorder.flush(sid, timeout_s=0.2) is False
        assert recorder.pending_count(sid) == 6
        assert recorder.failure_count() >= 1
    finally:
        db.outage.come_back()
    recorder.record(records[9])
    assert recorder.flush(sid, timeout_s=30)
    assert stored(db.direct, sid) == [(r.id, n) for n, r in enumerate(records, 1)]
    recorder.close()


def test_the_barrier_does_not_wait_out_a_database_known_to_be_away(
    db: Database, tmp_path: Path
) -> None:
    """Readers (a health probe, ``audit list``) must not sit out the flush timeout when
    the last attempt already failed: one more attempt, then the read goes on."""
    sid = session()
    waits_allowed = [True]

    def sleep(seconds: float) -> None:
        if not waits_allowed[0]:
            raise AssertionError("the barrier waited for the database")
        time.sleep(seconds)

    recorder = write_behind(db.engine, tmp_path / "journal", sleep=sleep)
    db.outage.go_away()
    try:
        recorder.record(invocation(sid, documents=["w#chunk-0"]))
        assert recorder.flush(sid, timeout_s=0) is False  # an attempt failed: away

        waits_allowed[0] = False
        assert recorder.barrier(sid, timeout_s=30) is False
        queries = SqlAuditQueries(db.direct, barrier=recorder.barrier)
        report = VerifyCitations(queries, recorder, flush_timeout_s=0).execute(sid, ["w#chunk-0"])
        assert report.pending_in_spool == 1
        assert not report.conclusive
    finally:
        waits_allowed[0] = True
        db.outage.come_back()
    assert recorder.barrier(sid) is True
    assert len(stored(db.direct, sid)) == 1
    recorder.close()


def test_close_does_not_hang_on_a_dead_database_and_leaves_the_journal(
    db: Database, tmp_path: Path
) -> None:
    sid = session()
    journal = tmp_path / "journal"
    recorder = write_behind(db.engine, journal)
    db.outage.go_away()
    try:
        kept = [invocation(sid) for _ in range(3)]
        for r in kept:
            recorder.record(r)
        recorder.close()
        assert recorder.pending_count(sid) == 3
        assert sorted(journal_ids(journal)) == sorted(r.id for r in kept)
    finally:
        db.outage.come_back()
    successor = build_sql_recorder(db.engine, journal)  # replays at start
    assert stored(db.direct, sid) == [(r.id, n) for n, r in enumerate(kept, 1)]
    successor.close()


def test_concurrent_appends_share_one_fsync(tmp_path: Path) -> None:
    """Group commit: while one append is in its fsync, two more are written; one fsync
    then covers both, so three appends cost two fsyncs."""
    counting = [False]
    calls: list[int] = []
    first_in_fsync, release = threading.Event(), threading.Event()

    def slow_first_fsync(fd: int) -> None:
        if counting[0]:
            calls.append(fd)
            if len(calls) == 1:
                first_in_fsync.set()
                assert release.wait(30)
        os.fsync(fd)

    journal = Journal(tmp_path / "journal", files=DurableFiles(fsync=slow_first_fsync))
    journal.append(invocation("warm"))  # opens the file (and syncs its folder)
    counting[0] = True
    threads = [threading.Thread(target=journal.append, args=(invocation("g"),)) for _ in range(3)]
    threads[0].start()
    assert first_in_fsync.wait(30)
    for t in threads[1:]:
        t.start()
    while journal._written < 4:  # both later appends are written, waiting for the sync
        threading.Event().wait(0.001)
    release.set()
    for t in threads:
        t.join(timeout=30)
    assert len(calls) == 2
    assert len(journal) == 4
    journal.close()


def test_process_durability_writes_without_fsync(tmp_path: Path) -> None:
    synced: list[int] = []
    journal = Journal(tmp_path / "journal", files=DurableFiles(synced.append, enabled=False))
    r = invocation("p")
    journal.append(r)
    assert synced == []
    assert journal_ids(tmp_path / "journal") == [r.id]  # in the file (the OS has it)
    journal.close()


# --------------------------------------------------------------------------- kill -9

LOOKUP_THEN_WAIT = """
import sys, time
from lookup_knowledge import create_app
overrides = {
    "data-dir": sys.argv[1], "search.backend": "memory", "embedder.provider": "hashing",
    "audit.database-url": sys.argv[2], "audit.auto-migrate": False,
    "audit.durability": "fsync",
}
app = create_app(overrides=overrides)
result = app.lookup("what survives a kill -9?", session_id=sys.argv[3])
print(result["invocationId"], flush=True)  # the lookup has returned
time.sleep(600)
"""


def test_a_lookups_record_survives_kill_9_right_after_lookup_returns(
    audit_engine: Engine, tmp_path: Path
) -> None:
    """``audit.durability=fsync``: the process is killed the moment ``lookup`` returns,
    while the database cannot take the record yet; the journal has it, and the next
    recorder on the directory replays it."""
    sid = session()
    data_dir = tmp_path / "data"
    with writes_blocked(audit_engine):
        child = subprocess.Popen(
            [sys.executable, "-c", LOOKUP_THEN_WAIT, str(data_dir), _url(audit_engine), sid],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=_env(),
            cwd=ROOT,
        )
        try:
            assert child.stdout is not None
            invocation_id = child.stdout.readline().strip()
            _kill(child)
        finally:
            if child.poll() is None:
                child.kill()
            child.communicate()
        assert invocation_id, "the child printed no invocation id"
        assert stored(audit_engine, sid) == []  # not in the database: only in the journal

    journal = data_dir / "audit-journal"
    assert journal_ids(journal) == [invocation_id]
    successor = build_sql_recorder(audit_engine, journal)
    assert stored(audit_engine, sid) == [(invocation_id, 1)]
    detail = SqlAuditQueries(audit_engine).get_invocation(invocation_id)
    assert detail.summary.query == "what survives a kill -9?"
    successor.close()
    assert journal_ids(journal) == []


KILLED_IN_A_BATCH = """
import sys, threading, time
from pathlib import Path
from lookup_knowledge.adapters.audit import SqlToolInvocationRecorder, create_audit_engine
from lookup_knowledge.adapters.audit.backoff import Backoff
from lookup_knowledge.adapters.audit.engine import database_key
from lookup_knowledge.adapters.audit.journal import Journal
from lookup_knowledge.adapters.audit.mover import JournalMover
from lookup_knowledge.adapters.audit.sql_writer import BATCH_SIZE, SqlBatchWriter
from tests.support.audit_data import invocation

url, journal, phase, sid, count = sys.argv[1:6]
gate = threading.Event()

class Stopped(JournalMover):
    def _drain_locked(self, respect_backoff):
        gate.wait()  # every record is journaled first: they go in one batch
        return super()._drain_locked(respect_backoff)

class StoppedWriter(SqlBatchWriter):
    def _insert_rows(self, conn, rows, evidence):
        super()._insert_rows(conn, rows, evidence)
        if phase == "before-commit":
            print("IN-BATCH", len(rows), flush=True)
            time.sleep(600)

    def write(self, invocations):
        super().write(invocations)
        if phase == "after-commit":  # stored, not yet taken off the journal
            print("IN-BATCH", len(invocations), flush=True)
            time.sleep(600)

engine = create_audit_engine(url)
mover = Stopped(
    Journal(Path(journal), database=database_key(engine.url)),
    StoppedWriter(engine),
    Backoff(0.5, 30.0),
    batch_size=BATCH_SIZE,
)
mover.start()
recorder = SqlToolInvocationRecorder(mover, write_behind=True)
records = [invocation(sid, documents=[f"k{i}#chunk-0"]) for i in range(int(count))]
for r in records:
    recorder.record(r)
print(" ".join(r.id for r in records), flush=True)
gate.set()
time.sleep(600)
"""


@pytest.mark.parametrize("phase", ["before-commit", "after-commit"])
def test_kill_9_during_a_batch_transfer_loses_nothing_and_stores_nothing_twice(
    audit_engine: Engine, tmp_path: Path, phase: str
) -> None:
    sid = session()
    journal = tmp_path / "journal"
    first = invocation(sid)
    earlier = build_sql_recorder(audit_engine, tmp_path / "other")
    assert earlier.record(first) is RecordOutcome.COMMITTED  # the session's seq 1
    earlier.close()
    args = [_url(audit_engine), str(journal), phase, sid, "40"]
    child = subprocess.Popen(
        [sys.executable, "-c", KILLED_IN_A_BATCH, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
        cwd=ROOT,
    )
    try:
        assert child.stdout is not None
        ids = child.stdout.readline().split()
        marker = child.stdout.readline().split()
        _kill(child)
    finally:
        if child.poll() is None:
            child.kill()
        _, err = child.communicate()
    assert marker == ["IN-BATCH", "40"], err[-2000:]
    assert len(ids) == 40
    in_database = [i for i, _ in stored(audit_engine, sid)]
    if phase == "before-commit":
        assert in_database == [first.id]  # the transaction died with the process
    else:
        assert in_database == [first.id, *ids]  # committed; still in the journal too
    assert journal_ids(journal) == ids

    successor = build_sql_recorder(audit_engine, journal)  # adopts and replays
    assert stored(audit_engine, sid) == [(i, n) for n, i in enumerate([first.id, *ids], 1)]
    assert successor.pending_count() == 0
    successor.close()
    assert journal_ids(journal) == []


EXITS_THROUGH_THE_CLI = """
import sys
from lookup_knowledge import create_app
from lookup_knowledge.adapters.audit import mover
from lookup_knowledge.adapters.cli.app import exit_now

mover.JournalMover.background_step = lambda self: 60.0  # only closing moves the journal
overrides = {
    "data-dir": sys.argv[1], "search.backend": "memory", "embedder.provider": "hashing",
    "audit.database-url": sys.argv[2], "audit.auto-migrate": False,
    "audit.journal-dir": sys.argv[3],
}
with create_app(overrides=overrides) as app:  # what every CLI command does
    ids = [app.lookup("what is moved at exit?", session_id=sys.argv[4])["invocationId"]
           for _ in range(5)]
print(" ".join(ids), flush=True)
exit_now(SystemExit(0))
"""


def test_an_exiting_cli_process_moves_its_journal(audit_engine: Engine, tmp_path: Path) -> None:
    """The container's Resources close the recorder when the app closes, and the CLI
    closes its app before ``exit_now`` (which skips the interpreter's teardown): what
    the background writer never moved is in the database when the process is gone."""
    sid = session()
    journal = tmp_path / "journal"
    args = [str(tmp_path / "data"), _url(audit_engine), str(journal), sid]
    done = subprocess.run(
        [sys.executable, "-c", EXITS_THROUGH_THE_CLI, *args],
        capture_output=True,
        text=True,
        env=_env(),
        cwd=ROOT,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    ids = done.stdout.split()
    assert len(ids) == 5
    assert stored(audit_engine, sid) == [(i, n) for n, i in enumerate(ids, 1)]
    assert list(journal.glob("journal-*.jsonl")) == []  # drained and removed at exit
