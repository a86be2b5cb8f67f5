"""``CheckHealth``: can this instance answer lookups and record them right now?

Three components, each checked live: the knowledge search (a round trip to Milvus), the
audit store (a one-row read), and the recorder's spool (records waiting for the
database are safe on disk, so a backlog is reported, not failed). ``ok`` is false when the
search or the audit store cannot be reached: a host's readiness probe should then take
the instance out of rotation.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

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

    def execute(self) -> Health:
        return Health(
            components=(
                self._knowledge(),
                _probe("audit store", self._audit_store),
                self._spool(),
            )
        )

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

    def _spool(self) -> ComponentHealth:
        try:
            pending = self._recorder.pending_count()
            failures = self._recorder.failure_count()
        except LookupKnowledgeError as error:
            return ComponentHealth("audit spool", False, f"{error.code}: {error.message}")
        detail = f"{pending} record(s) waiting for the database, {failures} write failure(s)"
        return ComponentHealth("audit spool", True, detail)


def _probe(name: str, check: Callable[[], str]) -> ComponentHealth:
    try:
        return ComponentHealth(name, True, check())
    except LookupKnowledgeError as error:
        return ComponentHealth(name, False, f"{error.code}: {error.message}")
