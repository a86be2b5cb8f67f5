"""PostgreSQL for tests: ``TEST_DATABASE_URL``, else a testcontainers server when Docker is
reachable, else ``pytest.skip`` with the reason.

Every user gets a private schema (``isolated_schema``): the URL it yields carries
``options=-csearch_path=<schema>``, so migrations, tables and ``alembic_version`` live in
that schema and concurrent test runs on one shared database never collide. The schema is
dropped afterwards.
"""

from __future__ import annotations

import atexit
import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import URL, make_url

ENV_VAR = "TEST_DATABASE_URL"
POSTGRES = pytest.param("postgresql", marks=pytest.mark.postgres)
"""Use in ``params=["sqlite", POSTGRES]`` so ``-m "not postgres"`` deselects it."""
_state: dict[str, Any] = {}


def _docker_reason() -> str | None:
    """None when Docker answers, else why not."""
    try:
        import docker  # type: ignore[import-not-found]
    except ImportError:
        return "the docker SDK is not installed (pip install -e '.[postgres-testcontainers]')"
    try:
        docker.from_env().ping()
    except Exception as error:
        return f"Docker is not reachable ({type(error).__name__})"
    return None


def _from_testcontainers() -> str:
    try:
        from testcontainers.postgres import PostgresContainer
    except ImportError:
        pytest.skip(
            f"PostgreSQL tests need {ENV_VAR} or Docker with testcontainers "
            "(pip install -e '.[postgres-testcontainers]'); neither is available"
        )
    reason = _docker_reason()
    if reason is not None:
        pytest.skip(f"PostgreSQL tests need {ENV_VAR} or Docker: {reason}")
    container = PostgresContainer("postgres:16-alpine", driver="psycopg")
    container.start()
    atexit.register(container.stop)
    return str(container.get_connection_url())


def postgres_url() -> URL:
    """The server URL (skips the calling test when there is none)."""
    if "url" not in _state:
        if "skip" in _state:
            pytest.skip(_state["skip"])
        raw = os.environ.get(ENV_VAR, "").strip()
        try:
            _state["url"] = make_url(raw if raw else _from_testcontainers())
        except pytest.skip.Exception as skip:
            _state["skip"] = str(skip.msg)
            raise
    url: URL = _state["url"]
    if url.drivername in ("postgresql", "postgres"):
        url = url.set(drivername="postgresql+psycopg")
    return url


@contextmanager
def isolated_schema(prefix: str = "lk_test") -> Iterator[URL]:
    """A fresh schema on the test server; yields a URL whose search_path is that schema."""
    server = postgres_url()
    schema = f"{prefix}_{uuid.uuid4().hex[:12]}"
    admin = create_engine(server, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(text(f'CREATE SCHEMA "{schema}"'))
        yield server.update_query_dict({"options": f"-csearch_path={schema}"})
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
        admin.dispose()
