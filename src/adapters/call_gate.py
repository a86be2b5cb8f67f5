"""``CallGate``: the calls in flight of one ``LookupApp``, so closing it waits for them
before closing the recorder (a lookup whose evidence the agent saw must be recorded)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from lookup_knowledge.domain.errors import LookupKnowledgeError


class CallGate:
    def __init__(self, what: str) -> None:
        self._what = what
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._in_flight = 0
        self._closed = False

    @contextmanager
    def call(self) -> Iterator[None]:
        """One call in flight for the ``with`` block (refused once closed)."""
        self.enter()
        try:
            yield
        finally:
            self.leave()

    def enter(self) -> None:
        with self._lock:
            self._refuse_if_closed()
            self._in_flight += 1

    def leave(self) -> None:
        with self._lock:
            self._in_flight -= 1
            if self._in_flight == 0:
                self._idle.notify_all()

    def check_open(self) -> None:
        with self._lock:
            self._refuse_if_closed()

    def close(self, timeout_s: float) -> bool:
        """Refuse new calls and wait (up to ``timeout_s``) for those in flight; False
        when it was closed already."""
        with self._lock:
            if self._closed:
                return False
            self._closed = True
            self._idle.wait_for(lambda: self._in_flight == 0, timeout=timeout_s)
        return True

    def _refuse_if_closed(self) -> None:
        if self._closed:
            raise LookupKnowledgeError(f"this {self._what} is closed")
