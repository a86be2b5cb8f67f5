"""``AuditSessionState``: retrievedDomainsThisSession backed by the audit store.

A session's domains are loaded from the store once per process (so a session that moves
between workers, or survives a restart, keeps its history) and then kept in memory and
extended by the lookups this process runs. If the store cannot be read, the in-memory
view is used and the load is retried on the next call: a lookup never fails for it.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Sequence

from lookup_knowledge.application.audit import AuditQueries
from lookup_knowledge.application.ports import SessionStatePort
from lookup_knowledge.domain.errors import LookupKnowledgeError

logger = logging.getLogger(__name__)


class _Entry:
    __slots__ = ("domains", "loaded")

    def __init__(self) -> None:
        self.domains: list[str] = []
        self.loaded = False


class AuditSessionState(SessionStatePort):
    def __init__(self, queries: AuditQueries, *, max_sessions: int = 10_000) -> None:
        if max_sessions < 1:
            raise ValueError("max_sessions must be >= 1")
        self._queries = queries
        self._max = max_sessions
        self._sessions: OrderedDict[str, _Entry] = OrderedDict()
        self._lock = threading.Lock()

    def _entry(self, session_id: str) -> _Entry:
        with self._lock:
            entry = self._sessions.get(session_id)
            if entry is None:
                entry = self._sessions[session_id] = _Entry()
                while len(self._sessions) > self._max:
                    self._sessions.popitem(last=False)
            else:
                self._sessions.move_to_end(session_id)
            if entry.loaded:
                return entry
        try:
            stored = self._queries.session_domains(session_id)
        except LookupKnowledgeError as error:
            logger.warning(
                "session domains unavailable from the audit store; using memory",
                extra={"session_id": session_id, "error": str(error)},
            )
            return entry
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
