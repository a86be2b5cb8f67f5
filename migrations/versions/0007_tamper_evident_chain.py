"""The tamper-evident trail: audit_chain, audit_chain_head, audit_checkpoint.

Every record (an invocation with its evidence rows, an answer check with its claim rows)
gets one chain entry: the SHA-256 of its canonical content and the hash of the entry
before it (``lookup_knowledge.domain.trail``). The records already stored are chained
here, oldest first (invocations by start time, answer checks by creation time, merged),
each entry marked ``chained_at_upgrade``: the chain proves they are unchanged from now
on, not that they were unchanged before. No checkpoint is signed here (the migration has
no key): the first process with its key signs the head.

The records are hashed with record format version 1 (the columns as of this revision),
so a later upgrade that runs this step still hashes what a verifier of version 1 reads.

Downgrade drops the three tables; the records are left as they are.

Revision ID: 0007_tamper_evident_chain
Revises: 0006_contradicted_verdict
Create Date: 2026-12-02 08:30:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007_tamper_evident_chain"
down_revision: str | Sequence[str] | None = "0006_contradicted_verdict"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_CHUNK = 2000


def upgrade() -> None:
    op.create_table(
        "audit_chain",
        sa.Column("position", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("record_id", sa.Uuid(), nullable=False),
        sa.Column("session_id", sa.String(length=255), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=True),
        sa.Column("record_hash", sa.String(length=64), nullable=False),
        sa.Column("prev_hash", sa.String(length=64), nullable=False),
        sa.Column("entry_hash", sa.String(length=64), nullable=False),
        sa.Column("recorded_at", sa.String(length=32), nullable=False),
        sa.Column("chained_at_upgrade", sa.Boolean(), server_default=sa.false(), nullable=False),
        sa.PrimaryKeyConstraint("position", name=op.f("pk_audit_chain")),
        sa.UniqueConstraint("record_id", name=op.f("uq_audit_chain_record_id")),
    )
    op.create_index("ix_audit_chain_session_id", "audit_chain", ["session_id"])
    op.create_index("ix_audit_chain_recorded_at", "audit_chain", ["recorded_at"])
    op.create_table(
        "audit_chain_head",
        sa.Column("id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("position", sa.BigInteger(), nullable=False),
        sa.Column("entry_hash", sa.String(length=64), nullable=False),
        sa.Column("signed_number", sa.BigInteger(), server_default="0", nullable=False),
        sa.Column("signed_position", sa.BigInteger(), server_default="0", nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_audit_chain_head")),
    )
    op.create_table(
        "audit_checkpoint",
        sa.Column("number", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("position", sa.BigInteger(), nullable=False),
        sa.Column("head_hash", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.String(length=32), nullable=False),
        sa.Column("prev_checkpoint", sa.String(length=64), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("pruned_through", sa.BigInteger(), nullable=False),
        sa.Column("key_id", sa.String(length=64), nullable=False),
        sa.Column("signature", sa.String(length=256), nullable=False),
        sa.PrimaryKeyConstraint("number", name=op.f("pk_audit_checkpoint")),
    )
    _chain_existing(op.get_bind())


def _chain_existing(conn: sa.Connection) -> None:
    from lookup_knowledge.adapters.audit.chain_upgrade import chain_existing_records

    chain_existing_records(conn, chunk=_CHUNK)


def downgrade() -> None:
    op.drop_table("audit_checkpoint")
    op.drop_table("audit_chain_head")
    op.drop_index("ix_audit_chain_recorded_at", table_name="audit_chain")
    op.drop_index("ix_audit_chain_session_id", table_name="audit_chain")
    op.drop_table("audit_chain")
