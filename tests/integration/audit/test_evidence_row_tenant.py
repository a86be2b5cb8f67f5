"""Which copy of a block was shown: ``invocation_evidence.row_tenant`` (revision 0005) on
SQLite and PostgreSQL, through the inline writer (executemany on SQLite, COPY on
PostgreSQL), the write-behind journal, the readers, and a 0004 store upgraded with its
rows (NULL: not recorded) and downgraded again."""

from __future__ import annotations

import json
import zlib
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import Engine, func, insert, inspect, select

from lookup_knowledge.adapters.audit import (
    SqlAuditQueries,
    build_sql_recorder,
    current_revision,
    downgrade_database,
    head_revision,
    upgrade_database,
)
from lookup_knowledge.adapters.audit.answer_checks import SqlSessionEvidence
from lookup_knowledge.adapters.audit.journal_format import decode, encode
from lookup_knowledge.adapters.audit.models import invocation_evidence, tool_invocation
from lookup_knowledge.adapters.audit.sql_writer import evidence_rows, invocation_row
from lookup_knowledge.application.ports import RecordOutcome, ToolInvocation
from lookup_knowledge.domain.errors import AuditError
from tests.support.audit_data import BASE_TIME, invocation, session

DOCS = ("kb/dns.md#chunk-0", "kb-public/handbook.md#chunk-0", "kb/old.md#chunk-0")
#: acme's own row, a row without a tenant, one not recorded (a record from before 0005).
TENANTS = ("acme", "", None)
BEFORE_0005 = "0004_access_control"


def with_row_tenants(record: ToolInvocation, tenants: tuple[str | None, ...]) -> ToolInvocation:
    evidence = tuple(
        replace(e, row_tenant=t) for e, t in zip(record.evidence, tenants, strict=True)
    )
    return replace(record, principal_tenant="acme", access_mode="enforced", evidence=evidence)


def read_back(engine: Engine, record: ToolInvocation) -> tuple[list[str | None], list[str | None]]:
    """(row tenants from ``get_invocation``, from ``shown_blocks``) in rank order."""
    detail = SqlAuditQueries(engine).get_invocation(record.id)
    shown = SqlSessionEvidence(engine).shown_blocks(
        record.session_id, list(DOCS), BASE_TIME + timedelta(days=365)
    )
    blocks = sorted((b for bs in shown.values() for b in bs), key=lambda b: b.rank)
    return [e.row_tenant for e in detail.evidence], [b.row_tenant for b in blocks]


@pytest.mark.parametrize("write_behind", [False, True], ids=["inline", "write-behind"])
def test_the_row_tenant_is_stored_and_read_back(
    audit_engine: Engine, tmp_path: Path, write_behind: bool
) -> None:
    record = with_row_tenants(invocation(session(), documents=DOCS), TENANTS)
    recorder = build_sql_recorder(
        audit_engine,
        tmp_path / "journal",
        backoff_initial_s=0.0,
        write_behind=write_behind,
        background_drain_s=1.0 if write_behind else None,
    )
    try:
        outcome = recorder.record(record)
        assert outcome is (RecordOutcome.JOURNALED if write_behind else RecordOutcome.COMMITTED)
        assert recorder.flush(record.session_id)
    finally:
        recorder.close()
    from_detail, from_blocks = read_back(audit_engine, record)
    assert from_detail == list(TENANTS)
    assert from_blocks == list(TENANTS)
    # '' (a row without a tenant) and NULL (not recorded) stay apart in the column
    with audit_engine.connect() as conn:
        column = conn.execute(
            select(invocation_evidence.c.row_tenant)
            .where(invocation_evidence.c.session_id == record.session_id)
            .order_by(invocation_evidence.c.rank)
        ).scalars()
        assert list(column) == list(TENANTS)


def test_a_0004_store_with_rows_upgrades_to_null_row_tenants_and_downgrades(
    empty_audit_url: object, tmp_path: Path
) -> None:
    from lookup_knowledge.adapters.audit import create_audit_engine

    engine = create_audit_engine(empty_audit_url)  # type: ignore[arg-type]
    try:
        assert upgrade_database(engine, BEFORE_0005) == BEFORE_0005
        old = with_row_tenants(invocation(session(), documents=DOCS), TENANTS)
        with engine.begin() as conn:  # written by a 0004 build: no row_tenant column
            conn.execute(insert(tool_invocation), [invocation_row(old, 1)])
            rows = [{k: v for k, v in r.items() if k != "row_tenant"} for r in evidence_rows(old)]
            conn.execute(insert(invocation_evidence), rows)

        assert upgrade_database(engine) == head_revision()
        assert read_back(engine, old) == ([None] * 3, [None] * 3)  # not recorded
        new = with_row_tenants(invocation(old.session_id, documents=DOCS), TENANTS)
        recorder = build_sql_recorder(engine, tmp_path / "j", background_drain_s=None)
        try:
            assert recorder.record(new) is RecordOutcome.COMMITTED
        finally:
            recorder.close()
        assert read_back(engine, new)[0] == list(TENANTS)

        assert downgrade_database(engine, BEFORE_0005) == BEFORE_0005
        columns = {c["name"] for c in inspect(engine).get_columns("invocation_evidence")}
        assert "row_tenant" not in columns
        assert "shown_text" in columns
        with engine.connect() as conn:
            count = conn.execute(select(func.count()).select_from(invocation_evidence)).scalar()
        assert count == 2 * len(DOCS)  # the rows stay, without the column
        assert upgrade_database(engine) == head_revision()
        assert current_revision(engine) == head_revision()
        assert read_back(engine, new)[0] == [None] * 3  # a downgrade drops what it held
    finally:
        engine.dispose()


def _line(body: dict[str, object]) -> str:
    text = json.dumps(body, ensure_ascii=True, separators=(",", ":"), allow_nan=False)
    return f"{zlib.crc32(text.encode('ascii')):08x} {text}\n"


def test_the_journal_keeps_the_row_tenant_and_reads_lines_written_before_it() -> None:
    record = with_row_tenants(invocation(session(), documents=DOCS), TENANTS)
    line = encode(record)
    assert decode(line) == record
    assert [e.row_tenant for e in decode(line).evidence] == list(TENANTS)
    # A line journaled by a build before revision 0005 has no row_tenant: not recorded.
    body = json.loads(line.partition(" ")[2])
    for item in body["invocation"]["evidence"]:
        del item["row_tenant"]
    old = decode(_line(body))
    assert [e.row_tenant for e in old.evidence] == [None] * 3
    assert replace(old, evidence=record.evidence) == record


@pytest.mark.parametrize("bad", ["acme ", " acme", "ac\x00me", "ac\nme", "x" * 129, 7], ids=repr)
def test_a_row_tenant_no_document_can_have_is_refused(bad: object) -> None:
    record = invocation(session(), documents=DOCS[:1])
    with pytest.raises(AuditError, match="row_tenant"):
        replace(record, evidence=(replace(record.evidence[0], row_tenant=bad),))
