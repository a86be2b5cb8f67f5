"""``lookup-knowledge mcp``: the MCP server on stdio."""

from __future__ import annotations

from lookup_knowledge.adapters.cli.context import open_app


def mcp() -> None:
    """Serve lookup_knowledge(query) to MCP clients over stdio."""
    from lookup_knowledge.adapters.mcp_server import serve_stdio

    with open_app() as lookup_app:
        serve_stdio(lookup_app)
