"""The tamper-evident trail on SQLite and PostgreSQL: records are chained as they are
stored, checkpoints signed; every edit made behind the store's back with raw SQL is
caught by ``verify_log``, which names the record; bundles round-trip and an edited one
fails; prune keeps the trail verifiable."""

from __future__ import annotations

import dataclasses
import json
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, text

from lookup_knowledge.adapters.audit import build_sql_recorder
from lookup_knowledge.adapters.audit.answer_checks import SqlAnswerCheckStore
from lookup_knowledge.adapters.audit.chain import AuditChain
from lookup_knowledge.adapters.audit.recorder import SqlToolInvocationRecorder
from lookup_knowledge.adapters.audit.trail import SqlAuditTrail
from lookup_knowledge.adapters.signing import TrailSigner, TrailVerifyKey
from lookup_knowledge.application.ports import ToolInvocation
from lookup_knowledge.application.ports.answer_check import (
    AnswerCheck,
    AnswerFormat,
    CheckedClaim,
)
from lookup_knowledge.domain.answer_check import CitationStatus, CitationVerdict, Verdict
from lookup_knowledge.domain.errors import AuditError, InvalidInputError
from lookup_knowledge.domain.trail import (
    FORMATS,
    ProblemKind,
    leaf_hash,
    link_hash,
)
from lookup_knowledge.domain.trail_checks import verify_bundle
from tests.support.audit_data import invocation, session


@dataclasses.dataclass
class Trail:
    engine: Engine
    chain: AuditChain
    recorder: SqlToolInvocationRecorder
    checks: SqlAnswerCheckStore
    trail: SqlAuditTrail
    key_file: Path

    @property
    def sqlite(self) -> bool:
        return self.engine.dialect.name == "sqlite"

    def rid(self, record_id: str) -> object:
        """A record id as the database stores it (SQLite: 32 hex digits)."""
        return uuid.UUID(record_id).hex if self.sqlite else uuid.UUID(record_id)

    def sql(self, statement: str, **params: Any) -> None:
        with self.engine.begin() as conn:
            conn.execute(text(statement), params)


@pytest.fixture
def trail(audit_engine: Engine, tmp_path: Path) -> Iterator[Trail]:
    key_file = tmp_path / "key.pem"
    signer = TrailSigner.load_or_create(key_file)
    chain = AuditChain(audit_engine, signer, every=1000, interval_s=3600)
    recorder = build_sql_recorder(audit_engine, tmp_path / "journal", chain=chain)
    checks = SqlAnswerCheckStore(audit_engine, chain)
    trail = SqlAuditTrail(audit_engine, chain, barrier=lambda s: recorder.flush(s))
    yield Trail(audit_engine, chain, recorder, checks, trail, key_file)
    recorder.close()


def shown(record: ToolInvocation) -> ToolInvocation:
    evidence = tuple(
        dataclasses.replace(e, shown_text=f"block {e.rank}: refunds take 5 days")
        for e in record.evidence
    )
    return dataclasses.replace(record, evidence=evidence)


def record_session(t: Trail, count: int = 3) -> tuple[str, list[ToolInvocation]]:
    s = session("trail")
    made = [
        shown(invocation(s, documents=[f"d{i}#chunk-0", f"d{i}#chunk-1"], query=f"query {i}"))
        for i in range(count)
    ]
    for record in made:
        t.recorder.record(record)
    assert t.recorder.flush()
    return s, made


def check(t: Trail, session_id: str, verdict: Verdict = Verdict.UNSUPPORTED) -> AnswerCheck:
    made = AnswerCheck(
        id=str(uuid.uuid4()),
        session_id=session_id,
        step_id="answer",
        answer_format=AnswerFormat.TEXT,
        answer_text="Refunds take 5 days [d0#chunk-0].",
        answer_hash="a" * 64,
        verdict=verdict,
        claims=(
            CheckedClaim(
                index=0,
                text="Refunds take 5 days",
                start=0,
                end=19,
                citations=(CitationVerdict("d0#chunk-0", CitationStatus.VALID),),
                verdict=verdict,
                reasons=("number missing",),
                signals={"coverage": 0.5, "big": 1.5e17, "zero": -0.0},
            ),
        ),
        checker_version="1",
        created_at=datetime.now(UTC),
    )
    t.checks.save(made)
    return made


def broken(t: Trail, **kwargs: Any) -> Any:
    report = t.trail.verify_log(**kwargs)
    assert report.problem is not None, "the edit went unnoticed"
    return report.problem


def test_an_untouched_trail_verifies_with_its_checkpoint(trail: Trail) -> None:
    s, _made = record_session(trail)
    check(trail, s)
    trail.recorder.flush()
    report = trail.trail.verify_log()
    assert report.intact, report.problem
    assert report.records == report.content_checked == 4
    assert report.last_checkpoint is not None
    assert report.last_checkpoint.position == 4
    assert report.unsigned == 0
    assert verify_with_public_key(trail).intact


def verify_with_public_key(t: Trail) -> Any:
    pub = t.key_file.with_suffix(".pub")
    pub.write_text(t.trail.public_key_pem())
    return t.trail.verify_log(public_key=str(pub))


def test_a_rewritten_query_is_named(trail: Trail) -> None:
    _s, made = record_session(trail)
    trail.sql(
        "UPDATE tool_invocation SET query = 'rewritten' WHERE id = :id", id=trail.rid(made[1].id)
    )
    problem = broken(trail)
    assert problem.kind is ProblemKind.CONTENT_CHANGED
    assert problem.record_id == made[1].id


def test_a_rewritten_shown_text_is_named(trail: Trail) -> None:
    _s, made = record_session(trail)
    trail.sql(
        "UPDATE invocation_evidence SET shown_text = 'refunds take 30 days' "
        "WHERE invocation_id = :id AND rank = 2",
        id=trail.rid(made[2].id),
    )
    problem = broken(trail)
    assert problem.kind is ProblemKind.CONTENT_CHANGED
    assert problem.record_id == made[2].id


def test_a_flipped_answer_check_verdict_is_named(trail: Trail) -> None:
    s, _ = record_session(trail)
    made = check(trail, s)
    trail.recorder.flush()
    assert trail.trail.verify_log().intact  # JSON signals with odd numbers hash alike
    trail.sql("UPDATE answer_check SET verdict = 'supported' WHERE id = :id", id=trail.rid(made.id))
    problem = broken(trail)
    assert problem.kind is ProblemKind.CONTENT_CHANGED
    assert (problem.record_kind, problem.record_id) == ("answer_check", made.id)


def test_a_flipped_claim_verdict_is_named(trail: Trail) -> None:
    s, _ = record_session(trail)
    made = check(trail, s)
    trail.sql(
        "UPDATE claim_check SET verdict = 'supported' WHERE check_id = :id", id=trail.rid(made.id)
    )
    assert broken(trail).record_id == made.id


def test_a_deleted_evidence_row_is_named(trail: Trail) -> None:
    _s, made = record_session(trail)
    trail.sql(
        "DELETE FROM invocation_evidence WHERE invocation_id = :id AND rank = 1",
        id=trail.rid(made[0].id),
    )
    problem = broken(trail)
    assert problem.kind is ProblemKind.CONTENT_CHANGED
    assert problem.record_id == made[0].id


def test_a_deleted_invocation_is_named(trail: Trail) -> None:
    _s, made = record_session(trail)
    trail.sql("DELETE FROM invocation_evidence WHERE invocation_id = :id", id=trail.rid(made[1].id))
    trail.sql("DELETE FROM tool_invocation WHERE id = :id", id=trail.rid(made[1].id))
    problem = broken(trail)
    assert problem.kind is ProblemKind.RECORD_MISSING
    assert problem.record_id == made[1].id


def test_the_newest_invocation_deleted_is_named(trail: Trail) -> None:
    _s, made = record_session(trail)
    trail.sql(
        "DELETE FROM invocation_evidence WHERE invocation_id = :id", id=trail.rid(made[-1].id)
    )
    trail.sql("DELETE FROM tool_invocation WHERE id = :id", id=trail.rid(made[-1].id))
    problem = broken(trail)
    assert problem.kind is ProblemKind.RECORD_MISSING
    assert problem.record_id == made[-1].id


def test_the_newest_records_deleted_with_their_chain_entries_are_caught(trail: Trail) -> None:
    _s, made = record_session(trail)
    trail.sql(
        "DELETE FROM invocation_evidence WHERE invocation_id = :id", id=trail.rid(made[-1].id)
    )
    trail.sql("DELETE FROM tool_invocation WHERE id = :id", id=trail.rid(made[-1].id))
    trail.sql("DELETE FROM audit_chain WHERE record_id = :id", id=trail.rid(made[-1].id))
    trail.sql("UPDATE audit_chain_head SET position = position - 1")
    problem = broken(trail)
    assert problem.kind is ProblemKind.RECORDS_MISSING_AT_END
    assert problem.position == 3


def test_two_swapped_seqs_are_named(trail: Trail) -> None:
    _s, made = record_session(trail)
    a, b = trail.rid(made[0].id), trail.rid(made[1].id)
    trail.sql("UPDATE tool_invocation SET seq = 1000 WHERE id = :id", id=a)
    trail.sql("UPDATE tool_invocation SET seq = 1 WHERE id = :id", id=b)
    trail.sql("UPDATE tool_invocation SET seq = 2 WHERE id = :id", id=a)
    problem = broken(trail)
    assert problem.kind is ProblemKind.ORDER_CHANGED
    assert problem.record_id == made[0].id


def test_a_forged_invocation_is_named(trail: Trail) -> None:
    _s, made = record_session(trail)
    forged = str(uuid.uuid4())
    with trail.engine.begin() as conn:
        row = (
            conn.execute(
                text("SELECT * FROM tool_invocation WHERE id = :id"), {"id": trail.rid(made[0].id)}
            )
            .mappings()
            .one()
        )
        values = {**row, "id": trail.rid(forged), "seq": 99, "query": "never asked"}
        if not trail.sqlite:
            values["retrieval_details"] = json.dumps(values["retrieval_details"])
        columns = ", ".join(values)
        conn.execute(
            text(
                f"INSERT INTO tool_invocation ({columns}) VALUES ({', '.join(':' + c for c in values)})"
            ),
            values,
        )
    problem = broken(trail)
    assert problem.kind is ProblemKind.RECORD_NOT_IN_CHAIN
    assert problem.record_id == forged


def test_a_deleted_chain_entry_breaks_the_chain_there(trail: Trail) -> None:
    _s, _made = record_session(trail)
    trail.sql("DELETE FROM audit_chain WHERE position = 2")
    problem = broken(trail)
    assert problem.kind is ProblemKind.RECORD_MISSING
    assert problem.position == 3


def test_a_chain_rewritten_consistently_is_caught_by_the_signed_checkpoint(trail: Trail) -> None:
    """The tamperer knows the hashing: rewrites a query, recomputes the record digest
    and every link after it. Only the signature over the head stands in the way."""
    _s, made = record_session(trail)
    trail.sql(
        "UPDATE tool_invocation SET query = 'rewritten' WHERE id = :id", id=trail.rid(made[0].id)
    )
    from lookup_knowledge.adapters.audit.chain_rows import stored_records

    with trail.engine.begin() as conn:
        digest = stored_records(conn, 1, 1)[1].digest
        rows = conn.execute(
            text(
                "SELECT position, kind, record_id, session_id, seq, record_hash, recorded_at "
                "FROM audit_chain ORDER BY position"
            )
        ).all()
        prev = "0" * 64
        for position, kind, record_id, session_id, seq, record_hash, recorded_at in rows:
            record_hash = digest if position == 1 else record_hash
            rid = str(uuid.UUID(str(record_id)))
            leaf = leaf_hash(position, kind, rid, session_id, seq, record_hash, recorded_at, False)
            entry = link_hash(prev, leaf)
            conn.execute(
                text(
                    "UPDATE audit_chain SET record_hash = :r, prev_hash = :p, entry_hash = :e "
                    "WHERE position = :n"
                ),
                {"r": record_hash, "p": prev, "e": entry, "n": position},
            )
            prev = entry
    problem = broken(trail)
    assert problem.kind is ProblemKind.CHECKPOINT_MISMATCH


def test_an_edited_checkpoint_fails_its_signature(trail: Trail) -> None:
    record_session(trail)
    trail.sql(
        "UPDATE audit_checkpoint SET position = position + 0, created_at = '2020-01-01 00:00:00.000000'"
    )
    problem = broken(trail)
    assert problem.kind is ProblemKind.CHECKPOINT_SIGNATURE_INVALID
    assert problem.checkpoint == 1


def test_another_key_does_not_verify_the_checkpoints(trail: Trail, tmp_path: Path) -> None:
    record_session(trail)
    other = TrailSigner.load_or_create(tmp_path / "other.pem")
    pub = tmp_path / "other.pub"
    pub.write_text(other.verify_key.pem)
    problem = broken(trail, public_key=str(pub))
    assert problem.kind is ProblemKind.CHECKPOINT_SIGNATURE_INVALID


def test_a_checkpoint_is_not_signed_over_a_tampered_tail(trail: Trail) -> None:
    s, _made = record_session(trail)
    more = shown(invocation(s, documents=["x#chunk-0"], query="later"))
    trail.chain._every = 10**9  # no periodic checkpoint
    trail.recorder.record(more)
    trail.recorder._mover.drain(respect_backoff=False, blocking=True)
    trail.sql(
        "UPDATE tool_invocation SET query = 'laundered' WHERE id = :id", id=trail.rid(more.id)
    )
    assert trail.chain.checkpoint("flush") is None
    assert broken(trail).record_id == more.id


def test_session_and_since_scopes(trail: Trail) -> None:
    s1, made1 = record_session(trail)
    s2, _made2 = record_session(trail)
    trail.sql("UPDATE tool_invocation SET query = 'x' WHERE id = :id", id=trail.rid(made1[0].id))
    assert trail.trail.verify_log(session_id=s2).intact
    assert broken(trail, session_id=s1).record_id == made1[0].id
    future = datetime.now(UTC) + timedelta(days=1)
    assert trail.trail.verify_log(since=future).records == 0


def test_a_bundle_round_trips_and_an_edited_one_fails(trail: Trail) -> None:
    s1, made1 = record_session(trail)
    _s2, _ = record_session(trail)
    check(trail, s1)
    bundle = json.loads(json.dumps(trail.trail.export_bundle(s1)))
    key = TrailVerifyKey.from_file(trail.key_file)
    report = verify_bundle(bundle, FORMATS, key.check, key.key_id)
    assert report.ok, report.problem
    assert report.records == 4
    shown_texts = [
        c["shown_text"] for r in bundle["records"] for c in r["children"] if "shown_text" in c
    ]
    assert "block 1: refunds take 5 days" in shown_texts
    edited = json.loads(json.dumps(bundle))
    edited["records"][1]["children"][0]["shown_text"] = "refunds take 30 days"
    bad = verify_bundle(edited, FORMATS, key.check, key.key_id)
    assert not bad.ok
    assert bad.problem is not None
    assert bad.problem.record_id == made1[1].id
    dropped = json.loads(json.dumps(bundle))
    del dropped["records"][0]
    assert not verify_bundle(dropped, FORMATS, key.check, key.key_id).ok
    resigned = json.loads(json.dumps(bundle))
    resigned["checkpoint"]["position"] += 1
    assert not verify_bundle(resigned, FORMATS, key.check, key.key_id).ok


def test_prune_refuses_a_trail_that_does_not_verify(trail: Trail) -> None:
    _s1, made1 = record_session(trail)
    trail.sql("UPDATE tool_invocation SET query = 'x' WHERE id = :id", id=trail.rid(made1[0].id))
    with pytest.raises(AuditError, match="does not verify"):
        trail.trail.prune(datetime.now(UTC) + timedelta(days=1))
    with trail.engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM tool_invocation")).scalar() == 3


def test_prune_removes_old_records_behind_a_signed_checkpoint(trail: Trail) -> None:
    _s1, _made1 = record_session(trail)
    cut = datetime.now(UTC) + timedelta(seconds=0.001)
    import time

    time.sleep(0.01)
    _s2, _made2 = record_session(trail)
    done = trail.trail.prune(cut)
    assert done.removed == 3
    assert done.pruned_through == 3
    assert done.checkpoint is not None
    report = trail.trail.verify_log()
    assert report.intact, report.problem
    assert report.pruned_through == 3
    assert report.records == 3
    with trail.engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM tool_invocation")).scalar() == 3
    # Removing more behind the store's back is still caught.
    trail.sql("DELETE FROM audit_chain WHERE position = 4")
    assert broken(trail).kind is ProblemKind.RECORD_MISSING


def test_the_witness_file_gets_each_checkpoint(audit_engine: Engine, tmp_path: Path) -> None:
    witness = tmp_path / "witness.jsonl"
    chain = AuditChain(
        audit_engine, TrailSigner.load_or_create(tmp_path / "k.pem"), every=2, witness=witness
    )
    recorder = build_sql_recorder(audit_engine, tmp_path / "journal", chain=chain)
    try:
        s = session("w")
        for i in range(5):
            recorder.record(invocation(s, query=f"q{i}"))
        recorder.flush()
    finally:
        recorder.close()
    lines = [json.loads(line) for line in witness.read_text().splitlines()]
    assert [line["position"] for line in lines][-1] == 5
    assert all(line["signature"] for line in lines)


def test_the_upgrade_chains_existing_records_and_downgrades(
    empty_audit_url: Any, tmp_path: Path
) -> None:
    from lookup_knowledge.adapters.audit import (
        create_audit_engine,
        downgrade_database,
        upgrade_database,
    )
    from lookup_knowledge.adapters.audit.sql_writer import SqlBatchWriter

    engine = create_audit_engine(empty_audit_url)
    try:
        upgrade_database(engine, "0006_contradicted_verdict")
        s = session("old")
        old = [shown(invocation(s, documents=["a#chunk-0"], query=f"old {i}")) for i in range(3)]
        SqlBatchWriter(engine).write(old)
        older = Trail(engine, None, None, SqlAnswerCheckStore(engine), None, tmp_path)  # type: ignore[arg-type]
        made = check(older, s)
        # Text an older version wrote (its own JSON spacing): hashed as stored.
        details = '{"version": 1, "b": [1, 2.50], "a": "x"}'
        older.sql("UPDATE tool_invocation SET retrieval_details = :d", d=details)
        upgrade_database(engine)
        signer = TrailSigner.load_or_create(tmp_path / "key.pem")
        chain = AuditChain(engine, signer)
        trail = SqlAuditTrail(engine, chain)
        report = trail.verify_log()
        assert report.intact, report.problem
        assert report.upgrade_chained == report.records == 4
        with engine.connect() as conn:
            kinds = conn.execute(
                text("SELECT kind FROM audit_chain WHERE chained_at_upgrade ORDER BY position")
            ).scalars()
            assert sorted(kinds) == ["answer_check", "invocation", "invocation", "invocation"]
        # New records chain on after them; the first checkpoint signs all.
        SqlBatchWriter(engine, chain=chain).write([shown(invocation(s, query="new"))])
        assert chain.checkpoint("flush") is not None
        bundle = json.loads(json.dumps(trail.export_bundle(s)))
        key = signer.verify_key
        assert verify_bundle(bundle, FORMATS, key.check, key.key_id).ok
        older.sql(
            "UPDATE answer_check SET verdict = 'supported' WHERE id = :id", id=older.rid(made.id)
        )
        assert trail.verify_log().problem.record_id == made.id  # type: ignore[union-attr]
        downgrade_database(engine, "0006_contradicted_verdict")
        with engine.connect() as conn:
            assert conn.execute(text("SELECT count(*) FROM tool_invocation")).scalar() == 4
        upgrade_database(engine)
        assert SqlAuditTrail(engine, chain).verify_log().upgrade_chained == 5
    finally:
        engine.dispose()


def test_deleted_checkpoints_are_caught(trail: Trail) -> None:
    s, _made = record_session(trail)
    trail.recorder.record(shown(invocation(s, query="later")))
    trail.recorder.flush()  # checkpoint #2
    trail.sql("DELETE FROM audit_checkpoint WHERE number = 2")
    problem = broken(trail)
    assert problem.kind is ProblemKind.CHECKPOINT_MISSING
    assert problem.checkpoint == 2
    trail.sql("DELETE FROM audit_checkpoint")
    assert broken(trail).kind is ProblemKind.CHECKPOINT_MISSING


def test_records_left_unsigned_past_the_interval_are_reported(trail: Trail) -> None:
    _s, made = record_session(trail)
    trail.sql("DELETE FROM audit_checkpoint")
    trail.sql("UPDATE audit_chain_head SET signed_number = 0, signed_position = 0")
    assert trail.trail.verify_log().intact  # just chained: a writer signs within the interval
    trail.chain.interval_s = -3600.0  # as if an hour had passed
    problem = broken(trail)
    assert problem.kind is ProblemKind.RECORDS_NOT_SIGNED
    assert problem.record_id == made[0].id


def test_the_newest_records_deleted_with_their_checkpoints_are_caught_by_the_witness(
    audit_engine: Engine, tmp_path: Path
) -> None:
    witness = tmp_path / "witness.jsonl"
    signer = TrailSigner.load_or_create(tmp_path / "k.pem")
    chain = AuditChain(audit_engine, signer, every=1000, interval_s=3600, witness=witness)
    recorder = build_sql_recorder(audit_engine, tmp_path / "journal", chain=chain)
    t = Trail(audit_engine, chain, recorder, SqlAnswerCheckStore(audit_engine, chain),
              SqlAuditTrail(audit_engine, chain), tmp_path / "k.pem")  # fmt: skip
    try:
        s, _made = record_session(t)  # checkpoint #1 signs 3 records
        later = [shown(invocation(s, query=f"later {i}")) for i in range(2)]
        for record in later:
            recorder.record(record)
        recorder.flush()  # checkpoint #2 signs 5
    finally:
        recorder.close()
    report = t.trail.verify_log()
    assert report.intact, report.problem
    assert (report.witness, report.witnessed) == (str(witness), 2)
    # Rolled back to checkpoint #1 wholesale: the records after it, their entries, the
    # checkpoint that signed them, the head row. The database alone cannot tell.
    for record in later:
        t.sql("DELETE FROM invocation_evidence WHERE invocation_id = :id", id=t.rid(record.id))
        t.sql("DELETE FROM tool_invocation WHERE id = :id", id=t.rid(record.id))
    t.sql("DELETE FROM audit_chain WHERE position > 3")
    t.sql("DELETE FROM audit_checkpoint WHERE number = 2")
    t.sql("UPDATE audit_chain_head SET position = 3, signed_number = 1, signed_position = 3")
    with audit_engine.connect() as conn:
        head = conn.execute(text("SELECT entry_hash FROM audit_chain WHERE position = 3")).scalar()
    t.sql("UPDATE audit_chain_head SET entry_hash = :h", h=head)
    blind = SqlAuditTrail(audit_engine, AuditChain(audit_engine, signer))
    assert blind.verify_log().intact  # no witness configured: undetectable
    problem = broken(t)  # the configured witness
    assert problem.kind is ProblemKind.RECORDS_MISSING_AT_END
    assert (problem.checkpoint, problem.position) == (2, 4)
    problem = blind.verify_log(witness=str(witness)).problem  # a witness given
    assert problem is not None
    assert problem.kind is ProblemKind.RECORDS_MISSING_AT_END


def test_a_witness_checkpoint_the_database_lost_or_changed_is_named(
    trail: Trail, tmp_path: Path
) -> None:
    s, _made = record_session(trail)
    trail.recorder.record(shown(invocation(s, query="later")))
    trail.recorder.flush()  # checkpoint #2
    with trail.engine.connect() as conn:
        rows = conn.execute(text("SELECT number FROM audit_checkpoint ORDER BY number")).all()
    assert [r[0] for r in rows] == [1, 2]
    from lookup_knowledge.adapters.audit.chain import read_checkpoints

    with trail.engine.connect() as conn:
        stored = read_checkpoints(conn)
    witness = tmp_path / "copy.jsonl"
    witness.write_text("".join(json.dumps(c.as_dict()) + "\n" for c in stored))
    assert trail.trail.verify_log(witness=str(witness)).witnessed == 2
    # The database lost checkpoint #1 (and the head row forgot nothing): the witness names it.
    trail.sql("DELETE FROM audit_checkpoint WHERE number = 1")
    problem = broken(trail, witness=str(witness))
    assert problem.kind is ProblemKind.CHECKPOINT_MISSING
    assert problem.checkpoint == 1
    # A witness line edited: its signature fails.
    edited = stored[0].as_dict() | {"position": 2}
    witness.write_text(json.dumps(edited) + "\n")
    problem = broken(trail, witness=str(witness))
    assert problem.kind is ProblemKind.WITNESS_INVALID
    assert problem.checkpoint == 1
    witness.write_text("not a checkpoint\n")
    assert broken(trail, witness=str(witness)).kind is ProblemKind.WITNESS_INVALID
    with pytest.raises(InvalidInputError):
        trail.trail.verify_log(witness=str(tmp_path / "absent.jsonl"))


# Edits that keep a value's meaning close but change what is stored: another storage
# type (a REAL column turns text back into its number, so that is no edit), a float the
# fast serialisation writes otherwise, JSON respaced. SQLite takes any
# of them; PostgreSQL's types refuse some (None: not possible there).
RESTORED_OTHERWISE = {
    "an infinite score": (
        "UPDATE invocation_evidence SET score_before = 9e999 WHERE invocation_id = :id AND rank = 1",
        "UPDATE invocation_evidence SET score_before = 'Infinity' WHERE invocation_id = :id AND rank = 1",
    ),
    "a tiny score": (
        "UPDATE invocation_evidence SET score_before = 1e-7 WHERE invocation_id = :id AND rank = 1",
        "UPDATE invocation_evidence SET score_before = 1e-7 WHERE invocation_id = :id AND rank = 1",
    ),
    "a shown text stored as bytes": (
        "UPDATE invocation_evidence SET shown_text = CAST(shown_text AS BLOB) "
        "WHERE invocation_id = :id AND rank = 1",
        None,
    ),
    "the details respaced": (
        "UPDATE tool_invocation SET retrieval_details = replace(retrieval_details, ',', ', ') "
        "WHERE id = :id",
        None,
    ),
    "a number added to the details": (
        "UPDATE tool_invocation SET retrieval_details = json_set(retrieval_details, '$.x', 1e-7) "
        "WHERE id = :id",
        "UPDATE tool_invocation SET retrieval_details = retrieval_details || "
        "'{\"x\": 0.0000001}'::jsonb WHERE id = :id",
    ),
}


@pytest.mark.parametrize("edit", sorted(RESTORED_OTHERWISE))
def test_a_value_stored_otherwise_is_named(trail: Trail, edit: str) -> None:
    _s, made = record_session(trail)
    on_sqlite, on_postgres = RESTORED_OTHERWISE[edit]
    statement = on_sqlite if trail.sqlite else on_postgres
    if statement is None:
        pytest.skip("PostgreSQL's column types do not store that")
    trail.sql(statement, id=trail.rid(made[1].id))
    problem = broken(trail)
    assert problem.kind is ProblemKind.CONTENT_CHANGED
    assert problem.record_id == made[1].id
