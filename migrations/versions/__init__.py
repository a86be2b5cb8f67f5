"""Alembic revisions of the audit store (one module per revision)."""
