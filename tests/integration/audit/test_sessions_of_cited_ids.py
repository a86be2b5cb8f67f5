"""``SqlSessionEvidence.newest_sessions_returning`` (SQLite and PostgreSQL): the sessions
of one id prefix that were shown each cited id, newest (greatest id) first, as the port's
default over ``sessions_returning`` finds them; the prefix is a prefix, not a pattern."""

from __future__ import annotations

import os

from sqlalchemy import Engine

from lookup_knowledge.adapters.audit import build_sql_recorder
from lookup_knowledge.adapters.audit.answer_checks import SqlSessionEvidence
from lookup_knowledge.application.ports import SessionEvidenceReader
from tests.support.audit_data import invocation


def test_the_newest_sessions_of_a_prefix_that_showed_each_id(
    audit_engine: Engine, tmp_path: os.PathLike[str]
) -> None:
    run = os.urandom(4).hex()
    prefix = f"mcp-call_{run}-"
    sessions = [f"{prefix}{n:02d}" for n in range(1, 4)]
    records = [
        invocation(sessions[0], documents=("kb/a.md#chunk-0",)),
        invocation(sessions[1], documents=("kb/a.md#chunk-0", "kb/b.md#chunk-0")),
        invocation(sessions[2], documents=("kb/b.md#chunk-0",)),
        # "_" and "%" are literal: a LIKE pattern would take this session too.
        invocation(f"mcp-callX{run}-99", documents=("kb/a.md#chunk-0",)),
        invocation(f"rest-{run}", documents=("kb/a.md#chunk-0",)),
    ]
    recorder = build_sql_recorder(audit_engine, tmp_path, write_behind=False)
    try:
        for record in records:
            recorder.record(record)
    finally:
        recorder.close()
    reader = SqlSessionEvidence(audit_engine)
    cited = ["kb/a.md#chunk-0", "kb/b.md#chunk-0", "kb/never.md#chunk-0"]
    found = reader.newest_sessions_returning(cited, prefix)
    assert found == {
        "kb/a.md#chunk-0": (sessions[1], sessions[0]),
        "kb/b.md#chunk-0": (sessions[2], sessions[1]),
    }
    assert found == SessionEvidenceReader.newest_sessions_returning(reader, cited, prefix)
    assert reader.newest_sessions_returning(cited, prefix, limit=1)["kb/a.md#chunk-0"] == (
        sessions[1],
    )
