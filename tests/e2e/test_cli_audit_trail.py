"""``audit verify-log | public-key | export | verify-bundle | prune`` as a user runs
them, on SQLite and PostgreSQL: exit 0 when intact, 1 naming the broken record, 2 for a
usage error (a missing key file)."""

from __future__ import annotations

import dataclasses
import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import text

from lookup_knowledge.adapters.audit import (
    build_sql_recorder,
    create_audit_engine,
    upgrade_database,
)
from lookup_knowledge.adapters.audit.chain import DEFAULT_KEY_FILE, AuditChain
from lookup_knowledge.adapters.signing import TrailSigner
from tests.e2e.hostile.support import Backend, assert_no_traceback, assert_usage_error
from tests.support.audit_data import invocation, session
from tests.support.postgres import POSTGRES, isolated_schema


@pytest.fixture(params=["sqlite", POSTGRES])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    data = tmp_path / "data"
    if request.param == "sqlite":
        yield Backend(data, None)
        return
    with isolated_schema("lk_trail") as url:
        yield Backend(data, url.render_as_string(hide_password=False))


def record(backend: Backend, count: int = 3) -> tuple[str, list[str]]:
    """Records written as a lookup would, chained and signed with the data dir's key."""
    url = backend.audit_url or f"sqlite:///{backend.data_dir / 'audit.db'}"
    engine = create_audit_engine(url)
    upgrade_database(engine)
    chain = AuditChain(engine, TrailSigner.load_or_create(backend.data_dir / DEFAULT_KEY_FILE))
    recorder = build_sql_recorder(engine, backend.data_dir / "audit-journal", chain=chain)
    s = session("cli")
    ids = []
    for i in range(count):
        made = invocation(s, documents=[f"d{i}#chunk-0"], query=f"query {i}")
        ev = tuple(dataclasses.replace(e, shown_text=f"shown {i}") for e in made.evidence)
        recorder.record(dataclasses.replace(made, evidence=ev))
        ids.append(made.id)
    recorder.close()
    engine.dispose()
    return s, ids


def tamper(backend: Backend, statement: str, record_id: str) -> None:
    url = backend.audit_url or f"sqlite:///{backend.data_dir / 'audit.db'}"
    engine = create_audit_engine(url)
    rid: object = uuid.UUID(record_id)
    if engine.dialect.name == "sqlite":
        rid = uuid.UUID(record_id).hex
    with engine.begin() as conn:
        conn.execute(text(statement), {"id": rid})
    engine.dispose()


def test_the_trail_commands_exit_0_intact_1_broken_2_usage(
    backend: Backend, tmp_path: Path
) -> None:
    s, ids = record(backend)
    done = backend.run("audit", "verify-log")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "audit trail intact: 3 records" in done.stdout
    key = backend.run("audit", "public-key")
    assert key.returncode == 0
    assert key.stdout.startswith("-----BEGIN PUBLIC KEY-----")
    public = tmp_path / "trail.pub"
    public.write_text(key.stdout)
    bundle = tmp_path / "bundle.json"
    done = backend.run("audit", "export", "--session", s, "--bundle", str(bundle))
    assert done.returncode == 0, done.stderr
    done = backend.run("audit", "verify-bundle", str(bundle), "--public-key", str(public))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "bundle intact: 3 records" in done.stdout
    data = json.loads(bundle.read_text())
    data["records"][0]["fields"]["query"] = "what the agent never asked"
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps(data))
    done = backend.run("audit", "verify-bundle", str(edited), "--public-key", str(public))
    assert done.returncode == 1
    assert ids[0] in done.stdout
    assert_no_traceback(done.stderr)
    # Usage errors: exit 2.
    assert_usage_error(backend.run("audit", "verify-log", "--public-key", str(tmp_path / "no.pem")))
    assert_usage_error(backend.run("audit", "verify-bundle", str(bundle)))
    assert_usage_error(
        backend.run("audit", "verify-bundle", str(bundle), "--public-key", str(tmp_path / "no"))
    )
    not_a_key = tmp_path / "not-a-key.pem"
    not_a_key.write_text("hello")
    done = backend.run("audit", "verify-log", "--public-key", str(not_a_key))
    assert done.returncode == 2
    assert "--public-key" in done.stderr
    # Edited behind the store's back: exit 1, the record named.
    tamper(backend, "UPDATE tool_invocation SET query = 'rewritten' WHERE id = :id", ids[1])
    done = backend.run("audit", "verify-log", "--public-key", str(public))
    assert done.returncode == 1, done.stdout
    assert "content changed" in done.stdout
    assert ids[1] in done.stdout
    done = backend.run("audit", "verify-log", "--json")
    assert done.returncode == 1
    assert json.loads(done.stdout)["problem"]["recordId"] == ids[1]
    assert_no_traceback(done.stderr)
    # A trail that does not verify is not pruned.
    done = backend.run("audit", "prune", "--before", "2999-01-01")
    assert done.returncode == 1
    assert "refusing to prune" in done.stderr


def test_prune_then_verify_log_reports_the_pruned_range(backend: Backend) -> None:
    record(backend)
    done = backend.run("audit", "prune", "--before", "2999-01-01")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "pruned 3 records" in done.stdout
    done = backend.run("audit", "verify-log")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "pruned: records 1..3 removed" in done.stdout
    record(backend, 2)
    done = backend.run("audit", "verify-log", "--json")
    assert done.returncode == 0, done.stdout
    report = json.loads(done.stdout)
    assert (report["prunedThrough"], report["records"], report["firstPosition"]) == (3, 2, 4)


def test_verify_log_checks_a_witness_copy_of_the_checkpoints(
    backend: Backend, tmp_path: Path
) -> None:
    record(backend)
    done = backend.run("audit", "verify-log", "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    last = json.loads(done.stdout)["lastCheckpoint"]
    witness = tmp_path / "witness.jsonl"
    witness.write_text(json.dumps(last) + "\n")
    done = backend.run("audit", "verify-log", "--witness", str(witness))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "witness: 1 checkpoints" in done.stdout
    # A checkpoint the database never had (the witness's copy edited): exit 1, named.
    witness.write_text(json.dumps(last | {"number": last["number"] + 1}) + "\n")
    done = backend.run("audit", "verify-log", "--witness", str(witness))
    assert done.returncode == 1, done.stdout
    assert "witness checkpoint invalid" in done.stdout
    assert_no_traceback(done.stderr)
    assert_usage_error(
        backend.run("audit", "verify-log", "--witness", str(tmp_path / "absent.jsonl"))
    )
