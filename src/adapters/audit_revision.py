"""The audit database's schema revision, read and migrated without the knowledge
search or the embedder (``lookup-knowledge db``)."""

from __future__ import annotations

from dataclasses import dataclass

from lookup_knowledge.adapters.config import Settings
from lookup_knowledge.adapters.container import Container
from lookup_knowledge.application.ports import AuditSchema


@dataclass(frozen=True, slots=True)
class AuditRevision:
    """Where the audit database's schema is (None: empty) and the newest this version
    knows."""

    current: str | None
    head: str

    @property
    def at_head(self) -> bool:
        return self.current == self.head


def _audit_schema(settings: Settings) -> AuditSchema:
    schema: AuditSchema = Container(settings=settings).audit_schema()
    return schema


def upgrade_audit_database(settings: Settings, revision: str = "head") -> str | None:
    """Migrate the configured audit database to ``revision``; returns where it is now.
    Needs neither Milvus nor the embedder."""
    return _audit_schema(settings).upgrade(revision)


def audit_database_revision(settings: Settings) -> AuditRevision:
    """The configured audit database's schema revision and the packaged head."""
    schema = _audit_schema(settings)
    return AuditRevision(current=schema.current(), head=schema.head())
