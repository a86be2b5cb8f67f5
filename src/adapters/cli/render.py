"""Pieces the command-line apps share (``lookup-knowledge`` and its ``eval`` group)."""

from __future__ import annotations

import sys
from datetime import UTC, datetime

from rich.console import Console

from lookup_knowledge.domain.errors import InvalidInputError


def console(stderr: bool = False) -> Console:
    stream = sys.stderr if stderr else sys.stdout
    # Not a terminal (piped, CI, a test): rich would assume 80 columns and fold every table.
    width = None if stream.isatty() else 160
    # stderr lines are messages: never fold them (an error is one line).
    return Console(stderr=stderr, width=width, soft_wrap=stderr)


def parse_when(value: str | None, name: str) -> datetime | None:
    """An ISO date or datetime option; a naive one is taken as UTC."""
    if value is None:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise InvalidInputError(f"{name} must be an ISO date or datetime, got {value!r}") from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
