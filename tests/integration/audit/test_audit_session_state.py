"""AuditSessionState during an outage: memory answers, the store is left alone for a
backoff interval (on an injected clock), then probed once; history is merged back."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from sqlalchemy import event

from lookup_knowledge.adapters.audit import AuditSessionState, SqlAuditQueries
from lookup_knowledge.domain.errors import AuditUnavailable
from tests.fakes.audit import InMemoryAuditQueries, in_memory_audit
from tests.support.audit_backends import migrated_sqlite_engine
from tests.support.audit_data import invocation, session


class FlakyQueries(InMemoryAuditQueries):
    """The in-memory store, switchable to "unreachable"; counts session_domains reads."""

    def __init__(self, queries: InMemoryAuditQueries) -> None:
        super().__init__(queries.store)
        self.available = True
        self.reads = 0

    def session_domains(self, session_id: str) -> tuple[str, ...]:
        self.reads += 1
        if not self.available:
            raise AuditUnavailable("audit database unavailable (test)")
        return super().session_domains(session_id)


class Clock:
    def __init__(self) -> None:
        self.now = 500.0

    def __call__(self) -> float:
        return self.now


def test_a_dead_store_is_not_asked_again_until_the_backoff_is_over() -> None:
    recorder, base = in_memory_audit()
    sid = session()
    recorder.record(invocation(sid, documents=["a#chunk-0"], category="billing"))
    queries = FlakyQueries(base)
    clock = Clock()
    state = AuditSessionState(queries, backoff_initial_s=2.0, backoff_max_s=5.0, monotonic=clock)
    queries.available = False

    # One lookup asks twice (retrieved_domains, then add_retrieved_domains): one read.
    assert state.retrieved_domains(sid) == ()
    state.add_retrieved_domains(sid, ["network"])
    assert queries.reads == 1
    for other in (session(), session()):  # other sessions too: the store is down
        state.retrieved_domains(other)
    assert queries.reads == 1
    assert state.retrieved_domains(sid) == ("network",)  # memory answers meanwhile

    clock.now += 2.5  # backoff over: one probe, fails, backoff doubles (2 -> 4)
    state.retrieved_domains(sid)
    state.retrieved_domains(sid)
    assert queries.reads == 2
    clock.now += 3.5
    state.retrieved_domains(sid)
    assert queries.reads == 2
    clock.now += 1.0
    state.retrieved_domains(sid)  # 4.5 s after the last failure: probe (fails)
    assert queries.reads == 3
    clock.now += 5.5  # capped at backoff_max_s = 5

    queries.available = True
    assert state.retrieved_domains(sid) == ("billing", "network")  # stored + memory
    assert queries.reads == 4
    state.retrieved_domains(sid)  # loaded: no more reads for this session
    assert queries.reads == 4
    fresh = session()
    state.retrieved_domains(fresh)
    state.retrieved_domains(session())  # the store is up again: every new session reads
    assert queries.reads == 6


def test_one_lookup_costs_a_dead_sql_store_at_most_one_connection_attempt(
    tmp_path: Path,
) -> None:
    engine = migrated_sqlite_engine(tmp_path)
    attempts = [0]
    down = [False]

    @event.listens_for(engine, "do_connect")
    def _connect(*_: object) -> None:
        attempts[0] += 1
        if down[0]:
            raise sqlite3.OperationalError("unable to open database file")

    clock = Clock()
    state = AuditSessionState(SqlAuditQueries(engine), backoff_initial_s=30.0, monotonic=clock)
    down[0] = True
    engine.dispose()
    sid = session()
    for _ in range(5):  # five lookups, each reading and extending the session's domains
        state.retrieved_domains(sid)
        state.add_retrieved_domains(sid, ["db"])
    assert attempts[0] == 1
    assert state.retrieved_domains(sid) == ("db",)

    down[0] = False
    clock.now += 31.0
    assert state.retrieved_domains(sid) == ("db",)
    assert attempts[0] == 2
    engine.dispose()


def test_backoff_settings_are_checked() -> None:
    _, queries = in_memory_audit()
    with pytest.raises(ValueError, match="backoff"):
        AuditSessionState(queries, backoff_initial_s=5.0, backoff_max_s=1.0)
