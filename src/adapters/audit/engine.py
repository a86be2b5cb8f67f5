"""Engine factory for the audit store.

SQLite (the embedded default) runs in WAL mode with ``synchronous=FULL`` (a committed
record survives a power cut) and a busy timeout; its transactions start with an explicit
``BEGIN`` so that the recorder can ask for ``BEGIN IMMEDIATE`` (take the write lock before
reading the session's last seq, instead of failing on a lock upgrade). PostgreSQL gets
``pool_pre_ping`` (a connection the server dropped is replaced, not used) and a connect
timeout.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import URL, Connection, make_url
from sqlalchemy.exc import ArgumentError
from sqlalchemy.pool import StaticPool

from lookup_knowledge.adapters.extras import require
from lookup_knowledge.adapters.private_files import private_directory, private_file
from lookup_knowledge.domain.errors import ConfigurationError
from lookup_knowledge.domain.redaction import mask_url
from lookup_knowledge.domain.trail import canonical_document

SQLITE_BEGIN_OPTION = "lookup_knowledge_sqlite_begin"
_BEGIN_MODES = {"DEFERRED": "BEGIN DEFERRED", "IMMEDIATE": "BEGIN IMMEDIATE"}


def normalise_url(url: str | URL) -> URL:
    """Parse an audit DB URL; bare ``postgresql://`` means the psycopg 3 driver."""
    try:
        parsed = make_url(url) if isinstance(url, str) else url
    except (ArgumentError, ValueError) as error:
        raise ConfigurationError(
            "audit.database-url", _redact(url), f"not a database URL: {error}"
        ) from None
    backend = parsed.get_backend_name()
    if backend == "postgresql" and parsed.drivername in ("postgresql", "postgres"):
        parsed = parsed.set(drivername="postgresql+psycopg")
    elif backend not in ("postgresql", "sqlite"):
        raise ConfigurationError(
            "audit.database-url",
            _redact(url),
            "only sqlite and postgresql audit databases are supported",
        )
    return parsed


def database_key(url: str | URL) -> str:
    """Which database a URL names, as a short stable key without its secret: a hash of
    the URL (driver normalised, password removed). The audit journal binds each record
    to it, so a record is only ever moved into the database it was written for."""
    parsed = normalise_url(url)
    # ``URL.set(password=None)`` leaves the password as it is: build the URL anew.
    bare = URL.create(
        parsed.drivername,
        username=parsed.username,
        host=parsed.host,
        port=parsed.port,
        database=parsed.database,
        query=parsed.query,
    )
    # The components, not render_as_string(): that percent-quotes the database path as
    # UTF-8, and a folder name with an undecodable byte (a surrogate escape) cannot be.
    parts = (
        bare.drivername,
        bare.username,
        bare.host,
        bare.port,
        bare.database,
        sorted(bare.query.items()),
    )
    return hashlib.sha256(repr(parts).encode("utf-8", "backslashreplace")).hexdigest()[:16]


def _redact(url: str | URL) -> str:
    text = url if isinstance(url, str) else url.render_as_string(hide_password=False)
    return mask_url(text)


def create_audit_engine(
    url: str | URL,
    *,
    sqlite_busy_timeout_ms: int = 5000,
    connect_timeout_s: int = 5,
    pool_size: int = 5,
    max_overflow: int = 10,
    create_sqlite_directory: bool = True,
    echo: bool = False,
) -> Engine:
    """An engine configured for the audit store (see the module docstring).

    ``url``: ``sqlite:///path/audit.db`` or ``postgresql+psycopg://user@host/db``.
    """
    parsed = normalise_url(url)
    if parsed.get_backend_name() == "sqlite":
        return _sqlite_engine(parsed, sqlite_busy_timeout_ms, create_sqlite_directory, echo)
    if parsed.get_backend_name() == "postgresql" and parsed.get_driver_name() == "psycopg":
        require("postgres", "an audit store on PostgreSQL", "psycopg")
    return create_engine(
        parsed,
        pool_pre_ping=True,
        pool_size=pool_size,
        max_overflow=max_overflow,
        connect_args={"connect_timeout": connect_timeout_s, "application_name": "lookup-knowledge"},
        echo=echo,
    )


def _sqlite_engine(parsed: URL, busy_timeout_ms: int, create_dir: bool, echo: bool) -> Engine:
    if isinstance(busy_timeout_ms, bool) or busy_timeout_ms < 0:
        raise ConfigurationError("audit.sqlite-busy-timeout-ms", busy_timeout_ms, "must be >= 0")
    database = parsed.database or ""
    in_memory = database in ("", ":memory:") or database.startswith("file::memory:")
    kwargs: dict[str, Any] = {"echo": echo}
    if in_memory:
        # One shared connection, or every checkout would see a different empty database.
        kwargs.update(poolclass=StaticPool, connect_args={"check_same_thread": False})
    elif create_dir:
        # 0700 folder, 0600 file: SQLite gives its -wal and -shm the database file's mode.
        path = Path(database).expanduser()
        private_directory(path.parent, key="audit.database-url")
        private_file(path, key="audit.database-url")
    # JSON documents as canonical text (keys sorted, compact): the trail's verifier hashes
    # the stored text as it is (adapters/audit/chain_rows.py).
    engine = create_engine(parsed, json_serializer=canonical_document, **kwargs)

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # The driver must not open transactions on its own: we emit BEGIN ourselves.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        try:
            # The busy timeout first: switching to WAL needs the write lock, which a
            # process starting at the same moment may hold for a moment.
            cursor.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")
            if not in_memory:
                cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA synchronous=FULL")
            cursor.execute("PRAGMA foreign_keys=ON")
        finally:
            cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Connection) -> None:
        mode = connection.get_execution_options().get(SQLITE_BEGIN_OPTION, "DEFERRED")
        connection.exec_driver_sql(_BEGIN_MODES.get(str(mode), "BEGIN DEFERRED"))

    return engine
