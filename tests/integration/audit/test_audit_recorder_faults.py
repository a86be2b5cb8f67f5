"""The recorder loses nothing: outages, restarts, corrupt spool lines, retries, poison.

Outages are real: on SQLite another connection holds the write lock (the recorder's
``BEGIN IMMEDIATE`` times out); on PostgreSQL the recorder talks through a TCP proxy that
the test cuts (pooled connections die, new ones are refused) and restores.
"""

from __future__ import annotations

import json
import logging
import shutil
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol

import pytest
from sqlalchemy import Connection, Engine, func, select, text
from sqlalchemy.engine import URL

from lookup_knowledge.adapters.audit import (
    SqlAuditQueries,
    SqlToolInvocationRecorder,
    create_audit_engine,
    upgrade_database,
)
from lookup_knowledge.adapters.audit.models import invocation_evidence, tool_invocation
from lookup_knowledge.adapters.audit.spool import Spool, decode, encode
from lookup_knowledge.application.audit import InvocationFilter, VerifyCitations
from lookup_knowledge.application.ports import RecordOutcome, ToolInvocation
from lookup_knowledge.domain.errors import AuditError
from tests.support.audit_data import invocation, session
from tests.support.postgres import POSTGRES, isolated_schema
from tests.support.tcp_proxy import TcpProxy, closed_port


class Outage(Protocol):
    def go_away(self) -> None: ...
    def come_back(self) -> None: ...


@dataclass
class Database:
    name: str
    engine: Engine  # what the recorder uses (may be cut)
    direct: Engine  # always reachable: for assertions
    outage: Outage


class SqliteLock:
    """Another process-like connection holding the write lock."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._conn: sqlite3.Connection | None = None

    def go_away(self) -> None:
        self._conn = sqlite3.connect(self._path, isolation_level=None, timeout=5)
        self._conn.execute("BEGIN EXCLUSIVE")

    def come_back(self) -> None:
        if self._conn is not None:
            self._conn.execute("ROLLBACK")
            self._conn.close()
            self._conn = None


class ProxyCut:
    def __init__(self, proxy: TcpProxy) -> None:
        self._proxy = proxy

    def go_away(self) -> None:
        self._proxy.stop()

    def come_back(self) -> None:
        self._proxy.start()


@pytest.fixture(scope="module")
def postgres_schema_url() -> Iterator[URL]:
    with isolated_schema("lk_fault") as url:
        upgrade_database(url)
        yield url


@pytest.fixture(params=["sqlite", POSTGRES])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Database]:
    if request.param == "sqlite":
        path = tmp_path / "audit.db"
        engine = create_audit_engine(f"sqlite:///{path}", sqlite_busy_timeout_ms=50)
        upgrade_database(engine)
        yield Database("sqlite", engine, engine, SqliteLock(path))
        engine.dispose()
        return
    url: URL = request.getfixturevalue("postgres_schema_url")
    proxy = TcpProxy(url.host or "127.0.0.1", url.port or 5432)
    proxy.start()
    engine = create_audit_engine(url.set(host="127.0.0.1", port=proxy.port), connect_timeout_s=2)
    direct = create_audit_engine(url)
    try:
        yield Database("postgresql", engine, direct, ProxyCut(proxy))
    finally:
        proxy.stop()
        engine.dispose()
        direct.dispose()


def recorder_for(engine: Engine, spool: Path, **kw: object) -> SqlToolInvocationRecorder:
    return SqlToolInvocationRecorder(engine, spool, backoff_initial_s=0.0, **kw)  # type: ignore[arg-type]


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


def spool_files(directory: Path) -> list[Path]:
    return sorted(directory.glob("spool-*.jsonl"))


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
    assert during == [RecordOutcome.SPOOLED] * 5
    assert after == [RecordOutcome.COMMITTED] * 2
    assert recorder.pending_count() == 0
    assert stored(db.direct, sid) == [(r.id, i) for i, r in enumerate(records, 1)]
    with db.direct.connect() as conn:
        assert evidence_count(conn, sid) == 20
    assert spool_files(tmp_path / "spool") == []  # the spool file is gone once empty
    report = VerifyCitations(SqlAuditQueries(db.direct), recorder).execute(sid, ["d5#chunk-0"])
    assert report.valid_ids == ("d5#chunk-0",)
    assert report.conclusive
    recorder.close()


def test_flush_waits_for_the_database_to_come_back(db: Database, tmp_path: Path) -> None:
    sid = session()
    recorder = recorder_for(db.engine, tmp_path / "spool")
    db.outage.go_away()
    try:
        assert recorder.record(invocation(sid)) is RecordOutcome.SPOOLED
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
    recorder = SqlToolInvocationRecorder(
        dead, tmp_path / "spool", backoff_initial_s=5.0, monotonic=lambda: now[0]
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


def test_startup_replays_a_spool_left_by_a_previous_process(db: Database, tmp_path: Path) -> None:
    sid = session()
    spool = tmp_path / "spool"
    dead = create_audit_engine(f"postgresql+psycopg://postgres@127.0.0.1:{closed_port()}/x")
    first = recorder_for(dead, spool)
    records = [invocation(sid, documents=[f"x{i}#chunk-0"]) for i in range(4)]
    assert [first.record(r) for r in records] == [RecordOutcome.SPOOLED] * 4
    first.close()  # the process ends with records still spooled
    dead.dispose()
    assert len(spool_files(spool)) == 1

    second = recorder_for(db.engine, spool)  # start-up replay

    assert second.pending_count() == 0
    assert stored(db.direct, sid) == [(r.id, i) for i, r in enumerate(records, 1)]
    assert spool_files(spool) == []
    second.close()


def test_a_live_spool_is_not_adopted_by_another_recorder(tmp_path: Path) -> None:
    spool = tmp_path / "spool"
    dead = create_audit_engine(f"postgresql+psycopg://postgres@127.0.0.1:{closed_port()}/x")
    first = recorder_for(dead, spool)
    first.record(invocation(session()))
    second = recorder_for(dead, spool)
    assert first.pending_count() == 1
    assert second.pending_count() == 0  # still owned by the first (it holds the lock)
    first.close()
    second.flush(timeout_s=0)  # flush adopts orphans
    assert second.pending_count() == 1
    second.close()
    dead.dispose()


def test_corrupt_and_truncated_spool_lines_are_reported_and_skipped(
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


def test_spool_line_codec_round_trips_and_detects_damage() -> None:
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


def test_a_record_committed_and_also_spooled_is_stored_once(db: Database, tmp_path: Path) -> None:
    """The commit reached the database but its acknowledgement did not: the recorder
    spooled it too. Replaying it must be a no-op."""
    sid = session()
    spool = tmp_path / "spool"
    r = invocation(sid, documents=["a#chunk-0"])
    direct = recorder_for(db.engine, tmp_path / "elsewhere")
    assert direct.record(r) is RecordOutcome.COMMITTED
    leftover = Spool(spool)
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


class StaleSeqRecorder(SqlToolInvocationRecorder):
    """Reads a stale max(seq) once, as a writer that skipped the session lock would."""

    stale_reads = 1

    def _next_seq(self, conn: Connection, invocation: ToolInvocation) -> int | None:
        seq = super()._next_seq(conn, invocation)
        if self.stale_reads and seq is not None:
            self.stale_reads -= 1
            return 1
        return seq


def test_a_seq_conflict_is_retried_not_spooled(db: Database, tmp_path: Path) -> None:
    sid = session()
    plain = recorder_for(db.engine, tmp_path / "a")
    first = invocation(sid)
    plain.record(first)
    racer = StaleSeqRecorder(db.engine, tmp_path / "b", backoff_initial_s=0.0)
    second = invocation(sid)

    assert racer.record(second) is RecordOutcome.COMMITTED
    assert racer.stale_reads == 0
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
        assert recorder.record(poison) is RecordOutcome.SPOOLED
        ok = invocation(sid)
        assert recorder.record(ok) is RecordOutcome.COMMITTED  # the queue moved on
    finally:
        _drop_poison_rule(db)
    assert recorder.pending_count() == 0
    assert recorder.rejected_count() == 1
    assert recorder.failure_count() == 2  # the write and the replay
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


def test_an_invalid_record_is_refused_but_kept(db: Database, tmp_path: Path) -> None:
    spool = tmp_path / "spool"
    recorder = recorder_for(db.engine, spool)
    bad = invocation("x" * 300, documents=["a#chunk-0"])  # session id too long for any store
    with pytest.raises(AuditError, match="session_id"):
        recorder.record(bad)
    assert recorder.failure_count() == 1
    assert recorder.rejected_count() == 1
    kept = json.loads((spool / "rejected.jsonl").read_text().splitlines()[0])
    assert kept["source"] == "record"
    assert bad.id in kept["line"]
    recorder.close()


def test_an_unwritable_spool_raises_audit_error(tmp_path: Path) -> None:
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("x")
    dead = create_audit_engine(f"postgresql+psycopg://postgres@127.0.0.1:{closed_port()}/x")
    with pytest.raises(AuditError):
        SqlToolInvocationRecorder(dead, not_a_dir)

    spool = tmp_path / "spool"
    recorder = SqlToolInvocationRecorder(dead, spool, backoff_initial_s=0.0)
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
