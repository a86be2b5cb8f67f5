"""``lookup-knowledge ingest`` and ``lookup-knowledge lookup``: fill the knowledge base
and ask it as an agent would."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from lookup_knowledge.adapters.cli.context import open_app
from lookup_knowledge.adapters.cli.render import (
    console,
    error_line,
    excerpt,
    ingest_table,
    print_json,
    show_lookup,
)
from lookup_knowledge.domain.model import SearchMode

if TYPE_CHECKING:
    from collections.abc import Sequence

    from lookup_knowledge.adapters.api import LookupApp
    from lookup_knowledge.application.ingest import IngestProgress, IngestReport


def run_ingest(
    lookup_app: LookupApp,
    paths: Sequence[Path],
    *,
    category: str | None = None,
    root: Path | None = None,
    doc_id: str | None = None,
    sync: bool = False,
) -> IngestReport:
    """``LookupApp.ingest`` with a progress bar on stderr (gone when it is done)."""
    with Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[chunks]} chunks"),
        TimeElapsedColumn(),
        TextColumn("{task.fields[current]}"),
        console=console(stderr=True),
        transient=True,
    ) as progress:
        task = progress.add_task("ingest", total=None, chunks=0, current="")

        def on_progress(event: IngestProgress) -> None:
            progress.update(
                task,
                description=event.phase,
                completed=event.documents_done,
                total=event.documents_total,
                chunks=event.chunks_written,
                current=excerpt(event.current, 50),
            )

        return lookup_app.ingest(
            paths, category=category, root=root, doc_id=doc_id, sync=sync, progress=on_progress
        )


def ingest(
    paths: Annotated[list[Path], typer.Argument(help="Files or folders to ingest.")],
    category: Annotated[str | None, typer.Option(help="Category for every document.")] = None,
    root: Annotated[
        Path | None, typer.Option(help="Folder doc_ids are relative to (default: each PATH).")
    ] = None,
    doc_id: Annotated[str | None, typer.Option(help="doc_id for a single file.")] = None,
    sync: Annotated[
        bool, typer.Option("--sync", help="Delete documents that disappeared from PATHs.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Ingest Markdown, text and HTML files: chunk, embed, write to Milvus (idempotent)."""
    with open_app() as lookup_app:
        report = run_ingest(
            lookup_app, paths, category=category, root=root, doc_id=doc_id, sync=sync
        )
    if as_json:
        print_json(report.as_dict())
        return
    console().print(ingest_table(report))
    err = console(stderr=True)
    for failure in report.failures:
        err.print(f"[yellow]skipped[/] {escape(failure.source)}: {escape(failure.reason)}")


def lookup(
    query: Annotated[str, typer.Argument(help="What to look up.")],
    session: Annotated[str, typer.Option(help="Session id the call is recorded under.")] = "cli",
    step: Annotated[str | None, typer.Option(help="Step id within the session.")] = None,
    mode: Annotated[
        SearchMode | None,
        typer.Option(help="Search mode (default: rag.search-mode).", case_sensitive=False),
    ] = None,
    category: Annotated[
        str | None, typer.Option(help="Only this category (a hard filter, no retry).")
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the exact tool JSON the agent receives.")
    ] = False,
) -> None:
    """Run lookup_knowledge(QUERY) as an agent would; the call is recorded.

    Exits 1 when the lookup failed (status error), with the reason on stderr.
    """
    with open_app() as lookup_app:
        result = lookup_app.lookup_result(
            query, session_id=session, step_id=step, mode=mode, category=category
        )
    payload = result.to_tool_json()
    failed = result.error_code is not None
    if as_json:
        print_json(payload)
    elif not failed:
        show_lookup(console(), payload)
    if failed:
        error_line(f"error: {payload['message']}")
        raise typer.Exit(1)
