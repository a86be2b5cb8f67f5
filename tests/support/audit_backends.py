"""The audit store under test: the in-memory fake, SQLite (a temp file) or PostgreSQL (a
private schema), each as a (recorder, queries) pair over a migrated database."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
from sqlalchemy import Engine, delete

from lookup_knowledge.adapters.audit import (
    SqlAuditQueries,
    build_sql_recorder,
    create_audit_engine,
    upgrade_database,
)
from lookup_knowledge.adapters.audit.models import invocation_evidence, tool_invocation
from lookup_knowledge.application.ports import AuditQueries, ToolInvocationRecorder
from tests.fakes.audit import in_memory_audit

BACKENDS = ("memory", "sqlite", pytest.param("postgresql", marks=pytest.mark.postgres))


@dataclass
class AuditBackend:
    name: str
    recorder: ToolInvocationRecorder
    queries: AuditQueries
    engine: Engine | None = None


def sqlite_url(directory: Path) -> str:
    return f"sqlite:///{directory / 'audit.db'}"


def migrated_sqlite_engine(directory: Path, **kwargs: object) -> Engine:
    engine = create_audit_engine(sqlite_url(directory), **kwargs)  # type: ignore[arg-type]
    upgrade_database(engine)
    return engine


def clear(engine: Engine) -> None:
    with engine.begin() as conn:
        conn.execute(delete(invocation_evidence))
        conn.execute(delete(tool_invocation))


def sql_backend(name: str, engine: Engine, spool_dir: Path) -> AuditBackend:
    recorder = build_sql_recorder(engine, spool_dir, backoff_initial_s=0.0)
    return AuditBackend(name, recorder, SqlAuditQueries(engine), engine)


def memory_backend() -> AuditBackend:
    recorder, queries = in_memory_audit()
    return AuditBackend("memory", recorder, queries)
