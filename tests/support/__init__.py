"""Helpers shared by test modules (imported explicitly; not a conftest)."""
