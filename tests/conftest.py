"""Fixtures that several test folders share: audit databases on SQLite and PostgreSQL.

Helpers that tests import by name live in ``tests.fakes`` (fakes of the ports and
``make_lookup``) and ``tests.support`` (record builders, PostgreSQL schemas, a TCP proxy).
PostgreSQL runs on ``TEST_DATABASE_URL`` (or a testcontainers server); without either the
PostgreSQL cases skip, and ``-m "not postgres"`` deselects them.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine
from sqlalchemy.engine import URL

from lookup_knowledge.adapters.audit import create_audit_engine, upgrade_database
from tests.e2e.hostile.summary import HostileSummary
from tests.support.audit_backends import sqlite_url
from tests.support.postgres import POSTGRES, isolated_schema

_E2E = Path(__file__).parent / "e2e"


def pytest_configure(config: pytest.Config) -> None:
    # Here, not in tests/e2e/hostile/conftest.py: see tests/e2e/hostile/summary.py.
    config.pluginmanager.register(HostileSummary(config.rootpath), "hostile-input-summary")


@pytest.hookimpl(optionalhook=True)  # a pytest-xdist hook: unknown under -p no:xdist
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist loadgroup`` (what scripts/test passes): whole files per worker, and each
    ``xdist_group`` on one worker (tests/support/xdist.py)."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from tests.support.xdist import FileOrGroupScheduling

    return FileOrGroupScheduling(config, log)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Everything under ``tests/e2e`` runs the product as a user does (processes, servers,
    a browser): marked ``e2e`` so ``scripts/test --quick`` can leave it to the full run."""
    for item in items:
        if item.path.is_relative_to(_E2E):
            item.add_marker(pytest.mark.e2e)


@pytest.fixture(params=["sqlite", POSTGRES])
def empty_audit_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str | URL]:
    """An empty audit database, no tables yet: a SQLite file under ``tmp_path``, or a
    private PostgreSQL schema dropped afterwards."""
    if request.param == "sqlite":
        yield sqlite_url(tmp_path)
        return
    with isolated_schema() as url:
        yield url


@pytest.fixture
def audit_engine(empty_audit_url: str | URL) -> Iterator[Engine]:
    """An engine on ``empty_audit_url``, migrated to the head revision."""
    engine = create_audit_engine(empty_audit_url)
    upgrade_database(engine)
    yield engine
    engine.dispose()


@pytest.fixture(scope="module")
def postgres_audit_url() -> Iterator[URL]:
    """A migrated private PostgreSQL schema that the tests of one module share (each test
    uses sessions of its own, or clears the tables first)."""
    with isolated_schema() as url:
        upgrade_database(url)
        yield url
