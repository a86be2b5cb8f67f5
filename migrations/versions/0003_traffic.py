"""tool_invocation.traffic: production, eval or replay, so statistics count agents only.

Eval and replay runs record every lookup like production does (they read their results
back from the audit store); the column keeps them apart, and ``audit stats``/``list``
filter by it (production by default). Existing rows are production: before this column
the store could not tell, and an eval's sessions stay readable by their session id.

Revision ID: 0003_traffic
Revises: 0002_shown_text_answer_checks
Create Date: 2026-12-01 00:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003_traffic"
down_revision: str | Sequence[str] | None = "0002_shown_text_answer_checks"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Not batch mode: on SQLite a batch rebuilds tool_invocation, and dropping the old
    # table with foreign keys on cascades to invocation_evidence. ADD COLUMN with a
    # constant default is native on both databases.
    op.add_column(
        "tool_invocation",
        sa.Column("traffic", sa.String(length=16), server_default="production", nullable=False),
    )
    if op.get_bind().dialect.name == "postgresql":  # SQLite cannot add a constraint later
        op.create_check_constraint(
            op.f("ck_tool_invocation_traffic"),
            "tool_invocation",
            "traffic IN ('production', 'eval', 'replay')",
        )
    op.create_index(
        "ix_tool_invocation_traffic_started_at", "tool_invocation", ["traffic", "started_at"]
    )


def downgrade() -> None:
    op.drop_index("ix_tool_invocation_traffic_started_at", table_name="tool_invocation")
    if op.get_bind().dialect.name == "postgresql":
        op.drop_constraint(op.f("ck_tool_invocation_traffic"), "tool_invocation", type_="check")
    op.drop_column("tool_invocation", "traffic")  # native DROP COLUMN (SQLite >= 3.35)
