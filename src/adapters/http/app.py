"""``create_http_app(lookup_app, settings)``: the ASGI app ``lookup-knowledge serve`` runs.

It is built from parts that each do one thing: the REST routers (``rest``), the console
(``console``), problem+json errors (``problems``), bearer scopes (``auth``) and the body
size limit (``limits``). Everything goes through the ``LookupApp`` it is given; the app
does not close it (whoever built it does).

Extension points, so that a later feature is a few lines here:

* ``routers``: more ``APIRouter``s, included as they are (build them with
  ``guard.dependency(Role.AGENT)`` for their auth), e.g. ``POST /v1/check-answer``;
* ``mounts``: ``Mount``s of other ASGI apps at one exact path (e.g. the MCP
  streamable-HTTP app at ``/mcp``, which routes that path itself: it gets the request
  untouched), each wrapped in the bearer check of its role, with an optional async
  context manager entered for the app's lifetime (the MCP app's own lifespan, which
  runs its session manager).
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from dataclasses import dataclass

from fastapi import APIRouter, FastAPI, Request, Response
from starlette.middleware.cors import CORSMiddleware
from starlette.routing import Route

from lookup_knowledge.adapters.api import LookupApp
from lookup_knowledge.adapters.config import ServerSettings, Settings
from lookup_knowledge.adapters.http.auth import (
    ASGIApp,
    Receive,
    Role,
    Scope,
    Send,
    TokenGuard,
    token_digest,
)
from lookup_knowledge.adapters.http.console import console_router
from lookup_knowledge.adapters.http.hosts import HostCheck, HostPolicy
from lookup_knowledge.adapters.http.limits import BodySizeLimit
from lookup_knowledge.adapters.http.problems import install_problem_handlers
from lookup_knowledge.adapters.http.rest import rest_router
from lookup_knowledge.domain.access import AccessMode
from lookup_knowledge.domain.errors import ConfigurationError

logger = logging.getLogger(__name__)

SECURITY_HEADERS = {
    "content-security-policy": (
        "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; "
        "frame-ancestors 'none'; base-uri 'none'"
    ),
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "x-frame-options": "DENY",
}


@dataclass(frozen=True)
class Mount:
    """Another ASGI app answering ``path`` (exactly), behind the bearer check of ``role``."""

    path: str
    app: ASGIApp
    role: Role = Role.AGENT
    lifespan: Callable[[], AbstractAsyncContextManager[object]] | None = None


def create_http_app(
    lookup_app: LookupApp,
    settings: Settings | ServerSettings | None = None,
    *,
    routers: Sequence[APIRouter] = (),
    mounts: Sequence[Mount] = (),
    mcp: bool = True,
    console_clock: Callable[[], float] = time.time,
) -> FastAPI:
    """The HTTP API, the console, the probes and (``mcp``) the MCP streamable-HTTP
    endpoint ``/mcp`` (the server of ``lookup-knowledge mcp --transport http``, agent
    scope) over ``lookup_app``.

    ``settings`` defaults to the app's own ``server.*`` settings. ``console_clock``
    (epoch seconds): the clock of console session expiry and the login throttle.
    """
    full = settings if isinstance(settings, Settings) else lookup_app.settings
    server = settings if isinstance(settings, ServerSettings) else full.server
    principals = {**full.mcp.principals, **server.principals}
    check_agent_tokens(full, server, principals)
    guard = TokenGuard(server, principals)
    hosts = HostPolicy.of(server)
    if mcp:
        mounts = [mcp_mount(lookup_app, server.host, hosts), *mounts]

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        async with AsyncExitStack() as stack:
            for mount in mounts:
                if mount.lifespan is not None:
                    await stack.enter_async_context(mount.lifespan())
            yield

    app = FastAPI(
        title="lookup-knowledge",
        summary="The evidence tool lookup_knowledge(query) and its audit store over HTTP.",
        version=_version(),
        # The interactive docs pages load scripts from a CDN: off. The OpenAPI
        # document itself is served.
        docs_url=None,
        redoc_url=None,
        lifespan=lifespan,
    )
    app.state.lookup_app = lookup_app
    app.state.token_guard = guard
    install_problem_handlers(app)
    app.include_router(
        rest_router(lookup_app, guard, readiness_timeout_s=server.readiness_timeout_s)
    )
    for router in routers:
        app.include_router(router)
    for mount in mounts:
        # A Route, not a Starlette Mount: the app gets the request with its path as it
        # came (the MCP app routes "/mcp" itself), and only that exact path.
        app.router.routes.append(
            Route(mount.path, endpoint=_Endpoint(guard.guard_asgi(mount.app, mount.role)))
        )
    app.include_router(console_router(lookup_app, guard, server, now=console_clock))

    @app.middleware("http")
    async def security_headers(
        request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        response = await call_next(request)
        for name, value in SECURITY_HEADERS.items():
            response.headers.setdefault(name, value)
        return response

    if server.cors_origin_list:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=server.cors_origin_list,
            allow_methods=["GET", "POST"],
            allow_headers=["authorization", "content-type"],
        )
    # The size limit runs before anything reads a body; the Host check before all.
    app.add_middleware(BodySizeLimit, max_bytes=server.max_request_bytes)
    app.add_middleware(HostCheck, policy=hosts)
    return app


def check_agent_tokens(
    settings: Settings, server: ServerSettings, principals: Mapping[str, object]
) -> None:
    """Under ``access.mode=enforced`` every agent token maps to a principal (or is a
    trusted host's): ``ConfigurationError`` at start-up otherwise."""
    if settings.mcp.principals:
        logger.warning(
            "mcp.principals is deprecated: it is read as server.principals (one map of "
            "agent tokens for REST and MCP); move the entries there"
        )
    if settings.access.mode is not AccessMode.ENFORCED or server.agent_token is None:
        return
    digest = token_digest(server.agent_token.get_secret_value().encode("utf-8"))
    if digest.decode("ascii") not in principals:
        raise ConfigurationError(
            "server.agent-token",
            "***",
            "under access.mode=enforced every agent token must map to a principal: add "
            "sha256(token) to server.principals as {tenant, user, groups} (or "
            "trusted-host: true for a host that names the principal of each call)",
        )


def mcp_mount(lookup_app: LookupApp, host: str, hosts: HostPolicy | None = None) -> Mount:
    """``/mcp``: each MCP session is its own audit session (see ``mcp_server``); its
    session manager runs for the app's lifetime. ``hosts``: the names ``serve``
    answers to, which the MCP SDK's own Host and Origin check then accepts too."""
    from mcp.server.transport_security import TransportSecuritySettings

    from lookup_knowledge.adapters.mcp_server import build_mcp_server

    security = None
    if hosts is not None:
        security = TransportSecuritySettings(
            # Its patterns have no "*.example.com": then the HostCheck alone decides.
            enable_dns_rebinding_protection=not (hosts.any_host or hosts.suffixes),
            allowed_hosts=hosts.mcp_allowed_hosts(),
            allowed_origins=hosts.mcp_allowed_origins(),
        )
    asgi = build_mcp_server(lookup_app).streamable_http_app(host=host, transport_security=security)
    return Mount("/mcp", asgi, Role.AGENT, lifespan=lambda: asgi.router.lifespan_context(asgi))


class _Endpoint:
    """An ASGI app as a route endpoint (Starlette calls an object that is not a function
    as ASGI, with the request untouched)."""

    def __init__(self, app: ASGIApp) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self._app(scope, receive, send)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("lookup-knowledge")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree
        return "0"
