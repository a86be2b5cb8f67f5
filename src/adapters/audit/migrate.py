"""Schema migrations as functions: what ``lookup-knowledge db upgrade|current`` calls.

The Alembic environment ships inside the package (``lookup_knowledge.migrations``), so an
installed module can upgrade its own database from any working directory, without an
alembic.ini.

Alembic is imported only when a migration runs: a start whose database is already at
the packaged head (``PACKAGED_HEAD``, kept equal to the scripts' head by a test) reads
``alembic_version`` with one SELECT and goes on, which saves a CLI lookup the Alembic
import and the parse of every migration script.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from importlib.resources import files
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import Connection, Engine, func, select, text
from sqlalchemy.engine import URL
from sqlalchemy.exc import SQLAlchemyError

from lookup_knowledge.adapters.audit.engine import create_audit_engine
from lookup_knowledge.adapters.audit.errors import translate
from lookup_knowledge.adapters.private_files import private_file
from lookup_knowledge.application.ports import AuditSchema
from lookup_knowledge.domain.errors import AuditError

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX: no cross-process migration lock
    fcntl = None  # type: ignore[assignment]

if TYPE_CHECKING:
    from alembic.config import Config

Target = str | URL | Engine

#: The newest revision under ``migrations/versions`` (a test compares it with Alembic's
#: head): a database at this revision needs no migration.
PACKAGED_HEAD = "0007_tamper_evident_chain"


def alembic_config(connection: Connection | None = None) -> Config:
    """An Alembic ``Config`` pointing at the packaged environment."""
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(files("lookup_knowledge.migrations")))
    if connection is not None:
        config.attributes["connection"] = connection
    return config


def head_revision() -> str:
    from alembic.script import ScriptDirectory

    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    if head is None:  # pragma: no cover - the package always ships a revision
        raise RuntimeError("the packaged migrations have no head revision")
    return head


@contextmanager
def _connection(target: Target) -> Iterator[Connection]:
    engine = target if isinstance(target, Engine) else create_audit_engine(target)
    try:
        with engine.connect() as connection:
            yield connection
    finally:
        if engine is not target:
            engine.dispose()


#: The key of the PostgreSQL session advisory lock every migrating process takes.
MIGRATION_LOCK_KEY = int.from_bytes(
    hashlib.blake2b(b"lookup-knowledge audit migration", digest_size=8).digest(),
    "big",
    signed=True,
)
MIGRATION_LOCK_SUFFIX = ".migrate-lock"


def _sqlite_file(connection: Connection) -> str | None:
    database = connection.engine.url.database or ""
    if connection.dialect.name != "sqlite" or database in ("", ":memory:"):
        return None
    return None if database.startswith("file::memory:") else database


@contextmanager
def migration_lock(connection: Connection, timeout_s: float) -> Iterator[None]:
    """One migrating process at a time: a session advisory lock on PostgreSQL, an flock
    on ``<file>.migrate-lock`` next to a SQLite file (nothing for an in-memory one).
    Whoever waited finds the schema at head and has nothing left to do."""
    if connection.dialect.name == "postgresql":
        connection.execute(text(f"SET lock_timeout = {int(timeout_s * 1000)}"))
        connection.execute(select(func.pg_advisory_lock(MIGRATION_LOCK_KEY)))
        connection.execute(text("RESET lock_timeout"))
        connection.commit()
        try:
            yield
        finally:
            with suppress(SQLAlchemyError):
                connection.rollback()
                connection.execute(select(func.pg_advisory_unlock(MIGRATION_LOCK_KEY)))
                connection.commit()
        return
    database = _sqlite_file(connection)
    if database is None or fcntl is None:
        yield
        return
    lock_path = Path(database).expanduser().with_name(Path(database).name + MIGRATION_LOCK_SUFFIX)
    private_file(lock_path, key="audit.database-url")
    with open(lock_path, "r+b") as handle:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise AuditError(
                        f"another process has been migrating the audit database for over "
                        f"{timeout_s:.0f} s (lock {lock_path})"
                    ) from None
                time.sleep(0.02)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def upgrade_database(
    target: Target, revision: str = "head", *, lock_timeout_s: float = 120.0
) -> str | None:
    """Migrate the audit database at ``target`` (URL or engine) up to ``revision``, under
    the migration lock (see ``migration_lock``), so concurrent first runs all succeed.

    Returns the revision the database is at afterwards. Raises ``AuditUnavailable`` when
    the database cannot be reached and ``AuditError`` when a migration fails.
    """
    if revision == "head":
        current = _stored_revision(target)
        if current == PACKAGED_HEAD:
            return current
    from alembic import command
    from alembic.runtime.migration import MigrationContext

    try:
        with _connection(target) as connection, migration_lock(connection, lock_timeout_s):
            command.upgrade(alembic_config(connection), revision)
            connection.commit()
            return MigrationContext.configure(connection).get_current_revision()
    except SQLAlchemyError as error:
        raise translate(error, "migrating the audit database") from error


def downgrade_database(target: Target, revision: str) -> str | None:
    """Migrate down to ``revision`` (``"base"`` drops the audit tables)."""
    from alembic import command
    from alembic.runtime.migration import MigrationContext

    try:
        with _connection(target) as connection:
            command.downgrade(alembic_config(connection), revision)
            connection.commit()
            return MigrationContext.configure(connection).get_current_revision()
    except SQLAlchemyError as error:
        raise translate(error, "downgrading the audit database") from error


def current_revision(target: Target) -> str | None:
    """The revision the database is at (None for an empty database)."""
    from alembic.runtime.migration import MigrationContext

    try:
        with _connection(target) as connection:
            return MigrationContext.configure(connection).get_current_revision()
    except SQLAlchemyError as error:
        raise translate(error, "reading the audit database revision") from error


def _stored_revision(target: Target) -> str | None:
    """The one revision in ``alembic_version`` without Alembic; None when the table is
    missing, holds several heads or the database cannot be read (the full upgrade path
    then decides, and reports what is wrong)."""
    try:
        with _connection(target) as connection:
            try:
                rows = connection.execute(text("SELECT version_num FROM alembic_version")).all()
            except SQLAlchemyError:  # no such table yet: the upgrade creates it
                return None
    except SQLAlchemyError as error:  # cannot connect: what the upgrade would say
        raise translate(error, "migrating the audit database") from error
    return str(rows[0][0]) if len(rows) == 1 else None


class AlembicAuditSchema(AuditSchema):
    """The audit database's schema at one URL, migrated by the packaged Alembic
    environment: what ``db upgrade|current`` use."""

    def __init__(self, url: str) -> None:
        self._url = url

    def upgrade(self, revision: str = "head") -> str | None:
        return upgrade_database(self._url, revision=revision)

    def current(self) -> str | None:
        return current_revision(self._url)

    def head(self) -> str:
        return head_revision()
