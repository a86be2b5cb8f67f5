"""Host header check on every route (REST, console, ``/mcp``, probes): DNS rebinding.

A page on ``attacker.example`` whose name the attacker re-points at 127.0.0.1 can make a
browser send requests to a loopback ``serve``; the requests carry ``Host:
attacker.example``. Only names this server answers to are accepted: the loopback names
(``localhost``, ``127.0.0.1`` and the rest of 127/8, ``::1``), the address ``serve``
binds when it is a specific one, and the names configured in ``server.allowed-hosts``
(``*.example.com`` matches any subdomain; ``*`` switches the check off, e.g. behind a
proxy that checks the name itself). Any port. Anything else is answered 421 (Misdirected
Request) before any route runs; a request without a Host header 400.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from lookup_knowledge.adapters.config import ServerSettings
from lookup_knowledge.adapters.config.network import is_loopback
from lookup_knowledge.adapters.http.auth import ASGIApp, Receive, Scope, Send
from lookup_knowledge.adapters.http.problems import problem

ANY_HOST = "*"
_WILDCARD_BINDS = frozenset({"0.0.0.0", "::", ""})  # noqa: S104 - names, not a bind


def host_name(header: str) -> str | None:
    """The name of a Host header value without its port, lower case, without a final
    dot; None when it is not a host name at all."""
    value = header.strip().lower()
    if not value:
        return None
    if value.startswith("["):  # [v6]:port
        end = value.find("]")
        if end < 0:
            return None
        name, rest = value[1:end], value[end + 1 :]
        if rest and not rest.startswith(":"):
            return None
        port = rest[1:]
    else:
        name, _, port = value.partition(":")
    if port and not port.isdigit():
        return None
    name = name.rstrip(".")
    return name or None


@dataclass(frozen=True)
class HostPolicy:
    """Which Host names are this server's (see the module docstring)."""

    names: frozenset[str]
    suffixes: tuple[str, ...]
    any_host: bool = False

    @classmethod
    def of(cls, server: ServerSettings) -> HostPolicy:
        configured = [h.strip().lower().rstrip(".") for h in server.allowed_host_list]
        names = {h for h in configured if h and not h.startswith("*.") and h != ANY_HOST}
        bind = server.host.strip().strip("[]").lower()
        if bind not in _WILDCARD_BINDS:
            names.add(bind)
        suffixes = tuple(h[1:] for h in configured if h.startswith("*."))
        return cls(frozenset(names), suffixes, ANY_HOST in configured)

    def allows(self, header: str | None) -> bool:
        if self.any_host:
            return True
        if header is None:
            return False
        name = host_name(header)
        if name is None:
            return False
        if name in self.names or is_loopback(name) or _loopback_address(name):
            return True
        return any(name.endswith(suffix) for suffix in self.suffixes)

    def mcp_allowed_hosts(self) -> list[str]:
        """The same names as the MCP SDK's own Host check takes them (``name:*``)."""
        names = sorted({"127.0.0.1", "localhost", *self.names})
        plain = [f"[{n}]" if ":" in n else n for n in [*names, "::1"]]
        return [*plain, *(f"{n}:*" for n in plain)]

    def mcp_allowed_origins(self) -> list[str]:
        hosts = self.mcp_allowed_hosts()
        return [f"{scheme}://{h}" for scheme in ("http", "https") for h in hosts]


def _loopback_address(name: str) -> bool:
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


class HostCheck:
    """Plain ASGI middleware: a request for a name this server is not is refused (421)
    before anything else sees it."""

    def __init__(self, app: ASGIApp, policy: HostPolicy) -> None:
        self.app = app
        self.policy = policy

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket") or self.policy.any_host:
            await self.app(scope, receive, send)
            return
        header: str | None = None
        for name, value in scope.get("headers", ()):
            if name == b"host":
                header = value.decode("latin-1")
                break
        if self.policy.allows(header):
            await self.app(scope, receive, send)
            return
        if header is None:
            response = problem(
                400, "invalid_input", "a Host header is required", instance=scope.get("path")
            )
        else:
            response = problem(
                421,
                "misdirected_request",
                "this server does not answer for that Host; add the name to "
                "server.allowed-hosts if it is this server's",
                instance=scope.get("path"),
            )
        await response(scope, receive, send)
