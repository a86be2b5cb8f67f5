"""What a record holds comes back from the store as it was cleaned, whichever JSON
encoder wrote it (orjson, or the standard library for what orjson refuses) and whether
it was moved live or replayed from its journal line."""

from __future__ import annotations

import uuid
from dataclasses import replace
from pathlib import Path

from sqlalchemy import select

from lookup_knowledge.adapters.audit import SqlAuditQueries, build_sql_recorder
from lookup_knowledge.adapters.audit.chain import AuditChain
from lookup_knowledge.adapters.audit.codec import clean_invocation
from lookup_knowledge.adapters.audit.models import invocation_evidence, tool_invocation
from lookup_knowledge.adapters.audit.sql_writer import evidence_rows, invocation_row
from lookup_knowledge.adapters.audit.trail import SqlAuditTrail
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


def test_a_batch_stores_every_column_the_orm_rows_hold_and_chains_it_verifiably(
    db: Database, tmp_path: Path
) -> None:
    """On PostgreSQL a batch goes by COPY from rows built once (booleans as 0/1, the
    details as their canonical text); what is stored is what the ORM's rows hold, and
    ``verify-log`` rehashes it to the digests the writer chained."""
    sid = session("columns")
    odd = {"version": 1, "big": 1e16, "neg": -0.0, "order": {"b": 1, "a": [2, "é"]}}
    records = [
        replace(invocation(sid, documents=["d#chunk-1", "d#chunk-2"]), retrieval_details=DETAILS),
        replace(invocation(sid, documents=["e#chunk-0"]), retrieval_details=odd),
        invocation(sid),  # no evidence rows
    ]
    with db.direct.begin() as conn:  # the module's other records were never chained
        for table in reversed(tool_invocation.metadata.sorted_tables):
            conn.execute(table.delete())
    chain = AuditChain(db.engine, AuditChain.key_file(tmp_path / "key.pem"))
    recorder = build_sql_recorder(db.engine, tmp_path / "journal", chain=chain)
    try:
        for record in records:
            recorder.record(record)
        assert recorder.flush()
    finally:
        recorder.close()
    with db.direct.connect() as conn:
        for seq, record in enumerate(records, 1):
            clean = clean_invocation(record)
            key = uuid.UUID(clean.id)
            row = conn.execute(select(tool_invocation).where(tool_invocation.c.id == key))
            assert dict(row.mappings().one()) | {"recorded_at": None} == invocation_row(
                clean, seq
            ) | {"recorded_at": None}
            stored = conn.execute(
                select(invocation_evidence)
                .where(invocation_evidence.c.invocation_id == key)
                .order_by(invocation_evidence.c.rank)
            )
            assert [dict(r) for r in stored.mappings()] == evidence_rows(clean)
    report = SqlAuditTrail(db.direct, chain).verify_log()
    assert report.intact, report.problem
    assert report.records == len(records)
