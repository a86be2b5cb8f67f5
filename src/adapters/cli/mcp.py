"""``lookup-knowledge mcp``: the MCP server on stdio or streamable HTTP."""

from __future__ import annotations

import sys
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated

import typer

from lookup_knowledge.adapters.cli.context import open_app

if TYPE_CHECKING:
    from starlette.types import ASGIApp

    from lookup_knowledge.adapters.local_server import RunningServer


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
        bind_host = host or settings.mcp.host
        announced: list[RunningServer] = []

        def local_operator(asgi: ASGIApp, bound_port: int) -> ASGIApp:
            # The CLI on this data directory goes through this process (server.json).
            running = announce(
                settings.data_dir,
                url=loopback_url(bind_host, bound_port),
                kind="mcp",
                lite_path=held_lite_path(settings.search.backend.value, settings.milvus_uri),
            )
            if running is None:
                return asgi
            announced.append(running)
            return LocalOperator(
                asgi,
                lookup_app,
                running,
                on_shutdown=lambda: remove_runtime_file(settings.data_dir, running),
            )

        try:
            serve_http(
                lookup_app,
                host=bind_host,
                port=settings.mcp.port if port is None else port,
                token=settings.mcp_token,
                on_listening=_announce,
                wrap=local_operator,
            )
        finally:
            for running in announced:
                remove_runtime_file(settings.data_dir, running)


def _announce(url: str) -> None:
    # stderr: stdout is the protocol's on stdio, and a script may read either.
    sys.stderr.write(f"lookup-knowledge MCP server (streamable HTTP) on {url}\n")
    sys.stderr.flush()
