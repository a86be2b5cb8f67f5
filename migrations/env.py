"""Alembic environment for the lookup-knowledge audit store.

Works from an installed package: the caller (``upgrade_database``) builds the Alembic
``Config`` in code and passes either a live ``Connection`` in
``config.attributes["connection"]`` or a URL as the ``sqlalchemy.url`` main option. The
``LOOKUP_KNOWLEDGE_AUDIT_URL`` environment variable is the last resort, for running the
``alembic`` command line against this directory by hand.
"""

from __future__ import annotations

import os

from alembic import context
from sqlalchemy import Connection

from lookup_knowledge.adapters.audit.engine import create_audit_engine
from lookup_knowledge.adapters.audit.models import Base

config = context.config
target_metadata = Base.metadata


def _url() -> str:
    url = config.get_main_option("sqlalchemy.url") or os.environ.get("LOOKUP_KNOWLEDGE_AUDIT_URL")
    if not url:
        raise RuntimeError(
            "no audit database URL: pass one to upgrade_database(url) or set "
            "LOOKUP_KNOWLEDGE_AUDIT_URL"
        )
    return url


def _configure(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
        transaction_per_migration=True,
    )


def run_migrations_offline() -> None:
    url = _url()
    context.configure(
        url=url,
        target_metadata=target_metadata,
        literal_binds=True,
        render_as_batch=url.startswith("sqlite"),
        dialect_opts={"paramstyle": "named"},
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _configure(connection)
        with context.begin_transaction():
            context.run_migrations()
        return
    engine = create_audit_engine(_url())
    try:
        with engine.connect() as connection:
            _configure(connection)
            with context.begin_transaction():
                context.run_migrations()
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
