"""``lookup-knowledge eval run``: ingest a BEIR corpus into its own collection, run its
judged queries under each configuration (one audit session each), score what the audit
store recorded, print the comparison and write ``<run>.json``/``.png``/``.html``."""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from lookup_knowledge.adapters.cli.context import server_holding_store
from lookup_knowledge.adapters.cli.eval.common import (
    EMBEDDER_HELP,
    ProgressBar,
    SettingsLoader,
    _root_params,
)
from lookup_knowledge.adapters.cli.render import console, error_line, print_json
from lookup_knowledge.adapters.evaluation.configurations import (
    ATOMS,
    PRESETS,
    as_set_options,
    configuration_overrides,
    depth_overrides,
    expand,
    parse_set_options,
)
from lookup_knowledge.adapters.local_server import call_server
from lookup_knowledge.application.evaluation import EvalConfiguration
from lookup_knowledge.domain.errors import InvalidInputError

if TYPE_CHECKING:
    from rich.console import Console

    from lookup_knowledge.adapters.config import Settings
    from lookup_knowledge.adapters.evaluation.beir import BeirDataset
    from lookup_knowledge.adapters.local_server import RunningServer
    from lookup_knowledge.application.evaluation import EvalReport
    from lookup_knowledge.application.evaluation.values import CalibrationBin


class ChartFormat(StrEnum):
    both = "both"
    png = "png"
    html = "html"
    none = "none"


@dataclass(frozen=True)
class _Plan:
    """What an eval run runs: the configurations (with the ``--set`` options that replay
    each), on which collection, with which settings for the app."""

    names: list[str]
    base: dict[str, object]
    depth: dict[str, object]
    collection: str
    configurations: list[EvalConfiguration]
    replay_sets: dict[str, list[str]]
    settings: Settings


def _eval_collection(
    loader: SettingsLoader, beir: BeirDataset, base: dict[str, object], collection: str | None
) -> str:
    """``--collection`` or ``eval_<dataset>_<embedder>``; never the knowledge base's own
    collection, which the eval's sync would empty of everything but the corpus."""
    knowledge = loader.load({k: v for k, v in base.items() if k != "milvus.collection"})
    provider = loader.load(base).embedder.provider.value
    target = collection or _collection_name(beir, provider)
    if target == knowledge.milvus.collection:
        raise InvalidInputError(
            f"collection {target!r} is the knowledge base's collection; an eval syncs its "
            "collection to the corpus (deleting other documents): choose another one"
        )
    return target


def _collection_name(beir: BeirDataset, embedder: str) -> str:
    from lookup_knowledge.adapters.evaluation.beir import eval_collection_name

    return eval_collection_name(beir, embedder)


def _plan(
    loader: SettingsLoader,
    beir: BeirDataset,
    names: list[str],
    base: dict[str, object],
    depth: dict[str, object],
    collection: str | None,
) -> _Plan:
    target = _eval_collection(loader, beir, base, collection)
    configurations: list[EvalConfiguration] = []
    replay_sets: dict[str, list[str]] = {}
    for name in names:
        changes = configuration_overrides(name)
        overrides = {**base, **depth, **changes}
        lookup_config = loader.load(overrides, collection=target).to_lookup_config()
        configurations.append(EvalConfiguration(name, lookup_config, changes))
        replay_sets[name] = as_set_options(overrides)
    app_settings = loader.load({**base, **depth}, collection=target)
    return _Plan(names, base, depth, target, configurations, replay_sets, app_settings)


def _announce(err: Console, beir: BeirDataset, plan: _Plan) -> None:
    corpus = (
        f"corpus restricted to {len(beir.restricted_to)} documents"
        if beir.restricted_to is not None
        else "full corpus"
    )
    err.print(
        f"eval of {beir.name}: {len(beir.dataset.queries)} queries, {corpus}"
        f"; collection {plan.collection} in {plan.settings.milvus_uri}; embedder "
        f"{plan.settings.embedder.provider.value}; configurations: {', '.join(plan.names)}"
    )


def _replay_commands(plan: _Plan, report: EvalReport) -> dict[str, str]:
    """Per configuration, the ``eval replay`` command that re-runs its session."""
    settings = plan.settings
    return {
        c.name: " ".join(
            [
                "lookup-knowledge eval replay",
                f"--session {c.session_id}",
                f"--data-dir {settings.data_dir}",
                f"--collection {plan.collection}",
                f"--embedder {settings.embedder.provider.value}",
                *(f"--set {s}" for s in plan.replay_sets[c.name]),
            ]
        )
        for c in report.configurations
    }


def _run_data(
    plan: _Plan, beir: BeirDataset, report: EvalReport, unanswerable_from: list[str]
) -> dict[str, object]:
    """The report as written to ``<run>.json``: the scores and how to reproduce them."""
    return {
        **report.as_dict(),
        "collection": plan.collection,
        "milvusUri": plan.settings.milvus_uri,
        "embedder": plan.settings.embedder.provider.value,
        "corpus": str(beir.corpus_path),
        "qrels": str(beir.qrels_path),
        "corpusRestrictedTo": None if beir.restricted_to is None else len(beir.restricted_to),
        "titleInText": beir.title_in_text,
        "judgedQueriesWithoutText": list(beir.judged_without_text),
        "unanswerableFrom": unanswerable_from,
        "depth": plan.depth,
        "baseOverrides": plan.base,
        "replayCommands": _replay_commands(plan, report),
    }


def _write_reports(
    data: dict[str, object], report: EvalReport, folder: Path, chart: ChartFormat
) -> list[Path]:
    from lookup_knowledge.adapters.evaluation.reports import chart_png, write_html, write_json

    written = [write_json(data, folder / f"{report.run_id}.json")]
    if chart is ChartFormat.none:
        return written
    png = chart_png(report)
    if chart in (ChartFormat.both, ChartFormat.png):
        path = folder / f"{report.run_id}.png"
        path.write_bytes(png)
        written.append(path)
    if chart in (ChartFormat.both, ChartFormat.html):
        written.append(write_html(report, folder / f"{report.run_id}.html", png))
    return written


def _show_run(report: EvalReport, written: list[Path]) -> None:
    from rich.table import Table

    from lookup_knowledge.adapters.evaluation.reports import calibration_rows, eval_table

    out, err = console(), console(stderr=True)
    out.print(eval_table(report))
    if any(c.unanswerable_queries for c in report.configurations):
        header, rows = calibration_rows(report)
        table = Table(title="Calibration: returned blocks per relevance bin: share judged relevant")
        for column in header:
            table.add_column(column)
        for row in rows:
            table.add_row(*row)
        out.print(table)
    if report.ingest is not None:
        ingest = report.ingest
        out.print(
            f"ingest: {ingest.documents_seen} documents ({ingest.added} added, "
            f"{ingest.updated} updated, {ingest.unchanged} unchanged, {ingest.empty} empty, "
            f"{ingest.deleted} deleted), {ingest.chunks_written} chunks written, "
            f"{len(ingest.failures)} failures, {ingest.duration_ms / 1000:.1f} s"
        )
    for c in report.configurations:
        if c.first_error:
            err.print(f"[yellow]{c.name}[/]: errors, first: {c.first_error}")
    for path in written:
        out.print(f"wrote {path}")
    out.print(f"audit sessions: {', '.join(c.session_id for c in report.configurations)}")


# The options of ``eval run``, one alias each, so the signature reads as a list.
_DatasetArgument = Annotated[
    Path,
    typer.Argument(
        help="BEIR dataset folder: corpus.jsonl[.gz], queries.jsonl, qrels/<split>.tsv.",
        file_okay=False,
    ),
]
_ConfigOption = Annotated[
    list[str] | None,
    typer.Option(
        "--config",
        "-C",
        help="A configuration to compare (repeatable): "
        + ", ".join(ATOMS)
        + "; join atoms with + (hybrid+cap-1).",
    ),
]
_PresetOption = Annotated[
    list[str] | None,
    typer.Option(
        help="Comma-separated groups of configurations: "
        + "; ".join(f"{k} = {', '.join(v)}" for k, v in PRESETS.items())
        + ". Default (no --config, no --preset): modes."
    ),
]
_SplitOption = Annotated[
    str | None, typer.Option(help="qrels split (qrels/<split>.tsv); default: the only one.")
]
_QrelsOption = Annotated[
    Path | None, typer.Option(help="A qrels file instead of qrels/<split>.tsv.", dir_okay=False)
]
_LimitQueriesOption = Annotated[
    int | None, typer.Option(min=1, help="Run only the first N judged queries.")
]
_CorpusSampleOption = Annotated[
    int | None,
    typer.Option(
        min=0,
        help="Restrict the corpus to the judged documents of the queries run plus N others "
        "(a separate collection; for quick runs).",
    ),
]
_TitleInTextOption = Annotated[
    bool,
    typer.Option(
        "--title-in-text",
        help="Index each entry's title in front of its text (BM25 then sees the title, "
        "as in BEIR's baseline); a separate collection.",
    ),
]
_OutOption = Annotated[
    Path | None,
    typer.Option(help="Folder for the JSON, PNG and HTML (default: <data-dir>/eval)."),
]
_EmbedderOption = Annotated[str | None, typer.Option(help=EMBEDDER_HELP)]
_DataDirOption = Annotated[
    Path | None, typer.Option(help="Data directory (Milvus Lite file, SQLite audit).")
]
_CollectionOption = Annotated[
    str | None,
    typer.Option(help="Eval collection (default eval_<dataset>_<embedder>); synced to the corpus."),
]
_SetOption = Annotated[
    list[str] | None,
    typer.Option("--set", help="Setting for every configuration, key=value (repeatable)."),
]
_ReturnNOption = Annotated[
    int, typer.Option(min=1, help="Evidence blocks per lookup (the eval depth).")
]
_RetrieveKOption = Annotated[
    int, typer.Option(min=1, help="Candidates asked of the search engine.")
]
_ChartOption = Annotated[ChartFormat, typer.Option(help="Chart files to write.")]
_SkipIngestOption = Annotated[
    bool, typer.Option("--skip-ingest", help="The collection is already loaded; do not ingest.")
]
_AsJsonOption = Annotated[bool, typer.Option("--json", help="Print the report as JSON.")]
_UnanswerableOption = Annotated[
    list[Path] | None,
    typer.Option(
        help="Questions the corpus cannot answer (repeatable): a queries .jsonl file, or "
        "another BEIR folder (its judged queries). Reported: the abstention rate "
        "(no_evidence) beside the found rate of the answerable queries.",
    ),
]


def run(
    ctx: typer.Context,
    dataset: _DatasetArgument,
    config: _ConfigOption = None,
    preset: _PresetOption = None,
    split: _SplitOption = None,
    qrels: _QrelsOption = None,
    limit_queries: _LimitQueriesOption = None,
    corpus_sample: _CorpusSampleOption = None,
    title_in_text: _TitleInTextOption = False,
    out: _OutOption = None,
    embedder: _EmbedderOption = None,
    data_dir: _DataDirOption = None,
    collection: _CollectionOption = None,
    set_: _SetOption = None,
    return_n: _ReturnNOption = 20,
    retrieve_k: _RetrieveKOption = 50,
    chart: _ChartOption = ChartFormat.both,
    skip_ingest: _SkipIngestOption = False,
    as_json: _AsJsonOption = False,
    unanswerable: _UnanswerableOption = None,
) -> None:
    """Ingest a BEIR corpus, run its judged queries under each configuration, score them."""
    from lookup_knowledge.adapters.api import create_app
    from lookup_knowledge.adapters.evaluation.beir import load_beir, load_unanswerable
    from lookup_knowledge.adapters.extras import require

    # Before the (long) ingest and runs, not when the scores are computed.
    require("eval", "lookup-knowledge eval run", "ir_measures", "matplotlib")

    names = expand(config or [], preset or [])
    beir = load_beir(
        dataset,
        split=split,
        qrels_file=qrels,
        limit_queries=limit_queries,
        corpus_sample=corpus_sample,
        title_in_text=title_in_text,
    )
    dataset_run = beir.dataset
    if unanswerable:
        dataset_run = replace(beir.dataset, unanswerable=load_unanswerable(unanswerable))
    base = parse_set_options(set_ or [])
    if embedder == "none":
        base.setdefault("rag.search-mode", "sparse")  # no embedder: a BM25-only collection
    loader = SettingsLoader(ctx, data_dir, embedder)
    plan = _plan(loader, beir, names, base, depth_overrides(return_n, retrieve_k), collection)
    err = console(stderr=True)
    _announce(err, beir, plan)
    server = server_holding_store(plan.settings)
    if server is not None:
        request = {
            "dataset": str(dataset.resolve()),
            "split": split,
            "qrels": None if qrels is None else str(qrels.resolve()),
            "limit_queries": limit_queries,
            "corpus_sample": corpus_sample,
            "title_in_text": title_in_text,
            "names": names,
            "base": base,
            "depth": depth_overrides(return_n, retrieve_k),
            "collection": collection,
            "embedder": embedder,
            "skip_ingest": skip_ingest,
            "unanswerable": [str(p.resolve()) for p in unanswerable or ()],
        }
        report, data = _eval_on_server(server, ctx, plan, request)
    else:
        with create_app(plan.settings) as lookup_app, ProgressBar(err) as bar:
            report = lookup_app.eval_runner().execute(
                dataset_run, plan.configurations, progress=bar, ingest=not skip_ingest
            )
        data = _run_data(plan, beir, report, [str(p) for p in unanswerable or ()])
    written = _write_reports(data, report, out or plan.settings.data_dir / "eval", chart)
    if as_json:
        print_json(data)
    else:
        _show_run(report, written)


def _eval_on_server(
    server: RunningServer, ctx: typer.Context, plan: _Plan, request: dict[str, Any]
) -> tuple[EvalReport, dict[str, Any]]:
    """The server holds the Milvus Lite file: it runs the eval (no progress bar)."""
    error_line(f"note: through {server.describe()}, which holds the Milvus Lite file")
    root = _root_params(ctx)
    answer: dict[str, Any] = call_server(
        server,
        "eval",
        {
            **request,
            "config_file": None if root.get("config") is None else str(root["config"]),
            "data_dir": str(plan.settings.data_dir),
        },
    )
    return eval_report_from_dict(answer["report"]), answer["data"]


def run_for_cli(body: dict[str, Any]) -> dict[str, Any]:
    """``eval run`` as the CLI beside this server asked for it (``run`` sends ``body``):
    in this process, which holds the Milvus Lite file, with a second app on the eval's
    settings (it shares the file with the server's own). The report and the data of
    ``<run>.json``; the CLI writes the files and prints."""
    from lookup_knowledge.adapters.api import create_app
    from lookup_knowledge.adapters.evaluation.beir import load_beir, load_unanswerable

    qrels = body.get("qrels")
    beir = load_beir(
        Path(body["dataset"]),
        split=body.get("split"),
        qrels_file=None if qrels is None else Path(qrels),
        limit_queries=body.get("limit_queries"),
        corpus_sample=body.get("corpus_sample"),
        title_in_text=bool(body.get("title_in_text")),
    )
    loader = SettingsLoader(
        None,
        Path(body["data_dir"]),
        body.get("embedder"),
        root_params={"config": body.get("config_file")},
    )
    plan = _plan(
        loader,
        beir,
        list(body["names"]),
        dict(body["base"]),
        dict(body["depth"]),
        body.get("collection"),
    )
    unanswerable = [Path(p) for p in body.get("unanswerable") or ()]
    dataset_run = beir.dataset
    if unanswerable:
        dataset_run = replace(beir.dataset, unanswerable=load_unanswerable(unanswerable))
    with create_app(plan.settings) as lookup_app:
        report = lookup_app.eval_runner().execute(
            dataset_run, plan.configurations, ingest=not body.get("skip_ingest")
        )
    data = _run_data(plan, beir, report, [str(p) for p in unanswerable])
    return {"report": report.as_dict(), "data": data}


def eval_report_from_dict(data: dict[str, Any]) -> EvalReport:
    """An ``EvalReport`` from its ``as_dict`` (figures rounded as there)."""
    from datetime import datetime

    from lookup_knowledge.adapters.cli.knowledge import ingest_report_from_dict
    from lookup_knowledge.application.evaluation import EvalReport
    from lookup_knowledge.application.evaluation.values import (
        ConfigurationResult,
        QueryResult,
    )

    return EvalReport(
        run_id=data["runId"],
        dataset=data["dataset"],
        started_at=datetime.fromisoformat(data["startedAt"]),
        finished_at=datetime.fromisoformat(data["finishedAt"]),
        measures=tuple(data["measures"]),
        ingest=None if data["ingest"] is None else ingest_report_from_dict(data["ingest"]),
        configurations=tuple(
            ConfigurationResult(
                name=c["name"],
                session_id=c["sessionId"],
                changes=c["changes"],
                settings=c["settings"],
                queries=c["queries"],
                metrics=c["metrics"],
                distinct_documents=c["distinctDocumentsPerResult"],
                blocks=c["blocksPerResult"],
                no_evidence_rate=c["noEvidenceRate"],
                error_rate=c["errorRate"],
                latency_p50_ms=c["latencyP50Ms"],
                latency_p95_ms=c["latencyP95Ms"],
                first_error=c["firstError"],
                per_query=tuple(
                    QueryResult(
                        query_id=q["queryId"],
                        invocation_id=q["invocationId"],
                        status=q["status"],
                        duration_ms=q["durationMs"],
                        documents=tuple(q["documents"]),
                        blocks=q["blocks"],
                        metrics=q["metrics"],
                    )
                    for q in c.get("perQuery", ())
                ),
                found_rate=c.get("foundRate", 0.0),
                abstention_rate=c.get("abstentionRate"),
                unanswerable_queries=c.get("unanswerableQueries", 0),
                calibration=tuple(_calibration_bin(b) for b in c.get("calibration", ())),
                unanswerable=tuple((u["queryId"], u["status"]) for u in c.get("unanswerable", ())),
            )
            for c in data["configurations"]
        ),
    )


def _calibration_bin(data: dict[str, Any]) -> CalibrationBin:
    """A ``CalibrationBin`` from its ``as_dict`` (``"0.2-0.3"``)."""
    from lookup_knowledge.application.evaluation.values import CalibrationBin

    low, high = (float(edge) for edge in str(data["bin"]).split("-"))
    return CalibrationBin(low, high, int(data["blocks"]), int(data["relevant"]))
