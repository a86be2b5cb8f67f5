"""How the commands show things: consoles (made when a command runs, not at import),
JSON on stdout, and the tables several commands share (ingest summary, evidence,
invocations).

Data in a table is shown literally, never parsed as rich markup: a document may
contain ``[/etc/hosts]``.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import asdict, is_dataclass
from datetime import datetime
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

if TYPE_CHECKING:
    from lookup_knowledge.application.ingest import IngestReport
    from lookup_knowledge.application.ports import InvocationSummary


def console(stderr: bool = False) -> Console:
    stream = sys.stderr if stderr else sys.stdout
    # Not a terminal (piped, CI, a test): rich would assume 80 columns and fold every table.
    width = None if stream.isatty() else 160
    # stderr lines are messages: never fold them (an error is one line).
    return Console(stderr=stderr, width=width, soft_wrap=stderr)


def error_line(message: str) -> None:
    """One plain line on stderr: no markup, no highlighting."""
    console(stderr=True).print(message, markup=False, highlight=False)


# ------------------------------------------------------------------ JSON


def plain(value: object) -> object:
    """``value`` as JSON-ready data: dataclasses as dicts, datetimes in ISO format,
    enums as their values, paths as strings."""
    if is_dataclass(value) and not isinstance(value, type):
        return plain(asdict(value))
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, Path):
        return str(value)
    return value


def print_json(value: object) -> None:
    sys.stdout.write(json.dumps(plain(value), ensure_ascii=False, indent=2) + "\n")


# ------------------------------------------------------------------ tables


def add_row(table: Table, *cells: str | Text) -> None:
    """Add a row whose cells are data: shown literally, never parsed as markup."""
    table.add_row(*(c if isinstance(c, Text) else Text(c) for c in cells))


def excerpt(text: str, width: int = 110) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


_INGEST_COLUMNS = (
    "documents",
    "added",
    "updated",
    "unchanged",
    "deleted",
    "empty",
    "chunks written",
    "chunks deleted",
    "failures",
    "seconds",
)


def ingest_table(report: IngestReport) -> Table:
    table = Table(title="Ingest summary")
    for column in _INGEST_COLUMNS:
        table.add_column(column, justify="right")
    figures = (
        report.documents_seen,
        report.added,
        report.updated,
        report.unchanged,
        report.deleted,
        report.empty,
        report.chunks_written,
        report.chunks_deleted,
        len(report.failures),
        f"{report.duration_ms / 1000:.1f}",
    )
    add_row(table, *(str(v) for v in figures))
    return table


def evidence_table(result: Mapping[str, Any]) -> Table:
    """The evidence blocks of a lookup's tool JSON."""
    table = Table(title=None, show_lines=False)
    table.add_column("#", justify="right")
    table.add_column("document_id", overflow="fold")
    table.add_column("source", overflow="fold")
    table.add_column("score", justify="right")
    table.add_column("excerpt", overflow="fold")
    for block in result["evidenceBlocks"]:
        add_row(
            table,
            str(block["rank"]),
            block["document_id"],
            block["source"],
            f"{block['score']:.3f}",
            excerpt(block["content"]),
        )
    return table


def show_lookup(out: Console, result: Mapping[str, Any]) -> None:
    """A lookup's tool JSON for a reader: message, verdicts, trace, evidence, id."""
    trace = result["retrievalTrace"]
    out.print(f"[bold]{escape(result['message'])}[/]")
    fallback = trace.get("fallbackReason")
    out.print(
        f"relevance: {result['relevanceLevel']}  completeness: {result['completenessHint']}  "
        f"mode: {trace.get('mode')}  filter: {escape(trace.get('filterApplied') or '-')}"
        + (f"  fallback: {fallback}" if fallback else ""),
    )
    if result["evidenceBlocks"]:
        out.print(evidence_table(result))
    out.print(f"[dim]invocation {result['invocationId']}[/]")


_INVOCATION_COLUMNS = (
    "seq",
    "started",
    "session",
    "step",
    "status",
    "mode",
    "returned",
    "quality",
    "ms",
    "query",
    "id",
)


def invocations_table(items: Sequence[InvocationSummary]) -> Table:
    table = Table()
    for column in _INVOCATION_COLUMNS:
        table.add_column(column, overflow="fold")
    for inv in items:
        add_row(
            table,
            str(inv.seq),
            inv.started_at.strftime("%Y-%m-%d %H:%M:%S"),
            inv.session_id,
            inv.step_id or "-",
            inv.status,
            inv.retrieval_mode,
            str(inv.returned_count),
            f"{inv.quality_score:.2f}",
            f"{inv.duration_ms:.0f}",
            excerpt(inv.query, 40),
            inv.id,
        )
    return table
