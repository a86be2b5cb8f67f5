"""Who an MCP call is for and which audit session it belongs to.

**Session ids.** The audit groups calls by session and the citation check works per
session, so every MCP client session maps to one ``mcp-…`` session id:

* on a transport that has its own session id (stateful streamable HTTP, the
  ``Mcp-Session-Id`` the SDK's session manager issued and checks), ``mcp-<that id>``;
* otherwise the connection the server is serving: stdio (one client per process), the
  SDK's in-process client, SSE. The SDK enters the server lifespan once per served
  connection, so the lifespan state carries a fresh ``mcp-<uuid>`` and a call counter;
* on stateless HTTP, and with the per-request MCP protocol (2026) that the SDK's default
  client negotiates, no session exists at all: each call gets its own id,
  ``mcp-call-<uuid7>``, unless the request names its conversation (below). A
  ``check_answer`` there finds its sessions from the ids the answer cites: the caller's
  own ``mcp-call-`` sessions that were shown them (never another principal's). It checks
  against their evidence together and is recorded in the one that showed most of the
  cited ids, so a lookup and the check of the answer built on it share a session.

A client that keeps one server for many conversations (a desktop app on stdio) names the
conversation in the request's ``_meta``: ``{"lookup-knowledge/conversation-id": "c-42"}``
makes the call's audit session ``mcp-c-42`` whatever the transport, so two chats never
share a session (and a citation check per chat sees only that chat's evidence).

``step_id`` is the call's number within its session ("1", "2", …) when the server keeps
the session, else the MCP request id; ``tool_call_id`` is always the MCP request id.

**Principal.** Who the lookups are for comes from the server's configuration, never from
the client: over HTTP a bearer token listed in ``server.principals`` (by its sha256;
``mcp.principals`` is its deprecated name) maps to that principal, and every listed token
is accepted; otherwise (stdio, or ``mcp.token``) the principal is
``mcp.tenant``/``mcp.user``/``mcp.groups``, or none (under ``access.mode=enforced``:
public documents only). A principal named in ``_meta`` (``lookup-knowledge/principal``,
``/tenant``, ``/user``, ``/groups``) or in an ``X-Lookup-Knowledge-*`` header is refused
with a ``forbidden`` tool error, unless the token is a trusted host's
(``trusted-host: true``), which names it in ``_meta["lookup-knowledge/principal"]``.

**Owned sessions.** An audit session belongs to the principal that opened it: a lookup
whose conversation id or ``Mcp-Session-Id`` names another principal's session is a
``forbidden`` tool error, and ``check_answer`` on such a session answers as on an empty
one (nothing recorded, no other principal's session named, never ``forbidden``). A
conversation id no audit session can have (over 251 characters, control characters, not
a string) makes the call a recorded ``invalid_input`` result in the connection's session.
"""

from __future__ import annotations

import hashlib
import hmac
import itertools
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from lookup_knowledge.application.ids import uuid7
from lookup_knowledge.application.lookup.query import check_id
from lookup_knowledge.application.session_owner import CallerScope
from lookup_knowledge.domain.access import Principal
from lookup_knowledge.domain.errors import AccessDenied, InvalidInputError

if TYPE_CHECKING:
    from lookup_knowledge.adapters.api import LookupApp

SESSION_PREFIX = "mcp-"
CONVERSATION_META_KEY = "lookup-knowledge/conversation-id"
_TRANSPORT_SESSION_HEADER = "mcp-session-id"


@dataclass
class _ConnectionSession:
    """One served MCP connection: its audit session id and how many calls it made."""

    session_id: str = field(default_factory=lambda: f"{SESSION_PREFIX}{uuid.uuid4()}")
    _calls: itertools.count[int] = field(default_factory=lambda: itertools.count(1), repr=False)

    def next_step(self) -> str:
        return str(next(self._calls))


def _header(headers: Mapping[str, str] | None, name: str) -> str | None:
    if headers is None:
        return None
    for key, value in headers.items():
        if key.lower() == name:
            return value or None
    return None


def _meta_extra(meta: object) -> Mapping[str, object]:
    if meta is None:
        return {}
    extra = meta.model_extra if hasattr(meta, "model_extra") else meta
    return extra if isinstance(extra, Mapping) else {}


class _BadConversation(Exception):
    """The request's conversation id cannot name an audit session (why: the message)."""


def _conversation(meta: object) -> str | None:
    """The host's conversation id from a request's ``_meta``, when it names one;
    ``_BadConversation`` when it names one no audit session can have."""
    extra = _meta_extra(meta)
    if CONVERSATION_META_KEY not in extra:
        return None
    value = extra[CONVERSATION_META_KEY]
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise _BadConversation(
            f"_meta {CONVERSATION_META_KEY} must be a string, not {type(value).__name__}"
        )
    try:
        check_id(f"_meta {CONVERSATION_META_KEY}", value)
        check_id(f"_meta {CONVERSATION_META_KEY}", f"{SESSION_PREFIX}{value}")
    except InvalidInputError as error:
        raise _BadConversation(error.message) from None
    return value


def _session_and_step(
    headers: Mapping[str, str] | None,
    connection: _ConnectionSession,
    request_id: str,
    conversation: str | None = None,
) -> tuple[str, str]:
    """(session_id, step_id) for one call; see the module docstring for the rules."""
    if conversation is not None:
        return f"{SESSION_PREFIX}{conversation}", request_id
    transport_session = _header(headers, _TRANSPORT_SESSION_HEADER)
    if transport_session is not None:
        return f"{SESSION_PREFIX}{transport_session}", request_id
    if headers is not None:
        # HTTP without a session id: stateless, every request stands alone.
        return _call_session(), request_id
    return connection.session_id, connection.next_step()


#: The audit sessions of stateless calls: one per call, ids that sort by time (uuid7).
CALL_SESSION_PREFIX = f"{SESSION_PREFIX}call-"


def _call_session() -> str:
    return f"{CALL_SESSION_PREFIX}{uuid7(datetime.now(UTC))}"


def _stateless(headers: Mapping[str, str] | None, conversation: str | None) -> bool:
    """HTTP without a transport session and without a conversation id: every call is its
    own audit session."""
    return (
        headers is not None
        and conversation is None
        and _header(headers, _TRANSPORT_SESSION_HEADER) is None
    )


def _session_of(
    headers: Mapping[str, str] | None,
    connection: _ConnectionSession,
    conversation: str | None = None,
) -> str:
    """The audit session of this call, like ``_session_and_step`` but using no step."""
    if conversation is not None:
        return f"{SESSION_PREFIX}{conversation}"
    transport_session = _header(headers, _TRANSPORT_SESSION_HEADER)
    if transport_session is not None:
        return f"{SESSION_PREFIX}{transport_session}"
    if headers is not None:
        return _call_session()
    return connection.session_id


def _token_digest(value: bytes | str) -> str:
    raw = value.encode("utf-8", "surrogateescape") if isinstance(value, str) else value
    return hashlib.sha256(raw).hexdigest()


@dataclass(frozen=True, slots=True)
class _Caller:
    """Who an MCP call is for: the principal, and whether the client may name another
    (a trusted host's token)."""

    principal: Principal | None
    trusted: bool = False

    @property
    def scope(self) -> CallerScope | None:
        return None if self.trusted else CallerScope(self.principal)


#: ``_meta`` keys of this server that would name a principal.
PRINCIPAL_META_KEY = "lookup-knowledge/principal"
_CLAIM_META_KEYS = frozenset(
    {
        PRINCIPAL_META_KEY,
        "lookup-knowledge/tenant",
        "lookup-knowledge/user",
        "lookup-knowledge/groups",
    }
)
_CLAIM_HEADER_PREFIX = "x-lookup-knowledge-"
_CLAIM_HEADERS = frozenset({"x-tenant", "x-tenant-id", "x-user", "x-user-id", "x-groups"})
_NOT_YOURS = (
    "the principal comes from the bearer token (or the server's configuration); this "
    "client may not name another (only a token marked trusted-host in server.principals may)"
)


class _Principals:
    """The configured agent tokens (by sha256, ``server.principals`` with the deprecated
    ``mcp.principals``) and the default principal (stdio, ``mcp.token``)."""

    def __init__(self, app: LookupApp) -> None:
        settings = app.settings
        self.default = _Caller(settings.mcp.principal())
        self.by_digest: dict[str, _Caller] = {
            digest: _Caller(entry.principal(), entry.trusted_host)
            for digest, entry in settings.agent_principals().items()
        }

    def of(self, headers: Mapping[str, str] | None) -> _Caller:
        authorization = _header(headers, "authorization")
        found: _Caller | None = None
        if authorization is not None and self.by_digest:
            scheme, _, token = authorization.partition(" ")
            if scheme.lower() == "bearer" and token:
                digest = _token_digest(token)
                for known, caller in self.by_digest.items():
                    if hmac.compare_digest(known, digest):
                        found = caller
        return found or self.default

    def for_call(self, headers: Mapping[str, str] | None, meta: object) -> _Caller:
        """The caller of one call; a principal named in ``_meta`` or a header is refused
        (``AccessDenied``) unless the token is a trusted host's, which names it in
        ``_meta["lookup-knowledge/principal"]`` ({tenant, user, groups})."""
        caller = self.of(headers)
        extra = _meta_extra(meta)
        claims = sorted(k for k in extra if k in _CLAIM_META_KEYS)
        named = sorted(
            k
            for k in (headers or {})
            if k.lower().startswith(_CLAIM_HEADER_PREFIX) or k.lower() in _CLAIM_HEADERS
        )
        if named or (claims and not caller.trusted):
            raise AccessDenied(_NOT_YOURS)
        if not claims:
            return caller
        if claims != [PRINCIPAL_META_KEY]:
            raise InvalidInputError(
                f"a trusted host names the principal in _meta {PRINCIPAL_META_KEY} "
                "({tenant, user, groups})"
            )
        return _Caller(_principal_from(extra[PRINCIPAL_META_KEY]), trusted=True)


def _principal_from(value: object) -> Principal | None:
    if value is None:
        return None
    if not isinstance(value, Mapping) or not set(value) <= {"tenant", "user", "groups"}:
        raise InvalidInputError(
            f"_meta {PRINCIPAL_META_KEY} must be an object with tenant, user and groups"
        )
    groups = value.get("groups") or []
    if not isinstance(groups, list):
        raise InvalidInputError(f"_meta {PRINCIPAL_META_KEY}.groups must be a list")
    return Principal(value.get("tenant"), value.get("user") or "", frozenset(groups))  # type: ignore[arg-type]
