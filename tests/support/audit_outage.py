"""Real audit database outages for the recorder's fault tests.

SQLite: another connection holds the write lock (the recorder's ``BEGIN IMMEDIATE``
times out). PostgreSQL: the recorder talks through a TCP proxy that the test cuts (pooled
connections die, new ones are refused) and restores.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from sqlalchemy import Engine

from tests.support.tcp_proxy import TcpProxy


class Outage(Protocol):
    def go_away(self) -> None: ...
    def come_back(self) -> None: ...


@dataclass
class Database:
    name: str
    engine: Engine  # what the recorder uses (may be cut)
    direct: Engine  # always reachable: for assertions
    outage: Outage


class SqliteLock:
    """Another process-like connection holding the write lock."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._conn: sqlite3.Connection | None = None

    def go_away(self) -> None:
        self._conn = sqlite3.connect(self._path, isolation_level=None, timeout=5)
        self._conn.execute("BEGIN EXCLUSIVE")

    def come_back(self) -> None:
        if self._conn is not None:
            self._conn.execute("ROLLBACK")
            self._conn.close()
            self._conn = None


class ProxyCut:
    def __init__(self, proxy: TcpProxy) -> None:
        self._proxy = proxy

    def go_away(self) -> None:
        self._proxy.stop()

    def come_back(self) -> None:
        self._proxy.start()
