"""``lookup-knowledge eval replay``: re-run logged lookups under a changed configuration,
compare their evidence with what was shown, and gate on a threshold (exit 1)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from lookup_knowledge.adapters.cli.context import parse_when
from lookup_knowledge.adapters.cli.eval.common import (
    EMBEDDER_HELP,
    ProgressBar,
    SettingsLoader,
    refuse_beside_server,
)
from lookup_knowledge.adapters.cli.render import console, error_line, print_json
from lookup_knowledge.adapters.evaluation.configurations import parse_set_options
from lookup_knowledge.application.evaluation import (
    OverlapMeasure,
    ReplaySelection,
    ReplayThreshold,
)
from lookup_knowledge.application.ports import TimeRange
from lookup_knowledge.domain.model import Traffic

if TYPE_CHECKING:
    from lookup_knowledge.application.evaluation import ReplayReport


def _selection(
    session: str | None,
    since: str | None,
    until: str | None,
    limit: int | None,
    traffic: Traffic = Traffic.PRODUCTION,
) -> ReplaySelection:
    start, end = parse_when(since, "--since"), parse_when(until, "--until")
    return ReplaySelection(
        session_id=session,
        time_range=TimeRange(start, end) if start is not None or end is not None else None,
        limit=limit,
        traffic=traffic,
    )


def _threshold(
    min_overlap: float | None, overlap: OverlapMeasure, max_lost: int | None
) -> ReplayThreshold | None:
    if min_overlap is None and max_lost is None:
        return None
    return ReplayThreshold(min_overlap if min_overlap is not None else 0.0, overlap, max_lost)


def _show_replay(report: ReplayReport, show: int, written: Path | None) -> None:
    from lookup_knowledge.adapters.evaluation.reports import (
        replay_queries_table,
        replay_summary_table,
    )

    out = console()
    out.print(replay_summary_table(report))
    if show and report.unchanged < len(report.queries):
        out.print(replay_queries_table(report, show))
    if written is not None:
        out.print(f"wrote {written}")


def replay(
    ctx: typer.Context,
    session: Annotated[str | None, typer.Option(help="Replay the lookups of this session.")] = None,
    since: Annotated[
        str | None, typer.Option(help="Or of a time range: ISO date/time (inclusive).")
    ] = None,
    until: Annotated[str | None, typer.Option(help="ISO date/time (exclusive).")] = None,
    set_: Annotated[
        list[str] | None,
        typer.Option("--set", help="The changed configuration, key=value (repeatable)."),
    ] = None,
    min_overlap: Annotated[
        float | None,
        typer.Option(min=0.0, max=1.0, help="Fail (exit 1) when the mean overlap is below this."),
    ] = None,
    overlap: Annotated[
        OverlapMeasure, typer.Option(help="Overlap the threshold applies to.")
    ] = OverlapMeasure.JACCARD,
    max_lost: Annotated[
        int | None,
        typer.Option(min=0, help="Fail when more queries than this lost all their evidence."),
    ] = None,
    limit: Annotated[int | None, typer.Option(min=1, help="Replay at most N lookups.")] = None,
    traffic: Annotated[
        Traffic, typer.Option(help="With --since/--until: whose lookups (agents' by default).")
    ] = Traffic.PRODUCTION,
    embedder: Annotated[str | None, typer.Option(help=EMBEDDER_HELP)] = None,
    data_dir: Annotated[
        Path | None, typer.Option(help="Data directory (Milvus Lite file, SQLite audit).")
    ] = None,
    collection: Annotated[
        str | None, typer.Option(help="Collection to search (an eval session's collection).")
    ] = None,
    out: Annotated[
        Path | None, typer.Option(help="Write the full report as JSON here.", dir_okay=False)
    ] = None,
    show: Annotated[int, typer.Option(min=0, help="Changed queries to list.")] = 20,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Re-run logged lookups under a changed configuration and compare their evidence."""
    from lookup_knowledge.adapters.api import create_app
    from lookup_knowledge.adapters.evaluation.reports import write_json

    selection = _selection(session, since, until, limit, traffic)
    threshold = _threshold(min_overlap, overlap, max_lost)
    settings = SettingsLoader(ctx, data_dir, embedder).load(
        parse_set_options(set_ or []), collection=collection
    )
    refuse_beside_server(settings)
    with create_app(settings) as lookup_app, ProgressBar(console(stderr=True)) as bar:
        report = lookup_app.replayer().execute(
            selection, settings.to_lookup_config(), threshold=threshold, progress=bar
        )
    data = report.as_dict()
    if out is not None:
        write_json(data, out)
    if as_json:
        print_json(data)
    else:
        _show_replay(report, show, out)
    if not report.passed:
        for reason in report.failures:
            error_line(f"replay threshold failed: {reason}")
        raise typer.Exit(1)
