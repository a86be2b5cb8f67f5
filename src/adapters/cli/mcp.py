"""``lookup-knowledge mcp``: the MCP server on stdio or streamable HTTP."""

from __future__ import annotations

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
    port: Annotated[int | None, typer.Option(help="HTTP port (default mcp.port, 8765).")] = None,
) -> None:
    """Serve lookup_knowledge(query) to MCP clients (stdio, or HTTP with mcp.token off loopback)."""
    from lookup_knowledge.adapters.local_operator import LocalOperator
    from lookup_knowledge.adapters.local_server import (
        announce,
        held_lite_path,
        loopback_url,
        remove_runtime_file,
    )
    from lookup_knowledge.adapters.mcp_server import serve_http, serve_stdio

    with open_app() as lookup_app:
        lookup_app.warm(background=True)  # the first tool call does not open the model
        if transport is Transport.stdio:
            serve_stdio(lookup_app)
            return
        settings = lookup_app.settings
        bind_host, bind_port = host or settings.mcp.host, port or settings.mcp.port
        # The CLI on this data directory goes through this process (server.json).
        announced = announce(
            settings.data_dir,
            url=loopback_url(bind_host, bind_port),
            kind="mcp",
            lite_path=held_lite_path(settings.search.backend.value, settings.milvus_uri),
        )
        try:
            serve_http(
                lookup_app,
                host=bind_host,
                port=bind_port,
                token=settings.mcp_token,
                wrap=None
                if announced is None
                else lambda asgi: LocalOperator(
                    asgi,
                    lookup_app,
                    announced,
                    on_shutdown=lambda: remove_runtime_file(settings.data_dir, announced),
                ),
            )
        finally:
            if announced is not None:
                remove_runtime_file(settings.data_dir, announced)
