"""Start-up tolerates concurrent first runs (the migration runs under a
lock and is idempotent) and, with ``audit.auto-migrate=true``, a PostgreSQL server that is
down (start, spool, replay once it is back). Real processes, SQLite and PostgreSQL."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import func, select

from lookup_knowledge import create_app
from lookup_knowledge.adapters.audit import create_audit_engine, upgrade_database
from lookup_knowledge.adapters.audit.migrate import current_revision, head_revision
from lookup_knowledge.adapters.audit.models import tool_invocation
from lookup_knowledge.application.ports import InvocationFilter
from tests.support.postgres import isolated_schema
from tests.support.tcp_proxy import TcpProxy, closed_port

STARTER = """
import os, sys, time
from pathlib import Path
go = Path(sys.argv[2])
from lookup_knowledge import create_app
print("READY", flush=True)
while not go.exists():
    time.sleep(0.001)
overrides = {"data-dir": sys.argv[1], "search.backend": "memory",
             "embedder.provider": "hashing"}
if len(sys.argv) > 3:
    overrides["audit.database-url"] = sys.argv[3]
with create_app(overrides=overrides) as app:
    result = app.lookup("first run", session_id="start-" + str(os.getpid()))
    assert result["message"], result
    assert app.flush(timeout_s=30)
print("STARTED", flush=True)
"""


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("LOOKUP_KNOWLEDGE_")}


def _start_together(data_dir: Path, go: Path, count: int, url: str | None = None) -> list[str]:
    args = [sys.executable, "-c", STARTER, str(data_dir), str(go), *([url] if url else [])]
    children = [
        subprocess.Popen(
            args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env()
        )
        for _ in range(count)
    ]
    problems: list[str] = []
    try:
        for child in children:
            assert child.stdout is not None
            assert child.stdout.readline().strip() == "READY"
        go.touch()
        for child in children:
            out, err = child.communicate(timeout=120)
            if child.returncode != 0 or "STARTED" not in out:
                problems.append(f"exit {child.returncode}: {err.strip()[-400:]}")
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
                child.wait()
    return problems


@pytest.mark.slow
def test_two_fresh_processes_both_start(tmp_path: Path) -> None:
    failures: list[str] = []
    for trial in range(10):
        data_dir = tmp_path / f"trial-{trial}"
        problems = _start_together(data_dir, tmp_path / f"go-{trial}", 2)
        failures.extend(f"trial {trial}: {p}" for p in problems)
        url = f"sqlite:///{data_dir / 'audit.db'}"
        assert current_revision(url) == head_revision()
        engine = create_audit_engine(url)
        try:
            with engine.connect() as conn:
                recorded = conn.execute(select(func.count()).select_from(tool_invocation))
                assert recorded.scalar_one() == 2 or problems
        finally:
            engine.dispose()
    assert not failures, "\n".join(failures)


@pytest.mark.slow
@pytest.mark.postgres
def test_two_fresh_processes_both_start_on_postgres(tmp_path: Path) -> None:
    with isolated_schema("lk_start") as url:
        shown = url.render_as_string(hide_password=False)
        problems = _start_together(tmp_path / "data", tmp_path / "go", 2, shown)
        assert not problems, "\n".join(problems)
        assert current_revision(shown) == head_revision()


def test_migration_is_idempotent(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'audit.db'}"
    assert upgrade_database(url) == head_revision()
    assert upgrade_database(url) == head_revision()


@pytest.mark.postgres
def test_auto_migrate_starts_while_postgres_is_down_then_replays(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with isolated_schema("lk_down") as url:
        proxy = TcpProxy(url.host or "127.0.0.1", url.port or 5432)
        proxy.start()
        proxied = url.set(host="127.0.0.1", port=proxy.port).render_as_string(hide_password=False)
        proxy.stop()  # the server is "down" (and its fresh schema was never migrated)
        overrides = {
            "data-dir": str(tmp_path / "data"),
            "search.backend": "memory",
            "embedder.provider": "hashing",
            "audit.database-url": proxied,
            "audit.auto-migrate": True,
        }
        with caplog.at_level("WARNING"), create_app(overrides=overrides) as app:
            result = app.lookup_result("while down", session_id="down")
            assert result.record_outcome is not None
            assert result.record_outcome.value == "journaled_offline"
            warnings = [r for r in caplog.records if "unreachable" in r.getMessage()]
            assert len(warnings) == 1
            proxy.start()
            assert app.flush("down", timeout_s=30)
            assert current_revision(proxied) == head_revision()
            page = app.audit.list_invocations(_session("down"))
            assert [i.query for i in page.items] == ["while down"]
        proxy.close()


def _session(session_id: str) -> InvocationFilter:
    return InvocationFilter(session_id=session_id)


def test_auto_migrate_cli_starts_while_postgres_is_down(tmp_path: Path) -> None:
    # A port nothing listens on: the CLI must answer (and spool), saying so once.
    port = closed_port()
    cli = str(Path(sys.executable).with_name("lookup-knowledge"))
    done = subprocess.run(
        [cli, "--data-dir", str(tmp_path / "data"), "lookup", "anything"],
        capture_output=True,
        text=True,
        env={
            **_env(),
            "LOOKUP_KNOWLEDGE_SEARCH__BACKEND": "memory",
            "LOOKUP_KNOWLEDGE_EMBEDDER__PROVIDER": "hashing",
            "LOOKUP_KNOWLEDGE_AUDIT__DATABASE_URL": f"postgresql://u@127.0.0.1:{port}/x",
        },
        timeout=120,
        check=False,
    )
    # No evidence in an empty store (exit 0 or 1 by the CLI's rules), but it ran.
    assert "Traceback" not in done.stderr
    assert done.stderr.count("unreachable") == 1, done.stderr
    assert list((tmp_path / "data" / "audit-journal").glob("journal-*.jsonl"))
