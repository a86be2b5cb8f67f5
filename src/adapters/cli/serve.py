"""``lookup-knowledge serve``: the HTTP API, MCP at /mcp, the auditor's console and the probes in one
process (uvicorn), on ``server.host``:``server.port`` (127.0.0.1:8787 by default).

Under a process manager run it in the foreground (it logs to stderr and stops cleanly
on SIGTERM, finishing the calls in flight). While it runs, ``<data-dir>/server.json``
lets the CLI on the same data directory work through it (``local_server``). A bind other than loopback needs
``server.auditor-token`` and ``server.agent-token``.
"""

from __future__ import annotations

import sys
from typing import Annotated, Any

import typer

from lookup_knowledge.adapters.cli.context import load


def serve(
    host: Annotated[
        str | None, typer.Option(help="Address to bind (server.host; default 127.0.0.1).")
    ] = None,
    port: Annotated[
        int | None, typer.Option(help="TCP port (server.port; 0 picks a free one).")
    ] = None,
    access_log: Annotated[bool, typer.Option(help="Log one line per request.")] = False,
) -> None:
    """Serve the REST API (/v1), MCP (/mcp), the console (/) and /healthz, /readyz."""
    from lookup_knowledge.adapters.extras import require

    # ExtraNotInstalled (exit 2, the pip command) when the server extra is missing.
    require("server", "lookup-knowledge serve", "fastapi", "jinja2", "uvicorn")
    import uvicorn

    from lookup_knowledge.adapters.api import create_app
    from lookup_knowledge.adapters.http import create_http_app
    from lookup_knowledge.adapters.local_operator import LocalOperator
    from lookup_knowledge.adapters.local_server import (
        announce,
        held_lite_path,
        listening_socket,
        loopback_url,
        remove_runtime_file,
    )

    extra: dict[str, object] = {}
    if host is not None:
        extra["server.host"] = host
    if port is not None:
        extra["server.port"] = port
    settings = load(extra).settings
    server_settings = settings.server
    sock = listening_socket(
        server_settings.host, server_settings.port, config_key="server.port", inheritable=True
    )
    with create_app(settings) as lookup_app:
        lookup_app.warm(background=True)  # the first request does not open the model
        app: Any = create_http_app(lookup_app, settings)
        bound_host, bound_port = sock.getsockname()[:2]
        shown = f"[{bound_host}]" if ":" in bound_host else bound_host
        # The CLI on this data directory goes through this process (server.json).
        announced = announce(
            settings.data_dir,
            url=loopback_url(bound_host, bound_port),
            kind="serve",
            lite_path=held_lite_path(settings.search.backend.value, settings.milvus_uri),
        )
        if announced is not None:
            app = LocalOperator(
                app,
                lookup_app,
                announced,
                on_shutdown=lambda: remove_runtime_file(settings.data_dir, announced),
            )
        sys.stderr.write(f"lookup-knowledge console and API on http://{shown}:{bound_port}/\n")
        sys.stderr.flush()
        config = uvicorn.Config(
            app,
            log_level=settings.log.level.lower(),
            access_log=access_log,
            proxy_headers=False,
            server_header=False,
            timeout_graceful_shutdown=30,
        )
        try:
            uvicorn.Server(config).run(sockets=[sock])
        finally:
            if announced is not None:
                remove_runtime_file(settings.data_dir, announced)
