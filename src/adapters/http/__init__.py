"""The HTTP adapter: ``create_http_app(lookup_app, settings)`` -> a FastAPI (ASGI) app
with the REST API, the auditor's console and the probes; ``lookup-knowledge serve`` runs
it under uvicorn. Needs the ``server`` extra (FastAPI, uvicorn, Jinja2)."""

# ruff: noqa: E402 - the extra is checked before its packages are imported
from lookup_knowledge.adapters.extras import require

require("server", "the HTTP server and console", "fastapi", "jinja2", "uvicorn")

from lookup_knowledge.adapters.http.app import Mount, create_http_app
from lookup_knowledge.adapters.http.auth import Role, TokenGuard

__all__ = ["Mount", "Role", "TokenGuard", "create_http_app"]
