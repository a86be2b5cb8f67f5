"""Many writers, one session: every record stored once, seq 1..n without gaps."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, select
from sqlalchemy.engine import URL

from lookup_knowledge.adapters.audit import (
    SqlToolInvocationRecorder,
    build_sql_recorder,
    create_audit_engine,
    upgrade_database,
)
from lookup_knowledge.adapters.audit.models import tool_invocation
from lookup_knowledge.application.ports import RecordOutcome, ToolInvocation
from tests.support.audit_data import invocation, session

THREADS = 8
PER_THREAD = 25


@pytest.fixture
def engines(empty_audit_url: str | URL) -> Iterator[tuple[Engine, Engine]]:
    """Two independent engines (two "processes") on one database (``empty_audit_url``, from
    tests/conftest.py: SQLite and PostgreSQL)."""
    pool = {} if isinstance(empty_audit_url, str) else {"pool_size": THREADS}  # str: SQLite
    a = create_audit_engine(empty_audit_url, **pool)
    b = create_audit_engine(empty_audit_url, **pool)
    upgrade_database(a)
    yield a, b
    a.dispose()
    b.dispose()


def run_writers(
    recorders: list[SqlToolInvocationRecorder], sid: str
) -> tuple[list[ToolInvocation], list[RecordOutcome], list[BaseException]]:
    records = [invocation(sid, documents=[f"t{i}#chunk-0"]) for i in range(THREADS * PER_THREAD)]
    outcomes: list[RecordOutcome] = []
    errors: list[BaseException] = []
    lock = threading.Lock()
    start = threading.Barrier(THREADS)

    def work(n: int) -> None:
        recorder = recorders[n % len(recorders)]
        start.wait()
        for r in records[n * PER_THREAD : (n + 1) * PER_THREAD]:
            try:
                outcome = recorder.record(r)
            except BaseException as error:
                with lock:
                    errors.append(error)
            else:
                with lock:
                    outcomes.append(outcome)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    return records, outcomes, errors


def stored(engine: Engine, sid: str) -> list[tuple[str, int]]:
    with engine.connect() as conn:
        rows = conn.execute(
            select(tool_invocation.c.id, tool_invocation.c.seq).where(
                tool_invocation.c.session_id == sid
            )
        ).all()
    return [(str(r.id), r.seq) for r in rows]


def test_threads_of_one_recorder_write_one_session_gap_free(
    engines: tuple[Engine, Engine], tmp_path: Path
) -> None:
    engine, _ = engines
    recorder = build_sql_recorder(engine, tmp_path / "spool", backoff_initial_s=0.0)
    sid = session()

    records, outcomes, errors = run_writers([recorder], sid)

    assert errors == []
    assert outcomes == [RecordOutcome.COMMITTED] * len(records)
    rows = stored(engine, sid)
    assert sorted(seq for _, seq in rows) == list(range(1, len(records) + 1))
    assert sorted(i for i, _ in rows) == sorted(r.id for r in records)
    assert recorder.failure_count() == 0
    recorder.close()


def test_two_recorders_on_separate_engines_share_a_session_gap_free(
    engines: tuple[Engine, Engine], tmp_path: Path
) -> None:
    a, b = engines
    recorders = [
        build_sql_recorder(a, tmp_path / "spool-a", backoff_initial_s=0.0),
        build_sql_recorder(b, tmp_path / "spool-b", backoff_initial_s=0.0),
    ]
    sid = session()

    records, outcomes, errors = run_writers(recorders, sid)

    assert errors == []
    assert outcomes == [RecordOutcome.COMMITTED] * len(records)
    rows = stored(a, sid)
    assert sorted(seq for _, seq in rows) == list(range(1, len(records) + 1))
    assert len({i for i, _ in rows}) == len(records)
    # Each writer's own records keep their order in the session.
    seq_of = dict(rows)
    for n in range(THREADS):
        mine = records[n * PER_THREAD : (n + 1) * PER_THREAD]
        seqs = [seq_of[r.id] for r in mine]
        assert seqs == sorted(seqs)
    for r in recorders:
        r.close()
