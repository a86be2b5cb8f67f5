"""Bearer tokens with two scopes: ``auditor`` (read-only: audit reads, the console) and
``agent`` (lookup, verify, check-answer, /mcp).

With no token configured (only allowed on a loopback bind, see ``ServerSettings``)
every route is open to this machine. Once a token is configured, every scope needs its
own token: a request without one gets 401, a token of the other scope 403, and a scope
whose token is not configured is closed. Tokens are compared in constant time.

The agent scope's tokens are ``server.agent-token`` and every token listed (by sha256)
in ``server.principals`` (``mcp.principals``, its deprecated name, merged in). The
caller's principal comes from its token's entry, never from the request; only a token
marked ``trusted-host`` (and the tokenless loopback server) may name the principal of a
call itself (``Caller.trusted``).
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from fastapi import HTTPException, Request
from pydantic import SecretStr

from lookup_knowledge.adapters.config import ServerSettings
from lookup_knowledge.adapters.config.settings import AgentPrincipalSettings
from lookup_knowledge.application.session_owner import CallerScope
from lookup_knowledge.domain.access import Principal

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


def token_digest(token: bytes) -> bytes:
    """The sha256 hex digest of a token, as ``server.principals`` keys it."""
    return hashlib.sha256(token).hexdigest().encode("ascii")


@dataclass(frozen=True, slots=True)
class Caller:
    """Who a request comes from: its scope (None: no token is configured, the open
    loopback server), the principal its token maps to, and whether it may name the
    principal of a call itself (a trusted host, or the open loopback server)."""

    role: Role | None
    principal: Principal | None = None
    trusted: bool = False

    @property
    def scope(self) -> CallerScope | None:
        """What the application restricts an agent caller to (None: a trusted host,
        which sees what the host sees)."""
        return None if self.trusted else CallerScope(self.principal)


OPEN = Caller(None, None, trusted=True)


class TokenGuard:
    def __init__(
        self,
        server: ServerSettings,
        principals: Mapping[str, AgentPrincipalSettings] | None = None,
    ) -> None:
        self._tokens: dict[Role, bytes | None] = {
            Role.AUDITOR: _secret(server.auditor_token),
            Role.AGENT: _secret(server.agent_token),
        }
        entries = dict(server.principals if principals is None else principals)
        self._agents: list[tuple[bytes, Caller]] = [
            (digest.encode("ascii"), Caller(Role.AGENT, e.principal(), e.trusted_host))
            for digest, e in sorted(entries.items())
        ]
        self.enabled = any(t is not None for t in self._tokens.values()) or bool(self._agents)

    def caller_of(self, authorization: str | None) -> Caller | None:
        """The caller whose token the header carries (None: no or unknown token)."""
        if not authorization:
            return None
        kind, _, token = authorization.partition(" ")
        if kind.lower() != "bearer" or not token.strip():
            return None
        given = token.strip().encode("utf-8", "surrogateescape")
        role: Role | None = None
        for candidate, expected in self._tokens.items():
            # Compare against every token, so the time taken says nothing about which.
            if expected is not None and hmac.compare_digest(given, expected):
                role = candidate
        digest = token_digest(given)
        entry: Caller | None = None
        for known, caller in self._agents:
            if hmac.compare_digest(digest, known):
                entry = caller
        if role is Role.AUDITOR:
            return Caller(Role.AUDITOR)
        if entry is not None:
            return entry
        if role is Role.AGENT:
            return Caller(Role.AGENT)
        return None

    def role_of(self, authorization: str | None) -> Role | None:
        """The role whose token the header carries (None: no or unknown token)."""
        caller = self.caller_of(authorization)
        return None if caller is None else caller.role

    def check(self, authorization: str | None, needed: Role) -> Caller:
        """The caller; raise 401 (no valid token) or 403 (a token of another scope)."""
        if not self.enabled:
            return OPEN
        caller = self.caller_of(authorization)
        role = None if caller is None else caller.role
        if caller is None or role is None:
            raise HTTPException(
                401,
                "a bearer token is required (Authorization: Bearer <token>)",
                headers={"WWW-Authenticate": 'Bearer realm="lookup-knowledge"'},
            )
        if role is not needed:
            raise HTTPException(403, f"this needs the {needed.value} scope")
        return caller

    def dependency(self, needed: Role) -> Callable[[Request], Caller]:
        """A FastAPI dependency that admits the ``needed`` scope only (its value: the
        ``Caller``)."""

        def require(request: Request) -> Caller:
            return self.check(request.headers.get("authorization"), needed)

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
