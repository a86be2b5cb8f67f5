"""What a record holds comes back from the store as it was cleaned, whichever JSON
encoder wrote it (orjson, or the standard library for what orjson refuses) and whether
it was moved live or replayed from its journal line."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from lookup_knowledge.adapters.audit import SqlAuditQueries, build_sql_recorder
from lookup_knowledge.adapters.audit.codec import clean_invocation
from tests.support.audit_data import invocation, session
from tests.support.audit_outage import Database

DETAILS = {
    "version": 1,
    "huge": 2**70,  # beyond 64 bits: orjson refuses it
    "small": 1e-7,
    "text": "é 数 \U0001f600 tab\tnewline\n",
    "nul": "a\x00b",
    "lone": "x\ud800y",
    "nested": {"list": [1, 2.5, None, True, "z"], "tuple": (1, 2)},
}


def test_details_written_by_either_encoder_read_back_as_cleaned(
    db: Database, tmp_path: Path
) -> None:
    sid = session("values")
    live = replace(invocation(sid, documents=["d#chunk-1"]), retrieval_details=DETAILS)
    ascii_only = replace(
        invocation(sid, documents=["d#chunk-2"]), retrieval_details={"version": 1, "n": 3}
    )
    recorder = build_sql_recorder(db.engine, tmp_path / "journal")
    try:
        for record in (live, ascii_only):
            recorder.record(record)
        assert recorder.flush()
    finally:
        recorder.close()
    queries = SqlAuditQueries(db.direct)
    for record in (live, ascii_only):
        stored = queries.get_invocation(record.id)
        expected = clean_invocation(record)
        assert dict(stored.retrieval_details) == expected.retrieval_details
        assert stored.evidence == expected.evidence


def test_a_journal_line_replayed_stores_the_same_values_as_a_live_move(
    db: Database, tmp_path: Path
) -> None:
    sid = session("replay")
    record = replace(invocation(sid, documents=["d#chunk-1"]), retrieval_details=DETAILS)
    journal = tmp_path / "journal"
    db.outage.go_away()
    try:
        first = build_sql_recorder(
            db.engine, journal, replay_on_start=False, backoff_initial_s=30.0
        )
        first.record(record)  # kept in the journal: the database is away
        first.close()
    finally:
        db.outage.come_back()
    second = build_sql_recorder(db.engine, journal)  # adopts the line and moves it
    try:
        assert second.flush()
    finally:
        second.close()
    stored = SqlAuditQueries(db.direct).get_invocation(record.id)
    assert dict(stored.retrieval_details) == clean_invocation(record).retrieval_details
