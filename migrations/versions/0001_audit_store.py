"""Audit store: tool_invocation and invocation_evidence.

Revision ID: 0001_audit_store
Revises:
Create Date: 2025-01-01 00:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0001_audit_store"
down_revision: str | Sequence[str] | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "tool_invocation",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("session_id", sa.String(length=255), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("step_id", sa.String(length=255), nullable=True),
        sa.Column("tool_call_id", sa.String(length=255), nullable=True),
        sa.Column("tool_name", sa.String(length=255), nullable=False),
        sa.Column("query", sa.Text(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("error_code", sa.String(length=255), nullable=True),
        sa.Column("error_message", sa.Text(), nullable=True),
        sa.Column("quality_score", sa.Float(), nullable=False),
        sa.Column("relevance_level", sa.String(length=32), nullable=False),
        sa.Column("retrieval_mode", sa.String(length=16), nullable=False),
        sa.Column("filter_applied", sa.Text(), nullable=True),
        sa.Column("fallback_reason", sa.String(length=255), nullable=True),
        sa.Column("retrieve_k", sa.Integer(), nullable=False),
        sa.Column("return_n", sa.Integer(), nullable=False),
        sa.Column("candidate_count", sa.Integer(), nullable=False),
        sa.Column("returned_count", sa.Integer(), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("duration_ms", sa.Float(), nullable=False),
        sa.Column("trace_id", sa.String(length=64), nullable=True),
        sa.Column("span_id", sa.String(length=32), nullable=True),
        sa.Column(
            "retrieval_details",
            sa.JSON().with_variant(postgresql.JSONB(), "postgresql"),
            nullable=False,
        ),
        sa.Column(
            "recorded_at",
            sa.DateTime(timezone=True),
            server_default=sa.func.now(),
            nullable=False,
        ),
        sa.CheckConstraint(
            "status IN ('ok', 'no_evidence', 'error')", name=op.f("ck_tool_invocation_status")
        ),
        sa.CheckConstraint("seq >= 1", name=op.f("ck_tool_invocation_seq_positive")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_tool_invocation")),
        sa.UniqueConstraint("session_id", "seq", name=op.f("uq_tool_invocation_session_id_seq")),
    )
    op.create_index("ix_tool_invocation_started_at", "tool_invocation", ["started_at"])
    op.create_index(
        "ix_tool_invocation_status_started_at", "tool_invocation", ["status", "started_at"]
    )
    op.create_index("ix_tool_invocation_session_step", "tool_invocation", ["session_id", "step_id"])

    op.create_table(
        "invocation_evidence",
        sa.Column("invocation_id", sa.Uuid(), nullable=False),
        sa.Column("rank", sa.Integer(), nullable=False),
        sa.Column("session_id", sa.String(length=255), nullable=False),
        sa.Column("document_id", sa.String(length=1024), nullable=False),
        sa.Column("doc_id", sa.String(length=1024), nullable=True),
        sa.Column("chunk_index", sa.Integer(), nullable=True),
        sa.Column("source", sa.Text(), nullable=False),
        sa.Column("category", sa.String(length=255), nullable=False),
        sa.Column("score_before", sa.Float(), nullable=False),
        sa.Column("score_after", sa.Float(), nullable=False),
        sa.Column("projected", sa.Boolean(), nullable=False),
        sa.Column("in_context_pack", sa.Boolean(), nullable=False),
        sa.Column("content_hash", sa.String(length=128), nullable=False),
        sa.ForeignKeyConstraint(
            ["invocation_id"],
            ["tool_invocation.id"],
            name=op.f("fk_invocation_evidence_invocation_id_tool_invocation"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("invocation_id", "rank", name=op.f("pk_invocation_evidence")),
    )
    op.create_index(
        "ix_invocation_evidence_session_document",
        "invocation_evidence",
        ["session_id", "document_id"],
    )


def downgrade() -> None:
    op.drop_index("ix_invocation_evidence_session_document", table_name="invocation_evidence")
    op.drop_table("invocation_evidence")
    op.drop_index("ix_tool_invocation_session_step", table_name="tool_invocation")
    op.drop_index("ix_tool_invocation_status_started_at", table_name="tool_invocation")
    op.drop_index("ix_tool_invocation_started_at", table_name="tool_invocation")
    op.drop_table("tool_invocation")
