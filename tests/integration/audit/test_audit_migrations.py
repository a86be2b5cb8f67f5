"""Migrations on SQLite and PostgreSQL: one head, base->head, a stairway, models == schema."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from importlib.resources import files
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Column, Engine, Integer, MetaData, inspect, text
from sqlalchemy.engine import URL
from sqlalchemy.exc import IntegrityError

from lookup_knowledge.adapters.audit import (
    create_audit_engine,
    current_revision,
    downgrade_database,
    head_revision,
    upgrade_database,
)
from lookup_knowledge.adapters.audit.migrate import alembic_config
from lookup_knowledge.adapters.audit.models import Base
from lookup_knowledge.adapters.audit.queries import citation_sources_statement
from lookup_knowledge.domain.errors import AuditUnavailable
from tests.support.postgres import isolated_schema
from tests.support.tcp_proxy import closed_port

AUDIT_TABLES = {
    "tool_invocation",
    "invocation_evidence",
    "answer_check",
    "claim_check",
    "audit_chain",
    "audit_chain_head",
    "audit_checkpoint",
}


@pytest.fixture
def engine(empty_audit_url: str | URL) -> Iterator[Engine]:
    """An engine on ``empty_audit_url`` (tests/conftest.py): nothing migrated yet."""
    e = create_audit_engine(empty_audit_url)
    yield e
    e.dispose()


def revisions_base_to_head() -> list[tuple[str, str]]:
    """(revision, its down revision or "base"), oldest first."""
    script = ScriptDirectory.from_config(alembic_config())
    out = []
    for rev in reversed(list(script.walk_revisions("base", "heads"))):
        down = rev.down_revision
        assert not isinstance(down, tuple | list), "merge revisions are not expected"
        out.append((rev.revision, down or "base"))
    return out


def tables(engine: Engine) -> set[str]:
    return set(inspect(engine).get_table_names()) - {"alembic_version"}


def diff(engine: Engine, metadata: MetaData) -> list[object]:
    with engine.connect() as conn:
        ctx = MigrationContext.configure(conn, opts={"compare_type": True})
        return list(compare_metadata(ctx, metadata))


def test_there_is_a_single_head() -> None:
    script = ScriptDirectory.from_config(alembic_config())
    assert len(script.get_heads()) == 1
    assert script.get_current_head() == head_revision()


def test_the_environment_ships_inside_the_package() -> None:
    root = files("lookup_knowledge.migrations")
    assert root.joinpath("env.py").is_file()
    assert root.joinpath("script.py.mako").is_file()
    assert root.joinpath("__init__.py").is_file()
    versions = root.joinpath("versions")
    assert versions.joinpath("__init__.py").is_file()
    assert any(p.name.endswith(".py") and p.name != "__init__.py" for p in versions.iterdir())


def test_upgrade_base_to_head_from_any_directory(
    empty_audit_url: str | URL, engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # no alembic.ini here, none needed
    assert current_revision(empty_audit_url) is None
    assert upgrade_database(empty_audit_url) == head_revision()
    assert current_revision(empty_audit_url) == head_revision()
    assert tables(engine) == AUDIT_TABLES
    assert upgrade_database(empty_audit_url) == head_revision()  # idempotent


def test_stairway_up_down_up_each_revision(engine: Engine) -> None:
    steps = revisions_base_to_head()
    assert steps, "no revisions found"
    for revision, down in steps:
        assert upgrade_database(engine, revision) == revision
        expected_down = None if down == "base" else down
        assert downgrade_database(engine, down) == expected_down
        assert upgrade_database(engine, revision) == revision
    assert current_revision(engine) == head_revision()
    assert downgrade_database(engine, "base") is None
    assert tables(engine) == set()


def test_models_match_migrations(engine: Engine) -> None:
    upgrade_database(engine)
    assert diff(engine, Base.metadata) == []


def test_the_model_comparison_can_see_a_difference(engine: Engine) -> None:
    """Guards the test above: a schema that differs from the models must show up."""
    upgrade_database(engine)
    changed = MetaData(naming_convention=Base.metadata.naming_convention)
    for table in Base.metadata.sorted_tables:
        table.to_metadata(changed)
    changed.tables["tool_invocation"].append_column(Column("extra", Integer))
    assert any("extra" in str(d) for d in diff(engine, changed))


def test_named_indexes_and_constraints_exist(engine: Engine) -> None:
    upgrade_database(engine)
    inspector = inspect(engine)
    invocation_indexes = {i["name"] for i in inspector.get_indexes("tool_invocation")}
    assert {
        "ix_tool_invocation_started_at",
        "ix_tool_invocation_status_started_at",
        "ix_tool_invocation_session_step",
    } <= invocation_indexes
    evidence_indexes = {
        i["name"]: i["column_names"] for i in inspector.get_indexes("invocation_evidence")
    }
    assert evidence_indexes["ix_invocation_evidence_session_document"] == [
        "session_id",
        "document_id",
    ]
    uniques = {
        u["name"]: u["column_names"] for u in inspector.get_unique_constraints("tool_invocation")
    }
    assert uniques["uq_tool_invocation_session_id_seq"] == ["session_id", "seq"]
    fks = inspector.get_foreign_keys("invocation_evidence")
    assert fks[0]["referred_table"] == "tool_invocation"
    assert fks[0]["options"].get("ondelete") == "CASCADE"


@pytest.mark.postgres
def test_postgres_uses_jsonb_and_an_index_scan_for_citations() -> None:
    with isolated_schema("lk_migr") as url:
        engine = create_audit_engine(url)
        try:
            upgrade_database(engine)
            columns = {c["name"]: c["type"] for c in inspect(engine).get_columns("tool_invocation")}
            assert type(columns["retrieval_details"]).__name__ == "JSONB"
            stmt = citation_sources_statement("s-1", ["a#chunk-0", "b#chunk-1"]).compile(
                dialect=engine.dialect, compile_kwargs={"render_postcompile": True}
            )
            with engine.connect() as conn:
                # Empty tables: forbid the seq scan so the plan shows whether the index fits.
                conn.execute(text("SET LOCAL enable_seqscan = off"))
                plan = conn.exec_driver_sql("EXPLAIN " + str(stmt), stmt.params).scalars().all()
        finally:
            engine.dispose()
    assert "ix_invocation_evidence_session_document" in "\n".join(plan)


def test_an_unreachable_database_raises_audit_unavailable() -> None:
    with pytest.raises(AuditUnavailable):
        upgrade_database(f"postgresql+psycopg://postgres@127.0.0.1:{closed_port()}/x")


def test_the_packaged_head_constant_is_the_scripts_head() -> None:
    # A new migration must bump PACKAGED_HEAD, or starts at the old head would skip it.
    from lookup_knowledge.adapters.audit.migrate import PACKAGED_HEAD

    assert head_revision() == PACKAGED_HEAD


def test_a_start_on_a_database_at_head_does_not_import_alembic(tmp_path: Path) -> None:
    import subprocess
    import sys

    url = f"sqlite:///{tmp_path / 'audit.db'}"
    assert upgrade_database(url) == head_revision()
    probe = (
        "import sys\n"
        "from lookup_knowledge.adapters.audit.migrate import upgrade_database\n"
        f"print(upgrade_database({url!r}))\n"
        "print('alembic' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout.split() == [head_revision(), "False"]
    # ... while an empty database is migrated by Alembic as before.
    fresh = f"sqlite:///{tmp_path / 'fresh.db'}"
    probe = probe.replace(url, fresh)
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout.split() == [head_revision(), "True"]


def _insert_check(engine: Engine, verdict: str, with_count: bool) -> str:
    check_id: object = uuid.uuid4()
    if engine.dialect.name == "sqlite":
        check_id = check_id.hex  # type: ignore[attr-defined]  # how Uuid() stores it there
    counts = ", contradicted_count" if with_count else ""
    values = ", :c" if with_count else ""
    with engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO answer_check (id, session_id, step_id, answer_format, answer_text, "
                "answer_hash, verdict, claim_count, supported_count, unsupported_count, "
                "uncited_count, invalid_citation_count, pending_in_spool, checker_version, "
                f"created_at{counts}) VALUES (:id, 's', NULL, 'text', 'a', 'h', :v, 1, 0, 0, 0, "
                f"0, 0, '1', :t{values})"
            ),
            {"id": check_id, "v": verdict, "t": datetime.now(UTC), "c": 1},
        )
        conn.execute(
            text(
                "INSERT INTO claim_check (check_id, claim_index, claim_text, span_start, "
                "span_end, cited_ids, citations, verdict, reasons, signals) VALUES "
                "(:id, 0, 'a', 0, 1, '[]', '[]', :v, '[]', '{}')"
            ),
            {"id": check_id, "v": verdict},
        )
    return str(check_id)


def _verdicts(engine: Engine) -> list[tuple[str, str]]:
    with engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT a.verdict, c.verdict FROM answer_check a JOIN claim_check c "
                "ON c.check_id = a.id ORDER BY a.created_at"
            )
        )
        return [(r[0], r[1]) for r in rows]


def test_0006_admits_contradicted_keeps_older_claims_and_downgrades_them_to_unsupported(
    engine: Engine,
) -> None:
    upgrade_database(engine, "0005_evidence_row_tenant")
    _insert_check(engine, "unsupported", with_count=False)
    with pytest.raises(IntegrityError):
        _insert_check(engine, "contradicted", with_count=False)
    upgrade_database(engine, "0006_contradicted_verdict")
    assert _verdicts(engine) == [("unsupported", "unsupported")]  # the rebuild kept them
    _insert_check(engine, "contradicted", with_count=True)
    assert _verdicts(engine) == [("unsupported", "unsupported"), ("contradicted", "contradicted")]
    downgrade_database(engine, "0005_evidence_row_tenant")
    assert _verdicts(engine) == [("unsupported", "unsupported"), ("unsupported", "unsupported")]
