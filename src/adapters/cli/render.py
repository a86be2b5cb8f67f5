"""How the commands show things: consoles (made when a command runs, not at import),
JSON on stdout, and the tables several commands share (ingest summary, evidence,
invocations).

Data in a table is shown literally, never parsed as rich markup: a document may
contain ``[/etc/hosts]``. Stored text (sources, titles, queries, ids, messages) goes
through ``shown`` before it reaches a terminal: a document may also contain ``ESC [31m``.
"""

from __future__ import annotations

import json
import re
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


# C0 controls but tab and newline, DEL, C1 controls, lone surrogates, and the Unicode
# bidirectional overrides and isolates (they reorder what a terminal shows).
_UNPRINTABLE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff\u202a-\u202e\u2066-\u2069]")


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def shown(text: str) -> str:
    """``text`` as it may be printed: every control character (tab and newline kept),
    lone surrogate and bidi override as a visible escape (``\\x1b``, ``\\udcff``), so
    stored content can neither drive the terminal nor break the output's encoding."""
    return _UNPRINTABLE.sub(_visible, text)


def error_line(message: str) -> None:
    """One plain line on stderr: no markup, no highlighting, no control characters."""
    console(stderr=True).print(shown(message), markup=False, highlight=False)


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


def _json_escape(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def json_text(value: object, *, indent: int | None = 2) -> str:
    """``value`` as JSON, non-ASCII text kept readable; the characters ``shown`` escapes
    are written as ``\\uXXXX`` escapes (JSON escapes C0 itself): the same data once
    parsed, nothing a terminal would act on when printed."""
    text = json.dumps(plain(value), ensure_ascii=False, indent=indent)
    # Outside strings JSON is ASCII, so every match is inside a string.
    return _UNPRINTABLE.sub(_json_escape, text)


def print_json(value: object) -> None:
    sys.stdout.write(json_text(value) + "\n")


# ------------------------------------------------------------------ tables


def add_row(table: Table, *cells: str | Text) -> None:
    """Add a row whose cells are data: shown literally, never parsed as markup."""
    table.add_row(*(c if isinstance(c, Text) else Text(shown(c)) for c in cells))


def excerpt(text: str, width: int = 110) -> str:
    """The first ``width`` characters of ``text`` on one line, safe to print."""
    flat = " ".join(shown(text).split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def literal(text: str) -> str:
    """Stored text for a rich markup string: shown, and its brackets not markup."""
    return escape(shown(text))


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
    table.add_column("score", justify="right")
    table.add_column("excerpt", overflow="fold")
    # The rank is the position (the agent profile does not repeat it); the id spells the
    # source.
    for rank, block in enumerate(result["evidenceBlocks"], 1):
        add_row(
            table,
            str(block.get("rank", rank)),
            block["document_id"],
            f"{block['score']:.3f}",
            excerpt(block["content"]),
        )
    return table


def show_lookup(out: Console, result: Mapping[str, Any]) -> None:
    """A lookup's tool JSON for a reader: message, verdicts, trace, evidence, id."""
    from lookup_knowledge.application.lookup.traces import RetrievalTrace

    trace = RetrievalTrace.from_wire(result["retrievalTrace"])
    # The tool JSON's message is written for the agent ("do not cite ..."): a person
    # reads what was found.
    count = len(result["evidenceBlocks"])
    if result["found"]:
        out.print(f"[bold]{count} evidence block{'' if count == 1 else 's'} found[/]")
    else:
        out.print("[bold]No evidence found in the knowledge base for this query.[/]")
    fallback = trace.fallback_reason
    out.print(
        f"relevance: {result['relevanceLevel']}  completeness: {result['completenessHint']}  "
        f"mode: {trace.mode}  filter: {literal(trace.filter_applied or '-')}"
        + (f"  fallback: {literal(fallback)}" if fallback else ""),
    )
    if result["evidenceBlocks"]:
        out.print(evidence_table(result))
    out.print(f"[dim]invocation {literal(str(result['invocationId']))}[/]")


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
