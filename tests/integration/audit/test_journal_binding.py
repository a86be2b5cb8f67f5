"""The journal is bound to its database, and ``audit.durability=database`` commits before
the lookup returns.

Each journal line names the database it is for (a hash of the URL without the
password): a process configured for another database never moves it there, it leaves
the journal and reports it (a warning, the health check's spool line). With
``commit_before_return`` a record is in the database when ``record`` returns, or the
recorder raises ``AuditNotRecorded`` and keeps nothing (the lookup is not answered).
Both on SQLite and PostgreSQL (the ``db`` fixture)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, select

from lookup_knowledge import create_app
from lookup_knowledge.adapters.audit import (
    SqlToolInvocationRecorder,
    build_sql_recorder,
    create_audit_engine,
    upgrade_database,
)
from lookup_knowledge.adapters.audit.engine import database_key
from lookup_knowledge.adapters.audit.journal_format import decode_bound, encode
from lookup_knowledge.adapters.audit.models import tool_invocation
from lookup_knowledge.adapters.http import create_http_app
from lookup_knowledge.application.ports import InvocationFilter, RecordOutcome
from lookup_knowledge.domain.errors import AuditNotRecorded, AuditUnavailable
from tests.support.audit_data import invocation, session
from tests.support.audit_outage import Database
from tests.support.http import LOCAL
from tests.support.tcp_proxy import closed_port


def database_down() -> None:
    raise AuditUnavailable("the audit database is unreachable (test)")


def recorder(engine: Engine, spool: Path, **kw: object) -> SqlToolInvocationRecorder:
    kw.setdefault("background_drain_s", None)
    return build_sql_recorder(engine, spool, backoff_initial_s=0.0, **kw)  # type: ignore[arg-type]


def stored_ids(engine: Engine, sid: str) -> list[str]:
    with engine.connect() as conn:
        rows = conn.execute(
            select(tool_invocation.c.id)
            .where(tool_invocation.c.session_id == sid)
            .order_by(tool_invocation.c.seq)
        ).scalars()
        return [str(r) for r in rows]


def journal_files(spool: Path) -> list[Path]:
    return sorted(spool.glob("journal-*.jsonl"))


@pytest.fixture
def other(tmp_path: Path) -> Iterator[Engine]:
    """Another audit database (a SQLite file of its own)."""
    engine = create_audit_engine(f"sqlite:///{tmp_path / 'other' / 'audit.db'}")
    upgrade_database(engine)
    yield engine
    engine.dispose()


def test_a_journal_for_another_database_is_never_moved_into_this_one(
    db: Database, other: Engine, tmp_path: Path
) -> None:
    sid = session()
    spool = tmp_path / "spool"
    first = recorder(other, spool, prepare=database_down)  # its database is away
    records = [invocation(sid, documents=[f"x{i}#chunk-0"]) for i in range(3)]
    assert [first.record(r) for r in records] == [RecordOutcome.JOURNALED_OFFLINE] * 3
    first.close()
    [left] = journal_files(spool)

    here = recorder(db.engine, spool)  # another database, the same journal directory
    assert here.flush(timeout_s=0)  # nothing of its own pending; the other's not waited for
    assert stored_ids(db.direct, sid) == []
    assert journal_files(spool) == [left]  # left where it was, untouched
    assert here.stranded_count() == 3
    assert here.pending_count() == 0
    here.close()

    owner = recorder(other, spool)  # the process configured for that database moves it
    assert stored_ids(other, sid) == [r.id for r in records]
    assert owner.stranded_count() == 0
    owner.close()
    assert journal_files(spool) == []


def test_a_live_journal_of_another_database_is_not_pending_here(
    db: Database, other: Engine, tmp_path: Path
) -> None:
    """A reader is not held up (nor told "inconclusive") by another database's records."""
    sid = session()
    spool = tmp_path / "spool"
    writer = recorder(other, spool, prepare=database_down)
    writer.record(invocation(sid, documents=["a#chunk-0"]))
    reader = recorder(db.engine, spool)
    assert reader.pending_count(sid) == 0
    assert reader.flush(sid, timeout_s=0)
    writer.close()
    reader.close()


@pytest.mark.parametrize("adopt", [False, True], ids=["left", "adopted"])
def test_a_journal_from_before_the_binding_is_left_unless_adoption_is_asked(
    db: Database, tmp_path: Path, adopt: bool
) -> None:
    sid = session()
    spool = tmp_path / "spool"
    spool.mkdir(mode=0o700)
    records = [invocation(sid, documents=[f"y{i}#chunk-0"]) for i in range(2)]
    old = spool / "spool-00000000000000000000000000000009.jsonl"
    old.write_text("".join(encode(r) for r in records), encoding="ascii")  # no "db"

    here = recorder(db.engine, spool, adopt_unbound_journals=adopt)
    if adopt:
        assert stored_ids(db.direct, sid) == [r.id for r in records]
        assert not old.exists()
    else:
        assert stored_ids(db.direct, sid) == []
        assert old.exists()
        assert here.stranded_count() == 2
    here.close()


def test_journal_lines_name_their_database_without_the_password() -> None:
    base = "postgresql+psycopg://lk:secret@db.internal:5432/audit"
    key = database_key(base)
    assert key == database_key("postgresql://lk:other-password@db.internal:5432/audit")
    assert key == database_key("postgresql+psycopg://lk@db.internal:5432/audit")
    assert "secret" not in key
    for different in (
        "postgresql+psycopg://lk:secret@db2.internal:5432/audit",
        "postgresql+psycopg://lk:secret@db.internal:5432/audit2",
        "postgresql+psycopg://lk:secret@db.internal:5432/audit?options=-csearch_path%3Dother",
        "sqlite:////var/lib/lk/audit.db",
    ):
        assert database_key(different) != key, different
    line = encode(invocation(session()), database=key)
    assert json.loads(line.split(" ", 1)[1])["db"] == key
    assert decode_bound(line)[1] == key
    assert "secret" not in line


def test_a_record_journalled_for_an_unreachable_postgresql_stays_out_of_the_default_sqlite(
    tmp_path: Path,
) -> None:
    """The reported case: a process configured for PostgreSQL journals while it is
    unreachable; the next process on the same data dir, with the default configuration
    (SQLite in the data dir), must not write those records into its audit.db."""
    data = tmp_path / "data"
    common = {"data-dir": str(data), "search.backend": "memory", "embedder.provider": "hashing"}
    unreachable = f"postgresql+psycopg://postgres@127.0.0.1:{closed_port()}/audit"
    with create_app(overrides={**common, "audit.database-url": unreachable}) as first:
        answered = first.lookup("how do I fail over", session_id="pg-outage")
    assert answered["invocationId"]

    with create_app(overrides=common) as default:
        assert default.audit.list_invocations(InvocationFilter(session_id="pg-outage")).items == ()
        spool = {c.name: c for c in default.health().components}["audit journal"]
        assert "1 record(s) in journals of another audit database" in spool.detail
    assert len(journal_files(data / "audit-journal")) == 1  # left for the PostgreSQL process


# ----------------------------------------------------------- audit.durability=database


def test_commit_before_return_stores_the_record_before_record_returns(
    db: Database, tmp_path: Path
) -> None:
    sid = session()
    committing = recorder(db.engine, tmp_path / "spool", commit_before_return=True)
    record = invocation(sid, documents=["a#chunk-0"])
    assert committing.record(record) is RecordOutcome.COMMITTED
    assert stored_ids(db.direct, sid) == [record.id]  # no flush: it is there already
    assert committing.pending_count() == 0
    assert journal_files(tmp_path / "spool") == []
    committing.close()


def test_commit_before_return_raises_and_keeps_nothing_when_the_database_is_away(
    db: Database, tmp_path: Path
) -> None:
    sid = session()
    committing = recorder(db.engine, tmp_path / "spool", commit_before_return=True)
    db.outage.go_away()
    try:
        with pytest.raises(AuditNotRecorded):
            committing.record(invocation(sid, documents=["a#chunk-0"]))
    finally:
        db.outage.come_back()
    assert committing.pending_count() == 0  # not journalled: it was never answered
    assert committing.failure_count() == 1
    after = invocation(sid, documents=["b#chunk-0"])
    assert committing.record(after) is RecordOutcome.COMMITTED  # back: committed again
    assert stored_ids(db.direct, sid) == [after.id]
    committing.close()


def test_a_lookup_under_durability_database_is_not_answered_unless_committed(
    tmp_path: Path,
) -> None:
    common = {
        "search.backend": "memory",
        "embedder.provider": "hashing",
        "audit.durability": "database",
    }
    unreachable = f"postgresql+psycopg://postgres@127.0.0.1:{closed_port()}/audit"
    with create_app(
        overrides={**common, "data-dir": str(tmp_path / "a"), "audit.database-url": unreachable}
    ) as app:
        with pytest.raises(AuditNotRecorded):
            app.lookup("how do I fail over", session_id="durable-1")
        response = TestClient(create_http_app(app), base_url=LOCAL).post(
            "/v1/lookup", json={"query": "how do I fail over", "session_id": "durable-1"}
        )
        assert response.status_code == 503
        assert response.json()["code"] == "audit_not_recorded"
        assert app.recorder.pending_count() == 0
    with create_app(overrides={**common, "data-dir": str(tmp_path / "b")}) as app:
        answered = app.lookup_result("how do I fail over", session_id="durable-2")
        assert answered.record_outcome is RecordOutcome.COMMITTED
