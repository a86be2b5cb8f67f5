"""``lookup-knowledge mcp``: the MCP server on stdio or streamable HTTP."""

from __future__ import annotations

import sys
from enum import StrEnum
from typing import Annotated

import typer

from lookup_knowledge.adapters.cli.context import open_app


class Transport(StrEnum):
    stdio = "stdio"
    http = "http"


def mcp(
    transport: Annotated[
        Transport, typer.Option(help="stdio (one client) or http (streamable HTTP at /mcp).")
    ] = Transport.stdio,
    host: Annotated[
        str | None, typer.Option(help="HTTP bind address (default mcp.host, 127.0.0.1).")
    ] = None,
    port: Annotated[
        int | None, typer.Option(help="HTTP port (default mcp.port, 8765; 0 picks a free one).")
    ] = None,
) -> None:
    """Serve lookup_knowledge(query) to MCP clients (stdio, or HTTP with mcp.token off loopback)."""
    from lookup_knowledge.adapters.mcp_server import serve_http, serve_stdio

    with open_app() as lookup_app:
        lookup_app.warm(background=True)  # the first tool call does not open the model
        if transport is Transport.stdio:
            serve_stdio(lookup_app)
            return
        settings = lookup_app.settings
        serve_http(
            lookup_app,
            host=host or settings.mcp.host,
            port=settings.mcp.port if port is None else port,
            token=settings.mcp_token,
            on_listening=_announce,
        )


def _announce(url: str) -> None:
    # stderr: stdout is the protocol's on stdio, and a script may read either.
    sys.stderr.write(f"lookup-knowledge MCP server (streamable HTTP) on {url}\n")
    sys.stderr.flush()
