"""Console sign-in: signed, expiring session cookies, CSRF tokens and a login throttle.

The cookie never holds the auditor token. It holds a random session id and its expiry,
signed with HMAC-SHA256 under a key derived from the auditor token (so every replica
given the same token accepts it, and a new token signs everybody out); without an
auditor token the key is random per process. ``/logout`` revokes the session id on the
server (kept until the cookie would have expired anyway), so a copied cookie is dead
after logout too; the revocation is this process's (a replica behind a balancer keeps
its own list: rotate the auditor token to end every session at once).

Every console POST carries a CSRF token in its form: for ``/logout`` an HMAC of the
session id (bound to the cookie), for ``/login`` an HMAC of a nonce that ``GET /login``
sets in a cookie of its own (a double submit the attacker's page cannot read).

Failed sign-ins are counted per client address over a sliding minute; past
``server.login-attempts-per-minute`` the client gets 429 with ``Retry-After`` until the
oldest failure of the window is a minute old. ``now`` (epoch seconds) is injectable, so
tests move time instead of sleeping.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import secrets
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from pydantic import SecretStr

SESSION_COOKIE = "lk_console"
LOGIN_COOKIE = "lk_login"
WINDOW_S = 60.0
_MAX_CLIENTS = 10_000  # remembered clients; the oldest is forgotten first


@dataclass(frozen=True, slots=True)
class ConsoleSession:
    session_id: str
    expires_at: int


class ConsoleSessions:
    """Issues and checks console session cookies (thread-safe)."""

    def __init__(
        self,
        auditor_token: SecretStr | None,
        *,
        lifetime_s: float,
        now: Callable[[], float],
    ) -> None:
        if auditor_token is None:
            self._key = secrets.token_bytes(32)
        else:
            self._key = hmac.new(
                auditor_token.get_secret_value().encode("utf-8"),
                b"lookup-knowledge console session key v1",
                hashlib.sha256,
            ).digest()
        self._lifetime_s = lifetime_s
        self._now = now
        self._lock = threading.Lock()
        self._revoked: dict[str, int] = {}  # session id -> its expiry

    @property
    def lifetime_s(self) -> int:
        return int(self._lifetime_s)

    def _sign(self, purpose: str, value: str) -> str:
        return hmac.new(self._key, f"{purpose}.{value}".encode(), hashlib.sha256).hexdigest()

    def issue(self) -> str:
        """A new session's cookie value."""
        session_id = secrets.token_hex(16)
        expires = int(self._now() + self._lifetime_s)
        body = f"{session_id}.{expires}"
        return f"{body}.{self._sign('session', body)}"

    def check(self, cookie: str | None) -> ConsoleSession | None:
        """The session a cookie value stands for, or None (forged, expired, revoked)."""
        if not cookie:
            return None
        parts = cookie.split(".")
        if len(parts) != 3 or not parts[1].isdigit():
            return None
        session_id, expires, signature = parts
        expected = self._sign("session", f"{session_id}.{expires}")
        if not hmac.compare_digest(signature.encode(), expected.encode()):
            return None
        if int(expires) <= self._now():
            return None
        with self._lock:
            if session_id in self._revoked:
                return None
        return ConsoleSession(session_id, int(expires))

    def revoke(self, session: ConsoleSession) -> None:
        now = self._now()
        with self._lock:
            self._revoked[session.session_id] = session.expires_at
            for gone in [s for s, until in self._revoked.items() if until <= now]:
                del self._revoked[gone]

    def csrf_for(self, session: ConsoleSession) -> str:
        """The CSRF token of the console's forms in this session."""
        return self._sign("csrf", session.session_id)

    def login_nonce(self) -> tuple[str, str]:
        """A nonce for the login cookie and the login form's CSRF token bound to it."""
        nonce = secrets.token_hex(16)
        return nonce, self._sign("login", nonce)

    def csrf_of_login(self, nonce: str) -> str:
        return self._sign("login", nonce)

    def csrf_ok(self, expected_for: str, purpose: str, given: str | None) -> bool:
        if not given or not expected_for:
            return False
        expected = self._sign(purpose, expected_for)
        return hmac.compare_digest(given.encode(), expected.encode())


class LoginThrottle:
    """Failed sign-ins per client over a sliding window (thread-safe)."""

    def __init__(self, per_minute: int, *, now: Callable[[], float]) -> None:
        self._limit = per_minute
        self._now = now
        self._lock = threading.Lock()
        self._failures: dict[str, deque[float]] = {}

    def _recent(self, client: str, now: float) -> deque[float]:
        times = self._failures.get(client)
        if times is None:
            return deque()
        while times and times[0] <= now - WINDOW_S:
            times.popleft()
        if not times:
            del self._failures[client]
        return times

    def retry_after(self, client: str) -> int | None:
        """Seconds this client must wait before trying again, or None."""
        now = self._now()
        with self._lock:
            times = self._recent(client, now)
            if len(times) < self._limit:
                return None
            return max(1, math.ceil(times[0] + WINDOW_S - now))

    def failed(self, client: str) -> None:
        now = self._now()
        with self._lock:
            self._recent(client, now)
            self._failures.setdefault(client, deque()).append(now)
            if len(self._failures) > _MAX_CLIENTS:
                self._failures.pop(next(iter(self._failures)))

    def succeeded(self, client: str) -> None:
        with self._lock:
            self._failures.pop(client, None)
