"""``lookup-knowledge db ...``: the audit database's schema (Alembic migrations), through
the API; neither Milvus nor the embedder is started."""

from __future__ import annotations

from typing import Annotated

import typer

from lookup_knowledge.adapters.cli.context import command_group, import_container_lightly, load
from lookup_knowledge.adapters.cli.render import console

db_app = command_group(help="Audit database schema (Alembic migrations).")


@db_app.command("upgrade")
def db_upgrade(revision: Annotated[str, typer.Argument()] = "head") -> None:
    """Upgrade the audit database schema (creates it when empty)."""
    import_container_lightly()
    from lookup_knowledge.adapters.audit_revision import upgrade_audit_database

    now = upgrade_audit_database(load().settings, revision)
    console().print(f"audit database at revision {now}")


@db_app.command("current")
def db_current() -> None:
    """Show the audit database's schema revision and the newest one this version knows."""
    import_container_lightly()
    from lookup_knowledge.adapters.audit_revision import audit_database_revision

    revision = audit_database_revision(load().settings)
    console().print(f"current: {revision.current or '(empty database)'}  head: {revision.head}")
    if not revision.at_head:
        console(stderr=True).print("the database is not at head: run `lookup-knowledge db upgrade`")
        raise typer.Exit(1)
