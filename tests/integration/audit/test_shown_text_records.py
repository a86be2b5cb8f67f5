"""The shown text travels with a record: through the spool (and from spool lines written
before it existed), into the SQL store, and not at all with ``keep_shown_text`` off."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from lookup_knowledge.adapters.audit import (
    SqlAuditQueries,
    build_sql_recorder,
)
from lookup_knowledge.adapters.audit.codec import from_json, to_json, without_shown_text
from lookup_knowledge.application.ports import ToolInvocation
from tests.support.audit_backends import migrated_sqlite_engine
from tests.support.audit_data import invocation, session


def with_text(record: ToolInvocation) -> ToolInvocation:
    return replace(
        record,
        evidence=tuple(
            replace(e, shown_text=f"Refunds take 14 days.\x00 ({e.document_id})")
            for e in record.evidence
        ),
    )


def test_the_journal_codec_keeps_the_text_and_reads_lines_written_before_it() -> None:
    record = with_text(invocation(session(), documents=["refunds#chunk-0"]))
    assert from_json(json.loads(json.dumps(to_json(record)))) == record
    old_line = to_json(record)
    for item in old_line["evidence"]:
        del item["shown_text"]
    assert from_json(old_line).evidence[0].shown_text is None
    assert without_shown_text(record).evidence[0].shown_text is None


def test_the_sql_store_keeps_the_text_cleaned_or_only_the_hash(tmp_path: Path) -> None:
    engine = migrated_sqlite_engine(tmp_path)
    queries = SqlAuditQueries(engine)
    kept = with_text(invocation(session(), documents=["refunds#chunk-0"]))
    hashed = with_text(invocation(session(), documents=["refunds#chunk-1"]))
    keeping = build_sql_recorder(engine, tmp_path / "spool-a", background_drain_s=None)
    dropping = build_sql_recorder(
        engine, tmp_path / "spool-b", background_drain_s=None, keep_shown_text=False
    )
    try:
        keeping.record(kept)
        dropping.record(hashed)
        (shown,) = queries.get_invocation(kept.id).evidence
        (only_hash,) = queries.get_invocation(hashed.id).evidence
    finally:
        keeping.close()
        dropping.close()
        engine.dispose()
    assert shown.shown_text == "Refunds take 14 days.\ufffd (refunds#chunk-0)"  # NUL cleaned
    assert shown.content_hash == kept.evidence[0].content_hash
    assert only_hash.shown_text is None
    assert only_hash.content_hash == hashed.evidence[0].content_hash
