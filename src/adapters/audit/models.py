"""SQLAlchemy 2 models of the audit store.

``tool_invocation`` holds one row per ``lookup_knowledge`` call; ``invocation_evidence``
one row per block the agent was shown. The evidence rows repeat ``session_id`` so that
citation verification ("was this document_id returned to this session?") is a lookup in
``ix_invocation_evidence_session_document`` without touching JSON or scanning a session.

The Alembic revisions in ``lookup_knowledge.migrations`` create exactly this schema; a
test runs autogenerate against the migrated database and expects no difference.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    CheckConstraint,
    DateTime,
    Dialect,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    Uuid,
    false,
    func,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship
from sqlalchemy.types import TypeDecorator

from lookup_knowledge.application.tool import MAX_DOCUMENT_ID_CHARS, MAX_ID_CHARS

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class UTCDateTime(TypeDecorator[datetime]):
    """A timezone-aware UTC datetime on every dialect.

    PostgreSQL stores ``timestamptz``; SQLite has no time zones, so values are stored as
    naive UTC and given ``tzinfo=UTC`` again on the way out. Naive inputs are taken as UTC.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        value = value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        at = value if isinstance(value, datetime) else datetime.fromisoformat(str(value))
        return at.replace(tzinfo=UTC) if at.tzinfo is None else at.astimezone(UTC)


JSONDocument = JSON().with_variant(JSONB(), "postgresql")


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


class ToolInvocationRow(Base):
    __tablename__ = "tool_invocation"

    id: Mapped[uuid.UUID] = mapped_column(Uuid(), primary_key=True)
    session_id: Mapped[str] = mapped_column(String(MAX_ID_CHARS))
    seq: Mapped[int] = mapped_column(Integer)
    step_id: Mapped[str | None] = mapped_column(String(MAX_ID_CHARS))
    tool_call_id: Mapped[str | None] = mapped_column(String(MAX_ID_CHARS))
    tool_name: Mapped[str] = mapped_column(String(MAX_ID_CHARS))
    query: Mapped[str] = mapped_column(Text)
    status: Mapped[str] = mapped_column(String(16))
    error_code: Mapped[str | None] = mapped_column(String(MAX_ID_CHARS))
    error_message: Mapped[str | None] = mapped_column(Text)
    quality_score: Mapped[float] = mapped_column(Float)
    relevance_level: Mapped[str] = mapped_column(String(32))
    retrieval_mode: Mapped[str] = mapped_column(String(16))
    filter_applied: Mapped[str | None] = mapped_column(Text)
    fallback_reason: Mapped[str | None] = mapped_column(String(MAX_ID_CHARS))
    retrieve_k: Mapped[int] = mapped_column(Integer)
    return_n: Mapped[int] = mapped_column(Integer)
    candidate_count: Mapped[int] = mapped_column(Integer)
    returned_count: Mapped[int] = mapped_column(Integer)
    started_at: Mapped[datetime] = mapped_column(UTCDateTime())
    duration_ms: Mapped[float] = mapped_column(Float)
    trace_id: Mapped[str | None] = mapped_column(String(64))
    span_id: Mapped[str | None] = mapped_column(String(32))
    retrieval_details: Mapped[dict[str, Any]] = mapped_column(JSONDocument)
    # production / eval / replay: statistics and listings count production by default.
    traffic: Mapped[str] = mapped_column(String(16), server_default="production")
    # Who the lookup was for and the access filter applied (migration 0004).
    principal_tenant: Mapped[str | None] = mapped_column(String(MAX_ID_CHARS))
    principal_user: Mapped[str | None] = mapped_column(String(MAX_ID_CHARS))
    principal_groups_hash: Mapped[str | None] = mapped_column(String(64))
    access_mode: Mapped[str] = mapped_column(String(16), server_default="off")
    access_filter: Mapped[str | None] = mapped_column(Text)
    recorded_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), server_default=func.now()
    )

    evidence: Mapped[list[EvidenceRow]] = relationship(
        back_populates="invocation",
        order_by="EvidenceRow.rank",
        cascade="all, delete-orphan",
        passive_deletes=True,
    )

    __table_args__ = (
        UniqueConstraint("session_id", "seq"),
        CheckConstraint("status IN ('ok', 'no_evidence', 'error')", name="status"),
        CheckConstraint("seq >= 1", name="seq_positive"),
        CheckConstraint("traffic IN ('production', 'eval', 'replay')", name="traffic"),
        Index("ix_tool_invocation_started_at", "started_at"),
        Index("ix_tool_invocation_status_started_at", "status", "started_at"),
        Index("ix_tool_invocation_session_step", "session_id", "step_id"),
        Index("ix_tool_invocation_traffic_started_at", "traffic", "started_at"),
        Index("ix_tool_invocation_principal_tenant_started_at", "principal_tenant", "started_at"),
    )


class EvidenceRow(Base):
    __tablename__ = "invocation_evidence"

    invocation_id: Mapped[uuid.UUID] = mapped_column(
        Uuid(), ForeignKey("tool_invocation.id", ondelete="CASCADE"), primary_key=True
    )
    rank: Mapped[int] = mapped_column(Integer, primary_key=True)
    session_id: Mapped[str] = mapped_column(String(MAX_ID_CHARS))
    document_id: Mapped[str] = mapped_column(String(MAX_DOCUMENT_ID_CHARS))
    doc_id: Mapped[str | None] = mapped_column(String(MAX_DOCUMENT_ID_CHARS))
    chunk_index: Mapped[int | None] = mapped_column(Integer)
    source: Mapped[str] = mapped_column(Text)
    category: Mapped[str] = mapped_column(String(MAX_ID_CHARS))
    score_before: Mapped[float] = mapped_column(Float)
    score_after: Mapped[float] = mapped_column(Float)
    projected: Mapped[bool] = mapped_column(Boolean)
    in_context_pack: Mapped[bool] = mapped_column(Boolean)
    content_hash: Mapped[str] = mapped_column(String(128))
    # The exact text the agent received (revision 0002); NULL when only the hash is kept
    # (audit.keep-shown-text false) and in rows written before 0002.
    shown_text: Mapped[str | None] = mapped_column(Text)
    # The tenant of the stored row the block came from (revision 0005): '' for a row
    # without a tenant, NULL in rows written before 0005 (not recorded).
    row_tenant: Mapped[str | None] = mapped_column(String(MAX_ID_CHARS))

    invocation: Mapped[ToolInvocationRow] = relationship(back_populates="evidence")

    __table_args__ = (
        Index("ix_invocation_evidence_session_document", "session_id", "document_id"),
        # "which other session was shown this id?" (not_in_session citations)
        Index("ix_invocation_evidence_document_id", "document_id"),
    )


VERDICTS = ("supported", "unsupported", "uncited", "invalid_citation", "contradicted")
_VERDICT_CHECK = "verdict IN (" + ", ".join(f"'{v}'" for v in VERDICTS) + ")"


class AnswerCheckRow(Base):
    """One checked answer (``CheckAnswer``): its text, hash, overall verdict and counts."""

    __tablename__ = "answer_check"

    id: Mapped[uuid.UUID] = mapped_column(Uuid(), primary_key=True)
    session_id: Mapped[str] = mapped_column(String(MAX_ID_CHARS))
    step_id: Mapped[str | None] = mapped_column(String(MAX_ID_CHARS))
    answer_format: Mapped[str] = mapped_column(String(16))
    answer_text: Mapped[str] = mapped_column(Text)
    answer_hash: Mapped[str] = mapped_column(String(64))
    verdict: Mapped[str] = mapped_column(String(32))
    claim_count: Mapped[int] = mapped_column(Integer)
    supported_count: Mapped[int] = mapped_column(Integer)
    unsupported_count: Mapped[int] = mapped_column(Integer)
    uncited_count: Mapped[int] = mapped_column(Integer)
    invalid_citation_count: Mapped[int] = mapped_column(Integer)
    # revision 0006: 0 in rows written before the verdict existed
    contradicted_count: Mapped[int] = mapped_column(Integer, server_default="0")
    pending_in_spool: Mapped[int] = mapped_column(Integer)
    checker_version: Mapped[str] = mapped_column(String(32))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())

    __table_args__ = (
        CheckConstraint(_VERDICT_CHECK, name="verdict"),
        Index("ix_answer_check_session_created", "session_id", "created_at"),
        Index("ix_answer_check_created_at", "created_at"),
    )


class ClaimCheckRow(Base):
    """One claim of a checked answer: span, cited ids and their status, verdict, reasons,
    the supporting block and span, and the other signals (JSON)."""

    __tablename__ = "claim_check"

    check_id: Mapped[uuid.UUID] = mapped_column(
        Uuid(), ForeignKey("answer_check.id", ondelete="CASCADE"), primary_key=True
    )
    claim_index: Mapped[int] = mapped_column(Integer, primary_key=True)
    claim_text: Mapped[str] = mapped_column(Text)
    span_start: Mapped[int] = mapped_column(Integer)
    span_end: Mapped[int] = mapped_column(Integer)
    cited_ids: Mapped[list[Any]] = mapped_column(JSONDocument)
    citations: Mapped[list[Any]] = mapped_column(JSONDocument)
    verdict: Mapped[str] = mapped_column(String(32))
    reasons: Mapped[list[Any]] = mapped_column(JSONDocument)
    support_document_id: Mapped[str | None] = mapped_column(String(MAX_DOCUMENT_ID_CHARS))
    support_start: Mapped[int | None] = mapped_column(Integer)
    support_end: Mapped[int | None] = mapped_column(Integer)
    support_score: Mapped[float | None] = mapped_column(Float)
    signals: Mapped[dict[str, Any]] = mapped_column(JSONDocument)

    __table_args__ = (CheckConstraint(_VERDICT_CHECK, name="verdict"),)


tool_invocation: Table = Base.metadata.tables["tool_invocation"]
invocation_evidence: Table = Base.metadata.tables["invocation_evidence"]
answer_check: Table = Base.metadata.tables["answer_check"]
claim_check: Table = Base.metadata.tables["claim_check"]


# --- the tamper-evident trail (revision 0007; see chain.py) ------------------------------


class ChainEntryRow(Base):
    """One link of the hash chain per record, in commit order (``domain.trail``)."""

    __tablename__ = "audit_chain"

    position: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    kind: Mapped[str] = mapped_column(String(16))  # invocation | answer_check
    record_id: Mapped[uuid.UUID] = mapped_column(Uuid())
    session_id: Mapped[str] = mapped_column(String(MAX_ID_CHARS))
    seq: Mapped[int | None] = mapped_column(Integer)
    record_hash: Mapped[str] = mapped_column(String(64))
    prev_hash: Mapped[str] = mapped_column(String(64))
    entry_hash: Mapped[str] = mapped_column(String(64))
    # UTC, "YYYY-MM-DD HH:MM:SS.ffffff" (text: hashed as stored on every database)
    recorded_at: Mapped[str] = mapped_column(String(32))
    chained_at_upgrade: Mapped[bool] = mapped_column(Boolean, server_default=false())

    __table_args__ = (
        UniqueConstraint("record_id"),
        Index("ix_audit_chain_session_id", "session_id"),
        Index("ix_audit_chain_recorded_at", "recorded_at"),
    )


class ChainHeadRow(Base):
    """The chain's last position and hash (one row): what appends lock and extend."""

    __tablename__ = "audit_chain_head"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    position: Mapped[int] = mapped_column(BigInteger)
    entry_hash: Mapped[str] = mapped_column(String(64))
    # The newest checkpoint's number and position: a checkpoint deleted shows.
    signed_number: Mapped[int] = mapped_column(BigInteger, server_default="0")
    signed_position: Mapped[int] = mapped_column(BigInteger, server_default="0")


class CheckpointRow(Base):
    """A signed checkpoint (``domain.trail.Checkpoint``)."""

    __tablename__ = "audit_checkpoint"

    number: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    position: Mapped[int] = mapped_column(BigInteger)
    head_hash: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[str] = mapped_column(String(32))
    prev_checkpoint: Mapped[str] = mapped_column(String(64))
    kind: Mapped[str] = mapped_column(String(16))
    pruned_through: Mapped[int] = mapped_column(BigInteger)
    key_id: Mapped[str] = mapped_column(String(64))
    signature: Mapped[str] = mapped_column(String(256))


audit_chain: Table = Base.metadata.tables["audit_chain"]
audit_chain_head: Table = Base.metadata.tables["audit_chain_head"]
audit_checkpoint: Table = Base.metadata.tables["audit_checkpoint"]
