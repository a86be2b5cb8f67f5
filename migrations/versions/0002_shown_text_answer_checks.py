"""Keep the text each block showed the agent; record answer checks and their claims.

Revision ID: 0002_shown_text_answer_checks
Revises: 0001_audit_store
Create Date: 2026-12-01 00:00:00

``invocation_evidence.shown_text`` is nullable: rows written before this revision (and
rows written with ``audit.keep-shown-text`` false) keep only the hash, and the checker
fetches the block from the knowledge store and compares hashes instead.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0002_shown_text_answer_checks"
down_revision: str | Sequence[str] | None = "0001_audit_store"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
_VERDICT = "verdict IN ('supported', 'unsupported', 'uncited', 'invalid_citation')"


def upgrade() -> None:
    with op.batch_alter_table("invocation_evidence") as batch:
        batch.add_column(sa.Column("shown_text", sa.Text(), nullable=True))
    op.create_index("ix_invocation_evidence_document_id", "invocation_evidence", ["document_id"])

    op.create_table(
        "answer_check",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("session_id", sa.String(length=255), nullable=False),
        sa.Column("step_id", sa.String(length=255), nullable=True),
        sa.Column("answer_format", sa.String(length=16), nullable=False),
        sa.Column("answer_text", sa.Text(), nullable=False),
        sa.Column("answer_hash", sa.String(length=64), nullable=False),
        sa.Column("verdict", sa.String(length=32), nullable=False),
        sa.Column("claim_count", sa.Integer(), nullable=False),
        sa.Column("supported_count", sa.Integer(), nullable=False),
        sa.Column("unsupported_count", sa.Integer(), nullable=False),
        sa.Column("uncited_count", sa.Integer(), nullable=False),
        sa.Column("invalid_citation_count", sa.Integer(), nullable=False),
        sa.Column("pending_in_spool", sa.Integer(), nullable=False),
        sa.Column("checker_version", sa.String(length=32), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint(_VERDICT, name=op.f("ck_answer_check_verdict")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_answer_check")),
    )
    op.create_index("ix_answer_check_session_created", "answer_check", ["session_id", "created_at"])
    op.create_index("ix_answer_check_created_at", "answer_check", ["created_at"])

    op.create_table(
        "claim_check",
        sa.Column("check_id", sa.Uuid(), nullable=False),
        sa.Column("claim_index", sa.Integer(), nullable=False),
        sa.Column("claim_text", sa.Text(), nullable=False),
        sa.Column("span_start", sa.Integer(), nullable=False),
        sa.Column("span_end", sa.Integer(), nullable=False),
        sa.Column("cited_ids", _JSON, nullable=False),
        sa.Column("citations", _JSON, nullable=False),
        sa.Column("verdict", sa.String(length=32), nullable=False),
        sa.Column("reasons", _JSON, nullable=False),
        sa.Column("support_document_id", sa.String(length=1024), nullable=True),
        sa.Column("support_start", sa.Integer(), nullable=True),
        sa.Column("support_end", sa.Integer(), nullable=True),
        sa.Column("support_score", sa.Float(), nullable=True),
        sa.Column("signals", _JSON, nullable=False),
        sa.CheckConstraint(_VERDICT, name=op.f("ck_claim_check_verdict")),
        sa.ForeignKeyConstraint(
            ["check_id"],
            ["answer_check.id"],
            name=op.f("fk_claim_check_check_id_answer_check"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("check_id", "claim_index", name=op.f("pk_claim_check")),
    )


def downgrade() -> None:
    op.drop_table("claim_check")
    op.drop_index("ix_answer_check_created_at", table_name="answer_check")
    op.drop_index("ix_answer_check_session_created", table_name="answer_check")
    op.drop_table("answer_check")
    op.drop_index("ix_invocation_evidence_document_id", table_name="invocation_evidence")
    with op.batch_alter_table("invocation_evidence") as batch:
        batch.drop_column("shown_text")
