"""Bearer tokens with two scopes: ``auditor`` (read-only: audit reads, the console) and
``agent`` (lookup, verify).

With no token configured (only allowed on a loopback bind, see ``ServerSettings``)
every route is open to this machine. Once a token is configured, every scope needs its
own token: a request without one gets 401, a token of the other scope 403, and a scope
whose token is not configured is closed. Tokens are compared in constant time.
"""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable, MutableMapping
from enum import StrEnum
from typing import Any

from fastapi import HTTPException, Request
from pydantic import SecretStr

from lookup_knowledge.adapters.config import ServerSettings

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class Role(StrEnum):
    AUDITOR = "auditor"
    AGENT = "agent"


def _secret(value: SecretStr | None) -> bytes | None:
    return None if value is None else value.get_secret_value().encode("utf-8")


class TokenGuard:
    def __init__(self, server: ServerSettings) -> None:
        self._tokens: dict[Role, bytes | None] = {
            Role.AUDITOR: _secret(server.auditor_token),
            Role.AGENT: _secret(server.agent_token),
        }
        self.enabled = any(t is not None for t in self._tokens.values())

    def role_of(self, authorization: str | None) -> Role | None:
        """The role whose token the header carries (None: no or unknown token)."""
        if not authorization:
            return None
        kind, _, token = authorization.partition(" ")
        if kind.lower() != "bearer" or not token.strip():
            return None
        given = token.strip().encode("utf-8")
        found: Role | None = None
        for role, expected in self._tokens.items():
            # Compare against every token, so the time taken says nothing about which.
            if expected is not None and hmac.compare_digest(given, expected):
                found = role
        return found

    def check(self, authorization: str | None, needed: Role) -> None:
        """Raise 401 (no valid token) or 403 (a token of another scope)."""
        if not self.enabled:
            return
        role = self.role_of(authorization)
        if role is None:
            raise HTTPException(
                401,
                "a bearer token is required (Authorization: Bearer <token>)",
                headers={"WWW-Authenticate": 'Bearer realm="lookup-knowledge"'},
            )
        if role is not needed:
            raise HTTPException(403, f"this needs the {needed.value} scope")

    def dependency(self, needed: Role) -> Callable[[Request], None]:
        """A FastAPI dependency that admits the ``needed`` scope only."""

        def require(request: Request) -> None:
            self.check(request.headers.get("authorization"), needed)

        return require

    def guard_asgi(self, app: ASGIApp, needed: Role) -> ASGIApp:
        """Wrap a mounted ASGI app (e.g. the MCP endpoint) in the same check."""
        from lookup_knowledge.adapters.http.problems import HTTP_CODES, problem

        async def guarded(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] == "http" and self.enabled:
                headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
                try:
                    self.check(headers.get("authorization"), needed)
                except HTTPException as denied:
                    response = problem(
                        denied.status_code,
                        HTTP_CODES[denied.status_code],
                        str(denied.detail),
                        headers=denied.headers,
                    )
                    await response(scope, receive, send)
                    return
            await app(scope, receive, send)

        return guarded
