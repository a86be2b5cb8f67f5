"""``lookup-knowledge config show``: the effective configuration, secrets masked."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from lookup_knowledge.adapters.cli.context import command_group, load
from lookup_knowledge.adapters.cli.render import add_row, console, print_json

config_app = command_group(help="Effective configuration.")


@config_app.command("show")
def config_show(as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """Print the effective configuration, secrets masked, with the source of each value."""
    from lookup_knowledge.adapters.config import describe_settings

    loaded = load()
    rows = describe_settings(loaded)
    if as_json:
        print_json([{"key": k, "value": v, "source": s} for k, v, s in rows])
        return
    table = Table(title=f"Effective configuration ({loaded.config_file or 'no config file'})")
    table.add_column("key")
    table.add_column("value", overflow="fold")
    table.add_column("source", overflow="fold")
    for key, value, source in rows:
        add_row(table, key, value, source)
    console().print(table)
