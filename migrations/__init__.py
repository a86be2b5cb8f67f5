"""Alembic environment of the audit store, shipped inside the wheel.

Run it through ``lookup_knowledge.adapters.audit.upgrade_database(url)`` (the CLI's
``lookup-knowledge db upgrade`` calls the same function); no alembic.ini is needed.
"""
