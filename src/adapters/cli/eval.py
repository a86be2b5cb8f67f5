"""``lookup-knowledge eval ...``: the Eval harness and Replay on the command line.

    lookup-knowledge eval run ../shared/datasets/scifact --preset modes,caps
    lookup-knowledge eval run DATASET --config dense --config hybrid+cap-1 --limit-queries 100
    lookup-knowledge eval replay --session eval-<run>-dense --collection eval_scifact_onnx_minilm \\
        --set rag.max-chunks-per-document=1 --min-overlap 0.8

``run`` ingests the corpus into its own collection (``eval_<dataset>_<embedder>``,
synced to the corpus, reused by later runs), runs every judged query through the full
lookup pipeline once per configuration (one audit session each), scores what the audit
store recorded, prints the comparison table and writes ``<run>.json``, ``<run>.png`` and
``<run>.html`` under ``--out``. ``replay`` re-runs logged lookups under a changed
configuration and exits 1 when the evidence overlap falls below ``--min-overlap``.

The global ``--config``/``--data-dir`` of ``lookup-knowledge`` apply; ``--data-dir``
here wins over the global one.
"""

from __future__ import annotations

import json
import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from lookup_knowledge.adapters.cli.render import console, parse_when
from lookup_knowledge.adapters.config import LoadedSettings, load_settings
from lookup_knowledge.adapters.evaluation.beir import eval_collection_name, load_beir
from lookup_knowledge.adapters.evaluation.configurations import (
    ATOMS,
    PRESETS,
    as_set_options,
    configuration_overrides,
    depth_overrides,
    expand,
    parse_set_options,
)
from lookup_knowledge.adapters.evaluation.reports import (
    chart_png,
    eval_table,
    replay_queries_table,
    replay_summary_table,
    write_html,
    write_json,
)
from lookup_knowledge.application.evaluation import (
    EvalConfiguration,
    EvalProgress,
    OverlapMeasure,
    ReplaySelection,
    ReplayThreshold,
)
from lookup_knowledge.application.ports import TimeRange
from lookup_knowledge.domain.errors import (
    ConfigurationError,
    InvalidInputError,
    LookupKnowledgeError,
)

eval_app = typer.Typer(
    name="eval",
    help="Measure retrieval quality on a BEIR test collection; replay logged lookups "
    "under another configuration.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


class ChartFormat(StrEnum):
    both = "both"
    png = "png"
    html = "html"
    none = "none"


def _root_params(ctx: typer.Context) -> dict[str, Any]:
    """The parent ``lookup-knowledge`` options (``--config``, ``--data-dir``) when this
    sub-app runs under it; nothing when it runs on its own."""
    root = ctx.find_root()
    return dict(root.params) if root is not ctx else {}


def _load(
    ctx: typer.Context,
    *,
    data_dir: Path | None,
    embedder: str | None,
    overrides: dict[str, object] | None = None,
    collection: str | None = None,
) -> LoadedSettings:
    root = _root_params(ctx)
    values: dict[str, object] = {}
    directory = data_dir or root.get("data_dir")
    if directory is not None:
        values["data-dir"] = str(directory)
    if embedder:
        values["embedder.provider"] = embedder
    values.update(overrides or {})
    if collection:
        values["milvus.collection"] = collection
    return load_settings(config_file=root.get("config"), overrides=values)


class _Bar:
    """A rich progress bar driven by ``EvalProgress`` events (one task per phase)."""

    def __init__(self, console: Console) -> None:
        self._progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=console,
            transient=True,
        )
        self._tasks: dict[str, TaskID] = {}

    def __enter__(self) -> _Bar:
        self._progress.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._progress.__exit__(None, None, None)

    def __call__(self, event: EvalProgress) -> None:
        if event.phase == "done":
            return
        label = f"{event.configuration}: {event.phase}" if event.configuration else event.phase
        task = self._tasks.get(label)
        if task is None:
            task = self._progress.add_task(label, total=event.total)
            self._tasks[label] = task
        self._progress.update(task, completed=event.done, total=event.total)


# ------------------------------------------------------------------ run

_EMBEDDER_HELP = "Embedder: onnx-minilm (default), hashing (fast, for smoke runs), openai, none."


@eval_app.command("run")
def run(
    ctx: typer.Context,
    dataset: Annotated[
        Path,
        typer.Argument(
            help="BEIR dataset folder: corpus.jsonl[.gz], queries.jsonl, qrels/<split>.tsv.",
            file_okay=False,
        ),
    ],
    config: Annotated[
        list[str] | None,
        typer.Option(
            "--config",
            "-C",
            help="A configuration to compare (repeatable): "
            + ", ".join(ATOMS)
            + "; join atoms with + (hybrid+cap-1).",
        ),
    ] = None,
    preset: Annotated[
        list[str] | None,
        typer.Option(
            help="Comma-separated groups of configurations: "
            + "; ".join(f"{k} = {', '.join(v)}" for k, v in PRESETS.items())
            + ". Default (no --config, no --preset): modes."
        ),
    ] = None,
    split: Annotated[
        str | None, typer.Option(help="qrels split (qrels/<split>.tsv); default: the only one.")
    ] = None,
    qrels: Annotated[
        Path | None, typer.Option(help="A qrels file instead of qrels/<split>.tsv.", dir_okay=False)
    ] = None,
    limit_queries: Annotated[
        int | None, typer.Option(min=1, help="Run only the first N judged queries.")
    ] = None,
    corpus_sample: Annotated[
        int | None,
        typer.Option(
            min=0,
            help="Restrict the corpus to the judged documents of the queries run plus N others "
            "(a separate collection; for quick runs).",
        ),
    ] = None,
    title_in_text: Annotated[
        bool,
        typer.Option(
            "--title-in-text",
            help="Index each entry's title in front of its text (BM25 then sees the title, "
            "as in BEIR's baseline); a separate collection.",
        ),
    ] = False,
    out: Annotated[
        Path | None,
        typer.Option(help="Folder for the JSON, PNG and HTML (default: <data-dir>/eval)."),
    ] = None,
    embedder: Annotated[str | None, typer.Option(help=_EMBEDDER_HELP)] = None,
    data_dir: Annotated[
        Path | None, typer.Option(help="Data directory (Milvus Lite file, SQLite audit).")
    ] = None,
    collection: Annotated[
        str | None,
        typer.Option(
            help="Eval collection (default eval_<dataset>_<embedder>); synced to the corpus."
        ),
    ] = None,
    set_: Annotated[
        list[str] | None,
        typer.Option("--set", help="Setting for every configuration, key=value (repeatable)."),
    ] = None,
    return_n: Annotated[
        int, typer.Option(min=1, help="Evidence blocks per lookup (the eval depth).")
    ] = 20,
    retrieve_k: Annotated[
        int, typer.Option(min=1, help="Candidates asked of the search engine.")
    ] = 50,
    chart: Annotated[ChartFormat, typer.Option(help="Chart files to write.")] = ChartFormat.both,
    skip_ingest: Annotated[
        bool, typer.Option("--skip-ingest", help="The collection is already loaded; do not ingest.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Ingest a BEIR corpus, run its judged queries under each configuration, score them."""
    from lookup_knowledge.adapters.api import create_app
    from lookup_knowledge.adapters.evaluation.harness import run_eval_for

    out_console, err_console = console(), console(stderr=True)
    names = expand(config or [], preset or [])
    beir = load_beir(
        dataset,
        split=split,
        qrels_file=qrels,
        limit_queries=limit_queries,
        corpus_sample=corpus_sample,
        title_in_text=title_in_text,
    )
    base = parse_set_options(set_ or [])
    if embedder == "none":
        base.setdefault("rag.search-mode", "sparse")  # no embedder: a BM25-only collection
    knowledge_collection = _load(
        ctx,
        data_dir=data_dir,
        embedder=embedder,
        overrides={k: v for k, v in base.items() if k != "milvus.collection"},
    ).settings.milvus.collection
    provider = _load(ctx, data_dir=data_dir, embedder=embedder, overrides=base).settings
    target = collection or eval_collection_name(beir, provider.embedder.provider.value)
    if target == knowledge_collection:
        raise InvalidInputError(
            f"collection {target!r} is the knowledge base's collection; an eval syncs its "
            "collection to the corpus (deleting other documents): choose another one"
        )
    depth = depth_overrides(return_n, retrieve_k)
    configurations: list[EvalConfiguration] = []
    replay_sets: dict[str, list[str]] = {}
    for name in names:
        changes = configuration_overrides(name)
        overrides = {**base, **depth, **changes}
        settings = _load(
            ctx, data_dir=data_dir, embedder=embedder, overrides=overrides, collection=target
        ).settings
        configurations.append(EvalConfiguration(name, settings.to_lookup_config(), changes))
        replay_sets[name] = as_set_options(overrides)
    app_settings = _load(
        ctx, data_dir=data_dir, embedder=embedder, overrides={**base, **depth}, collection=target
    ).settings

    err_console.print(
        f"eval of {beir.name}: {len(beir.dataset.queries)} queries, "
        + (
            f"corpus restricted to {len(beir.restricted_to)} documents"
            if beir.restricted_to is not None
            else "full corpus"
        )
        + f"; collection {target} in {app_settings.milvus_uri}; embedder "
        f"{app_settings.embedder.provider.value}; configurations: {', '.join(names)}"
    )
    with create_app(app_settings) as lookup_app, _Bar(err_console) as bar:
        report = run_eval_for(lookup_app).execute(
            beir.dataset, configurations, progress=bar, ingest=not skip_ingest
        )

    folder = out or app_settings.data_dir / "eval"
    replay_hint = {
        c.name: " ".join(
            [
                "lookup-knowledge eval replay",
                f"--session {c.session_id}",
                f"--data-dir {app_settings.data_dir}",
                f"--collection {target}",
                f"--embedder {app_settings.embedder.provider.value}",
                *(f"--set {s}" for s in replay_sets[c.name]),
            ]
        )
        for c in report.configurations
    }
    data = {
        **report.as_dict(),
        "collection": target,
        "milvusUri": app_settings.milvus_uri,
        "embedder": app_settings.embedder.provider.value,
        "corpus": str(beir.corpus_path),
        "qrels": str(beir.qrels_path),
        "corpusRestrictedTo": None if beir.restricted_to is None else len(beir.restricted_to),
        "titleInText": beir.title_in_text,
        "judgedQueriesWithoutText": list(beir.judged_without_text),
        "depth": depth,
        "baseOverrides": base,
        "replayCommands": replay_hint,
    }
    written = [write_json(data, folder / f"{report.run_id}.json")]
    if chart is not ChartFormat.none:
        png = chart_png(report)
        if chart in (ChartFormat.both, ChartFormat.png):
            path = folder / f"{report.run_id}.png"
            path.write_bytes(png)
            written.append(path)
        if chart in (ChartFormat.both, ChartFormat.html):
            written.append(write_html(report, folder / f"{report.run_id}.html", png))

    if as_json:
        sys.stdout.write(json.dumps(data, ensure_ascii=False, indent=2) + "\n")
    else:
        out_console.print(eval_table(report))
        if report.ingest is not None:
            ingest = report.ingest
            out_console.print(
                f"ingest: {ingest.documents_seen} documents ({ingest.added} added, "
                f"{ingest.updated} updated, {ingest.unchanged} unchanged, {ingest.empty} empty, "
                f"{ingest.deleted} deleted), {ingest.chunks_written} chunks written, "
                f"{len(ingest.failures)} failures, {ingest.duration_ms / 1000:.1f} s"
            )
        for c in report.configurations:
            if c.first_error:
                err_console.print(f"[yellow]{c.name}[/]: errors, first: {c.first_error}")
        for path in written:
            out_console.print(f"wrote {path}")
        out_console.print(
            f"audit sessions: {', '.join(c.session_id for c in report.configurations)}"
        )


# ------------------------------------------------------------------ replay


@eval_app.command("replay")
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
    embedder: Annotated[str | None, typer.Option(help=_EMBEDDER_HELP)] = None,
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
    from lookup_knowledge.adapters.evaluation.harness import replay_for

    out_console, err_console = console(), console(stderr=True)
    start, end = parse_when(since, "--since"), parse_when(until, "--until")
    selection = ReplaySelection(
        session_id=session,
        time_range=TimeRange(start, end) if start is not None or end is not None else None,
        limit=limit,
    )
    threshold = (
        ReplayThreshold(min_overlap if min_overlap is not None else 0.0, overlap, max_lost)
        if min_overlap is not None or max_lost is not None
        else None
    )
    settings = _load(
        ctx,
        data_dir=data_dir,
        embedder=embedder,
        overrides=parse_set_options(set_ or []),
        collection=collection,
    ).settings
    with create_app(settings) as lookup_app, _Bar(err_console) as bar:
        report = replay_for(lookup_app).execute(
            selection, settings.to_lookup_config(), threshold=threshold, progress=bar
        )
    data = report.as_dict()
    if out is not None:
        write_json(data, out)
    if as_json:
        sys.stdout.write(json.dumps(data, ensure_ascii=False, indent=2) + "\n")
    else:
        out_console.print(replay_summary_table(report))
        if show and report.unchanged < len(report.queries):
            out_console.print(replay_queries_table(report, show))
        if out is not None:
            out_console.print(f"wrote {out}")
    if not report.passed:
        for reason in report.failures:
            err_console.print(f"replay threshold failed: {reason}", markup=False, highlight=False)
        raise typer.Exit(1)


# ------------------------------------------------------------------ standalone entry point


def main() -> None:
    """``python -m lookup_knowledge.adapters.cli.eval``: the sub-app on its own,
    with the same exit codes as ``lookup-knowledge`` (2 bad input, 1 anything else)."""
    err_console = console(stderr=True)
    try:
        # With standalone_mode=False click *returns* the code of a typer.Exit.
        code = eval_app(standalone_mode=False)
    except typer.Exit as done:
        raise SystemExit(done.exit_code) from None
    except Exception as error:  # noqa: BLE001 - the CLI boundary: one line, not a traceback
        import click

        if isinstance(error, click.exceptions.ClickException):
            error.show()
            raise SystemExit(error.exit_code) from None
        code = 2 if isinstance(error, ConfigurationError | InvalidInputError) else 1
        kind = f"error ({error.code})" if isinstance(error, LookupKnowledgeError) else "error"
        err_console.print(f"{kind}: {error}", markup=False, highlight=False)
        raise SystemExit(code) from None
    raise SystemExit(code if isinstance(code, int) else 0)


if __name__ == "__main__":  # pragma: no cover
    main()
