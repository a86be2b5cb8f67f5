"""Schema migrations as functions: what ``lookup-knowledge db upgrade|current`` calls.

The Alembic environment ships inside the package (``lookup_knowledge.migrations``), so an
installed module can upgrade its own database from any working directory, without an
alembic.ini.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from importlib.resources import files

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, Engine
from sqlalchemy.engine import URL
from sqlalchemy.exc import SQLAlchemyError

from lookup_knowledge.adapters.audit.engine import create_audit_engine
from lookup_knowledge.adapters.audit.errors import translate
from lookup_knowledge.application.ports import AuditSchema

Target = str | URL | Engine


def alembic_config(connection: Connection | None = None) -> Config:
    """An Alembic ``Config`` pointing at the packaged environment."""
    config = Config()
    config.set_main_option("script_location", str(files("lookup_knowledge.migrations")))
    if connection is not None:
        config.attributes["connection"] = connection
    return config


def head_revision() -> str:
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


def upgrade_database(target: Target, revision: str = "head") -> str | None:
    """Migrate the audit database at ``target`` (URL or engine) up to ``revision``.

    Returns the revision the database is at afterwards. Raises ``AuditUnavailable`` when
    the database cannot be reached and ``AuditError`` when a migration fails.
    """
    try:
        with _connection(target) as connection:
            command.upgrade(alembic_config(connection), revision)
            connection.commit()
            return MigrationContext.configure(connection).get_current_revision()
    except SQLAlchemyError as error:
        raise translate(error, "migrating the audit database") from error


def downgrade_database(target: Target, revision: str) -> str | None:
    """Migrate down to ``revision`` (``"base"`` drops the audit tables)."""
    try:
        with _connection(target) as connection:
            command.downgrade(alembic_config(connection), revision)
            connection.commit()
            return MigrationContext.configure(connection).get_current_revision()
    except SQLAlchemyError as error:
        raise translate(error, "downgrading the audit database") from error


def current_revision(target: Target) -> str | None:
    """The revision the database is at (None for an empty database)."""
    try:
        with _connection(target) as connection:
            return MigrationContext.configure(connection).get_current_revision()
    except SQLAlchemyError as error:
        raise translate(error, "reading the audit database revision") from error


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
