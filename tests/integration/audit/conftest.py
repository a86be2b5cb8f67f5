"""The ``db`` fixture: an audit database (SQLite, PostgreSQL) that a test can take away."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy.engine import URL

from lookup_knowledge.adapters.audit import create_audit_engine, upgrade_database
from tests.support.audit_outage import Database, ProxyCut, SqliteLock
from tests.support.postgres import POSTGRES
from tests.support.tcp_proxy import TcpProxy


@pytest.fixture(params=["sqlite", POSTGRES])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Database]:
    if request.param == "sqlite":
        path = tmp_path / "audit.db"
        engine = create_audit_engine(f"sqlite:///{path}", sqlite_busy_timeout_ms=50)
        upgrade_database(engine)
        yield Database("sqlite", engine, engine, SqliteLock(path))
        engine.dispose()
        return
    url: URL = request.getfixturevalue("postgres_audit_url")
    proxy = TcpProxy(url.host or "127.0.0.1", url.port or 5432)
    proxy.start()
    engine = create_audit_engine(url.set(host="127.0.0.1", port=proxy.port), connect_timeout_s=2)
    direct = create_audit_engine(url)
    try:
        yield Database("postgresql", engine, direct, ProxyCut(proxy))
    finally:
        proxy.close()
        engine.dispose()
        direct.dispose()
