"""Small real adapters for time, session state and disabled recording."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from datetime import UTC, datetime

from lookup_knowledge.application.ports import (
    Clock,
    RecordOutcome,
    SessionState,
    ToolInvocation,
    ToolInvocationRecorder,
)


class SystemClock(Clock):
    def now(self) -> datetime:
        return datetime.now(UTC)

    def monotonic(self) -> float:
        return time.perf_counter()


class InMemorySessionState(SessionState):
    """Per-process memory of the domains each session retrieved, first-seen order."""

    def __init__(self, max_sessions: int = 10_000) -> None:
        self._domains: dict[str, list[str]] = {}
        self._lock = threading.Lock()
        self._max_sessions = max_sessions

    def retrieved_domains(self, session_id: str) -> tuple[str, ...]:
        with self._lock:
            return tuple(self._domains.get(session_id, ()))

    def add_retrieved_domains(self, session_id: str, domains: Sequence[str]) -> None:
        with self._lock:
            known = self._domains.setdefault(session_id, [])
            for domain in domains:
                if domain and domain not in known:
                    known.append(domain)
            if len(self._domains) > self._max_sessions:
                # Forget the oldest session (dicts keep insertion order).
                self._domains.pop(next(iter(self._domains)))


class DisabledRecorder(ToolInvocationRecorder):
    """Recording switched off by configuration (``audit.enabled=false``)."""

    def record(self, invocation: ToolInvocation) -> RecordOutcome:
        return RecordOutcome.DISABLED

    def flush(self, session_id: str | None = None, timeout_s: float = 10.0) -> bool:
        return True

    def pending_count(self, session_id: str | None = None) -> int:
        return 0

    def failure_count(self) -> int:
        return 0
