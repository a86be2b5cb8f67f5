"""Sessions are owned: an audit session belongs to the principal that opened it.

The owner is what the session's invocations recorded (tenant, user, groups digest), so
it needs no column of its own and survives a restart. ``SessionOwners`` answers the two
questions the servers ask on behalf of an agent caller:

* ``claim(session, principal)`` before a lookup: may this principal write into the
  session? Yes when the session is new (it becomes the principal's) or already its own;
* ``owns(session, principal)`` before a read (verify, check-answer): is it its own?

A session that another principal's lookups were recorded in is never the caller's, and a
session holding two principals' records (written before sessions were owned) is nobody's.
What this process claimed is remembered (bounded), so two concurrent first calls by two
principals cannot both win while their records are still on the way to the database.
When the database cannot be read, a session this process has not seen is granted to the
claimant (lookups keep working through an audit outage, their records journaled; the store
is then left alone for ``retry_after_s``) and a read fails as the store's reads do.
Several replicas share no memory: two first calls naming one new session id on two
replicas within the time their records take to reach the database may both be granted.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from lookup_knowledge.application.ports import AuditQueries, SessionOwner
from lookup_knowledge.domain.access import Principal
from lookup_knowledge.domain.errors import AuditUnavailable


def owner_of(principal: Principal | None) -> SessionOwner:
    """The owner a lookup for ``principal`` records (the audit columns' values)."""
    if principal is None:
        return SessionOwner(None, None, None)
    return SessionOwner(principal.tenant, principal.user or None, principal.groups_hash())


@dataclass(frozen=True, slots=True)
class CallerScope:
    """An agent caller authenticated as ``principal`` (not a trusted host): it acts on its
    own sessions only, and learns nothing about documents it may not see (no
    ``forbidden``: such an id is ``unknown``, like a made-up one)."""

    principal: Principal | None


class SessionOwners:
    def __init__(
        self,
        queries: AuditQueries,
        *,
        max_sessions: int = 100_000,
        retry_after_s: float = 5.0,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        if max_sessions < 1:
            raise ValueError("max_sessions must be >= 1")
        self._queries = queries
        self._max = max_sessions
        self._known: OrderedDict[str, SessionOwner | None] = OrderedDict()
        self._lock = threading.Lock()
        self._retry_after_s = retry_after_s
        self._monotonic = monotonic
        self._down_until = float("-inf")

    def _remember(self, session_id: str, owner: SessionOwner | None) -> None:
        """Under ``_lock``."""
        self._known[session_id] = owner
        self._known.move_to_end(session_id)
        while len(self._known) > self._max:
            self._known.popitem(last=False)

    @staticmethod
    def _single(owners: tuple[SessionOwner, ...]) -> SessionOwner | None:
        return owners[0] if len(owners) == 1 else None

    def _cached(self, session_id: str) -> tuple[bool, SessionOwner | None]:
        with self._lock:
            if session_id in self._known:
                self._known.move_to_end(session_id)
                return True, self._known[session_id]
            return False, None

    def claim(self, session_id: str, principal: Principal | None) -> bool:
        """May a lookup for ``principal`` be recorded in ``session_id``? A new session
        becomes its own."""
        me = owner_of(principal)
        known, owner = self._cached(session_id)
        if known:
            return owner == me
        owners: tuple[SessionOwner, ...] = ()
        if self._monotonic() >= self._down_until:
            try:
                owners = self._queries.session_owners(session_id)
            except AuditUnavailable:
                # The outage: the lookup goes on (its record is journaled), and the store
                # is not asked again for a while, so no lookup waits for its timeout.
                self._down_until = self._monotonic() + self._retry_after_s
        with self._lock:
            if session_id in self._known:  # another call claimed it meanwhile
                return self._known[session_id] == me
            owner = self._single(owners) if owners else me
            self._remember(session_id, owner)
            return owner == me

    def owns(self, session_id: str, principal: Principal | None) -> bool:
        """Is ``session_id`` ``principal``'s own (opened by it, no one else's records)?"""
        me = owner_of(principal)
        known, owner = self._cached(session_id)
        if known:
            return owner == me
        owners = self._queries.session_owners(session_id)
        if not owners:
            return False  # nobody's yet: nothing in it to act on
        owner = self._single(owners)
        with self._lock:
            self._remember(session_id, owner)
        return owner == me
