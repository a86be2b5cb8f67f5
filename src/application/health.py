"""``CheckHealth``: can this instance answer lookups and record them right now?

Three components, each checked live: the knowledge search (a round trip to Milvus), the
audit store (a one-row read), and the recorder's journal (records waiting for the
database are safe on disk, so a backlog is reported, not failed). ``ok`` is false when the
search or the audit store cannot be reached: a host's readiness probe should then take
the instance out of rotation.

A probe must answer promptly whatever a dependency does (a black-holed Milvus holds a
connection attempt for its own timeout, and more): with ``timeout_s`` each check runs in
a thread of its own and one that has not answered by then is reported failing ("no
answer within ...") while it finishes in the background. A component whose previous
check is still running is not asked again (no pile of threads behind a dead server):
its pending check is waited for instead.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from lookup_knowledge.application.ports import (
    AuditQueries,
    InvocationFilter,
    KnowledgeSearchPort,
    ToolInvocationRecorder,
)
from lookup_knowledge.domain.errors import LookupKnowledgeError


@dataclass(frozen=True, slots=True)
class ComponentHealth:
    name: str
    ok: bool
    detail: str
    #: Records waiting for the database (the journal's check only).
    pending: int | None = None
    #: "ok", "failing", or "empty" (reachable, but nothing ingested to search yet).
    status: str = ""

    def __post_init__(self) -> None:
        if not self.status:
            object.__setattr__(self, "status", "ok" if self.ok else "failing")

    def as_dict(self) -> dict[str, object]:
        return {"name": self.name, "ok": self.ok, "status": self.status, "detail": self.detail}


@dataclass(frozen=True, slots=True)
class Health:
    components: tuple[ComponentHealth, ...]

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.components)

    @property
    def journal_pending(self) -> int | None:
        """What the journal's check counted (None: it did not answer)."""
        return next((c.pending for c in self.components if c.pending is not None), None)

    @property
    def spool_pending(self) -> int | None:
        """The old name of ``journal_pending`` (``/readyz`` still emits ``spool_pending``
        for probes that read it)."""
        return self.journal_pending

    def as_dict(self) -> dict[str, object]:
        return {"ok": self.ok, "components": [c.as_dict() for c in self.components]}


class CheckHealth:
    def __init__(
        self,
        *,
        search: KnowledgeSearchPort,
        recorder: ToolInvocationRecorder,
        audit: Callable[[], AuditQueries] | None,
    ) -> None:
        """``audit`` None: the audit store is switched off (reported, and healthy)."""
        self._search = search
        self._recorder = recorder
        self._audit = audit
        self._lock = threading.Lock()
        self._running: dict[str, _Running] = {}

    def execute(self, timeout_s: float | None = None) -> Health:
        """Every component's state; with ``timeout_s``, each check bounded by it (they
        run at once, so the whole answer takes about ``timeout_s`` at most)."""
        checks: tuple[tuple[str, Callable[[], ComponentHealth]], ...] = (
            ("knowledge search", self._knowledge),
            ("audit store", lambda: _probe("audit store", self._audit_store)),
            ("audit journal", self._journal),
        )
        if timeout_s is None:
            return Health(components=tuple(check() for _, check in checks))
        deadline = time.monotonic() + max(0.0, timeout_s)
        running = [(name, self._start(name, check)) for name, check in checks]
        components = []
        for name, run in running:
            if run.done.wait(max(0.0, deadline - time.monotonic())) and run.result is not None:
                components.append(run.result)
            else:
                components.append(ComponentHealth(name, False, f"no answer within {timeout_s:g} s"))
        return Health(components=tuple(components))

    def _start(self, name: str, check: Callable[[], ComponentHealth]) -> _Running:
        with self._lock:
            run = self._running.get(name)
            if run is not None and not run.done.is_set():
                return run  # the last check of it is still waiting: wait for that one
            run = _Running()
            self._running[name] = run

        def work() -> None:
            try:
                run.result = check()
            except Exception as error:  # noqa: BLE001 - a probe reports, never raises
                run.result = ComponentHealth(name, False, f"{type(error).__name__}: {error}")
            finally:
                run.done.set()

        threading.Thread(target=work, name=f"health-{name}", daemon=True).start()
        return run

    def _knowledge(self) -> ComponentHealth:
        probed = _probe("knowledge search", self._search.check)
        if not probed.ok:
            return probed
        try:
            empty = self._search.holds_nothing()
        except LookupKnowledgeError as error:
            return ComponentHealth(probed.name, False, f"{error.code}: {error.message}")
        if not empty:
            return probed
        # Reachable, but every lookup would fail or find nothing: not ready, and why.
        detail = f"nothing ingested yet ({probed.detail}): ingest documents first"
        return ComponentHealth(probed.name, False, detail, status="empty")

    def _audit_store(self) -> str:
        if self._audit is None:
            return "disabled (audit.enabled=false): lookups are not recorded"
        self._audit().list_invocations(InvocationFilter(limit=1))
        return "reachable"

    def _journal(self) -> ComponentHealth:
        try:
            pending = self._recorder.pending_count()
            failures = self._recorder.failure_count()
            stranded = self._recorder.stranded_count()
        except LookupKnowledgeError as error:
            return ComponentHealth("audit journal", False, f"{error.code}: {error.message}")
        detail = f"{pending} record(s) waiting for the database, {failures} write failure(s)"
        if stranded:
            detail += (
                f"; {stranded} record(s) in journals of another audit database left "
                "untouched (start a process configured for it to move them)"
            )
        return ComponentHealth("audit journal", True, detail, pending)


@dataclass(eq=False)
class _Running:
    """One check in flight (or done): its thread sets ``result``, then ``done``."""

    done: threading.Event = field(default_factory=threading.Event)
    result: ComponentHealth | None = None


def _probe(name: str, check: Callable[[], str]) -> ComponentHealth:
    try:
        return ComponentHealth(name, True, check())
    except LookupKnowledgeError as error:
        return ComponentHealth(name, False, f"{error.code}: {error.message}")
