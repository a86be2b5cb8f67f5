"""``AuditSessionState``: retrievedDomainsThisSession backed by the audit store.

A session's domains are loaded from the store once per process (so a session that moves
between workers, or survives a restart, keeps its history) and then kept in memory and
extended by the lookups this process runs. If the store cannot be read, the in-memory
view is used: a lookup never fails for it. After such a failure the store is left alone
for a backoff interval (``backoff_initial_s``, doubling up to ``backoff_max_s``, reset by a
success), and then one call at a time probes it, so a dead database costs a lookup no
connection attempts (rather than two, each up to the connect timeout), not one per call.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence

from lookup_knowledge.adapters.audit.backoff import Backoff
from lookup_knowledge.application.ports import AuditQueries, SessionState
from lookup_knowledge.domain.errors import LookupKnowledgeError

logger = logging.getLogger(__name__)


class _Entry:
    __slots__ = ("domains", "loaded")

    def __init__(self) -> None:
        self.domains: list[str] = []
        self.loaded = False


class AuditSessionState(SessionState):
    def __init__(
        self,
        queries: AuditQueries,
        *,
        max_sessions: int = 10_000,
        backoff_initial_s: float = 1.0,
        backoff_max_s: float = 30.0,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        if max_sessions < 1:
            raise ValueError("max_sessions must be >= 1")
        self._queries = queries
        self._max = max_sessions
        self._sessions: OrderedDict[str, _Entry] = OrderedDict()
        self._lock = threading.Lock()
        self._backoff = Backoff(backoff_initial_s, backoff_max_s, monotonic=monotonic)
        self._probing = False

    def _may_query(self) -> bool:
        """Under ``_lock``. While the store is believed down: not before the backoff is
        over, and then one probe at a time (the caller reports back via ``_loaded``)."""
        if not self._backoff.down:
            return True
        if self._probing or self._backoff.waiting():
            return False
        self._probing = True
        return True

    def _loaded(self, ok: bool) -> None:
        with self._lock:
            self._probing = False
            if ok:
                self._backoff.succeeded()
            else:
                self._backoff.failed()

    def _entry(self, session_id: str) -> _Entry:
        with self._lock:
            entry = self._sessions.get(session_id)
            if entry is None:
                entry = self._sessions[session_id] = _Entry()
                while len(self._sessions) > self._max:
                    self._sessions.popitem(last=False)
            else:
                self._sessions.move_to_end(session_id)
            if entry.loaded or not self._may_query():
                return entry
        try:
            stored = self._queries.session_domains(session_id)
        except LookupKnowledgeError as error:
            self._loaded(False)
            logger.warning(
                "session domains unavailable from the audit store; using memory",
                extra={
                    "session_id": session_id,
                    "error": str(error),
                    "retry_in_s": self._backoff.delay_s,
                },
            )
            return entry
        except BaseException:
            self._loaded(False)
            raise
        self._loaded(True)
        with self._lock:
            if not entry.loaded:
                entry.domains = [*stored, *(d for d in entry.domains if d not in stored)]
                entry.loaded = True
        return entry

    def retrieved_domains(self, session_id: str) -> tuple[str, ...]:
        entry = self._entry(session_id)
        with self._lock:
            return tuple(entry.domains)

    def add_retrieved_domains(self, session_id: str, domains: Sequence[str]) -> None:
        entry = self._entry(session_id)
        with self._lock:
            for domain in domains:
                if domain and domain not in entry.domains:
                    entry.domains.append(domain)
