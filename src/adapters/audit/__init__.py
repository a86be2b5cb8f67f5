"""The SQL audit store: models, migrations entry points, engine, recorder, queries."""

from __future__ import annotations

from lookup_knowledge.adapters.audit.engine import create_audit_engine, normalise_url
from lookup_knowledge.adapters.audit.migrate import (
    AlembicAuditSchema,
    current_revision,
    downgrade_database,
    head_revision,
    upgrade_database,
)
from lookup_knowledge.adapters.audit.queries import SqlAuditQueries
from lookup_knowledge.adapters.audit.recorder import (
    SqlToolInvocationRecorder,
    build_sql_recorder,
)
from lookup_knowledge.adapters.audit.session_state import AuditSessionState

__all__ = [
    "AlembicAuditSchema",
    "AuditSessionState",
    "SqlAuditQueries",
    "SqlToolInvocationRecorder",
    "build_sql_recorder",
    "create_audit_engine",
    "current_revision",
    "downgrade_database",
    "head_revision",
    "normalise_url",
    "upgrade_database",
]
