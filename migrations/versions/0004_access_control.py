"""tool_invocation: the principal a lookup was made for and the access filter applied.

With access control (``access.mode``) every lookup runs for a principal the host
passes: its tenant and user are recorded as given, its groups as a sha256 digest (the
names may be sensitive; the digest still tells two group sets apart and lets a
verifier that is given the groups check they are the session's). ``access_mode`` is
the mode in force and ``access_filter`` the engine-neutral filter it applied. Rows
from before this revision had no principal and no access control: NULL and ``off``.
``audit list/stats --tenant`` read ``ix_tool_invocation_principal_tenant_started_at``.

Revision ID: 0004_access_control
Revises: 0003_traffic
Create Date: 2026-12-01 12:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004_access_control"
down_revision: str | Sequence[str] | None = "0003_traffic"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Not batch mode (see 0003): ADD COLUMN is native on both databases.
    op.add_column("tool_invocation", sa.Column("principal_tenant", sa.String(length=255)))
    op.add_column("tool_invocation", sa.Column("principal_user", sa.String(length=255)))
    op.add_column("tool_invocation", sa.Column("principal_groups_hash", sa.String(length=64)))
    op.add_column(
        "tool_invocation",
        sa.Column("access_mode", sa.String(length=16), server_default="off", nullable=False),
    )
    op.add_column("tool_invocation", sa.Column("access_filter", sa.Text()))
    op.create_index(
        "ix_tool_invocation_principal_tenant_started_at",
        "tool_invocation",
        ["principal_tenant", "started_at"],
    )


def downgrade() -> None:
    op.drop_index("ix_tool_invocation_principal_tenant_started_at", table_name="tool_invocation")
    for column in (
        "access_filter",
        "access_mode",
        "principal_groups_hash",
        "principal_user",
        "principal_tenant",
    ):
        op.drop_column("tool_invocation", column)
