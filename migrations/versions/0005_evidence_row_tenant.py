"""invocation_evidence.row_tenant: the tenant of the stored row each shown block came from.

A tenant's rows are stored under ``storage_key(tenant, document_id)`` while the record
keeps the bare ``document_id``; two tenants may hold the same path, and a lookup may be
shown another tenant's public row (or any tenant's row with ``access.mode`` off). The
column says which copy was shown: the tenant, ``''`` for a row without a tenant, NULL for
rows written before this revision (not recorded: readers fall back to the invocation's
principal tenant and the untenanted rows, matched by the content hash).

Revision ID: 0005_evidence_row_tenant
Revises: 0004_access_control
Create Date: 2026-12-01 16:30:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005_evidence_row_tenant"
down_revision: str | Sequence[str] | None = "0004_access_control"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Not batch mode (see 0003): a nullable ADD COLUMN is native on both databases and
    # leaves the existing rows NULL without rewriting the table.
    op.add_column("invocation_evidence", sa.Column("row_tenant", sa.String(length=255)))


def downgrade() -> None:
    op.drop_column("invocation_evidence", "row_tenant")
