"""answer_check / claim_check: the verdict ``contradicted``, and answer_check.contradicted_count.

A claim whose aligned span says the opposite (a negation or direction it flips) is
``contradicted``. Both tables constrain ``verdict`` to a list, so the constraints are
replaced; ``contradicted_count`` joins the other per-verdict counts (0 for older rows).

PostgreSQL alters the constraints in place. SQLite cannot: each table is rebuilt (batch
mode). Rebuilding ``answer_check`` drops the old table, and with foreign keys on that
deletes its ``claim_check`` rows by cascade, so those rows are copied aside first and
put back after. A downgrade refuses nothing: ``contradicted`` rows become
``unsupported`` (the nearest verdict the old schema knows) before the constraint returns.

Revision ID: 0006_contradicted_verdict
Revises: 0005_evidence_row_tenant
Create Date: 2026-12-02 05:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006_contradicted_verdict"
down_revision: str | Sequence[str] | None = "0005_evidence_row_tenant"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_OLD = ("supported", "unsupported", "uncited", "invalid_citation")
_NEW = (*_OLD, "contradicted")
_TABLES = ("answer_check", "claim_check")
_BACKUP = "_claim_check_0006"


def _check(verdicts: Sequence[str]) -> str:
    return "verdict IN (" + ", ".join(f"'{v}'" for v in verdicts) + ")"


def _sqlite_rebuild(verdicts: Sequence[str], *, with_count: bool) -> None:
    op.execute(f"CREATE TABLE {_BACKUP} AS SELECT * FROM claim_check")
    op.execute("DELETE FROM claim_check")
    for table in _TABLES:
        with op.batch_alter_table(table, recreate="always") as batch:
            batch.drop_constraint(op.f(f"ck_{table}_verdict"), type_="check")
            batch.create_check_constraint(op.f(f"ck_{table}_verdict"), _check(verdicts))
            if table == "answer_check":
                if with_count:
                    batch.add_column(
                        sa.Column(
                            "contradicted_count", sa.Integer(), server_default="0", nullable=False
                        )
                    )
                else:
                    batch.drop_column("contradicted_count")
    op.execute(f"INSERT INTO claim_check SELECT * FROM {_BACKUP}")
    op.execute(f"DROP TABLE {_BACKUP}")


def upgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        _sqlite_rebuild(_NEW, with_count=True)
        return
    op.add_column(
        "answer_check",
        sa.Column("contradicted_count", sa.Integer(), server_default="0", nullable=False),
    )
    for table in _TABLES:
        op.drop_constraint(op.f(f"ck_{table}_verdict"), table, type_="check")
        op.create_check_constraint(op.f(f"ck_{table}_verdict"), table, _check(_NEW))


def downgrade() -> None:
    for table in _TABLES:
        op.execute(f"UPDATE {table} SET verdict = 'unsupported' WHERE verdict = 'contradicted'")
    op.execute("UPDATE answer_check SET unsupported_count = unsupported_count + contradicted_count")
    if op.get_bind().dialect.name == "sqlite":
        _sqlite_rebuild(_OLD, with_count=False)
        return
    for table in _TABLES:
        op.drop_constraint(op.f(f"ck_{table}_verdict"), table, type_="check")
        op.create_check_constraint(op.f(f"ck_{table}_verdict"), table, _check(_OLD))
    op.drop_column("answer_check", "contradicted_count")
