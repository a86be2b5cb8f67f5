"""The ``lookup-knowledge`` command line (typer + rich).

Errors are one line on stderr and a non-zero exit code (2: bad configuration or input,
1: anything else); ``--debug`` shows the traceback instead.
"""

from __future__ import annotations

import json
import sys
import uuid
from dataclasses import asdict, is_dataclass
from datetime import UTC, datetime
from enum import Enum, StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from lookup_knowledge.adapters.cli.render import console, parse_when
from lookup_knowledge.adapters.logging_setup import configure_logging
from lookup_knowledge.domain.errors import (
    ConfigurationError,
    InvalidInputError,
    LookupKnowledgeError,
    NotFoundError,
)

app = typer.Typer(
    name="lookup-knowledge",
    help="Evidence lookup for LLM agents over Milvus, with a SQL audit store.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
audit_app = typer.Typer(
    help="Query the audit store (Verifier and Eval views).", no_args_is_help=True
)
db_app = typer.Typer(help="Audit database schema (Alembic migrations).", no_args_is_help=True)
config_app = typer.Typer(help="Effective configuration.", no_args_is_help=True)
app.add_typer(audit_app, name="audit")
app.add_typer(db_app, name="db")
app.add_typer(config_app, name="config")


def _register_eval() -> None:
    # Imported here so the eval adapters load with the CLI, not with the package.
    from lookup_knowledge.adapters.cli.eval import eval_app

    app.add_typer(eval_app, name="eval", help="Retrieval quality on BEIR collections; replay.")


_register_eval()


out = console()
err = console(stderr=True)


class Mode(StrEnum):
    dense = "dense"
    sparse = "sparse"
    hybrid = "hybrid"


class _State:
    config_file: Path | None = None
    data_dir: Path | None = None
    debug: bool = False
    overrides: dict[str, object]

    def __init__(self) -> None:
        self.overrides = {}


state = _State()


@app.callback()
def _global(
    config: Annotated[
        Path | None,
        typer.Option(
            "--config",
            "-c",
            help="Config file (.yaml, .toml, .properties, .json).",
            envvar="LOOKUP_KNOWLEDGE_CONFIG",
        ),
    ] = None,
    data_dir: Annotated[
        Path | None,
        typer.Option("--data-dir", help="Data directory (Milvus Lite file, SQLite audit, spool)."),
    ] = None,
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks.")] = False,
) -> None:
    state.config_file = config
    state.data_dir = data_dir
    state.debug = debug
    # Until the settings are read (they may be invalid), only warnings and errors.
    configure_logging("DEBUG" if debug else "WARNING", json_lines=False)


def _overrides(extra: dict[str, object] | None = None) -> dict[str, object]:
    values: dict[str, object] = dict(state.overrides)
    if state.data_dir is not None:
        values["data-dir"] = str(state.data_dir)
    values.update(extra or {})
    return values


def _loaded(extra: dict[str, object] | None = None) -> Any:
    from lookup_knowledge.adapters.config import load_settings

    loaded = load_settings(config_file=state.config_file, overrides=_overrides(extra))
    log = loaded.settings.log
    # log.level governs the product's own loggers; the CLI stays quiet below WARNING
    # unless asked (--debug, or log.level set by the user).
    level = "DEBUG" if state.debug else log.level
    if loaded.sources.get("log.level", "default") == "default" and not state.debug:
        level = "WARNING"
    configure_logging(level, json_lines=log.json_)
    return loaded


def _app(extra: dict[str, object] | None = None) -> Any:
    from lookup_knowledge.adapters.api import create_app

    return create_app(_loaded(extra).settings)


def _plain(value: Any) -> Any:
    if is_dataclass(value) and not isinstance(value, type):
        return _plain(asdict(value))
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, Path):
        return str(value)
    return value


def _print_json(value: Any) -> None:
    sys.stdout.write(json.dumps(_plain(value), ensure_ascii=False, indent=2) + "\n")


def _row(table: Table, *cells: str | Text) -> None:
    """Add a row whose cells are data: shown literally, never parsed as rich markup
    (a document may contain ``[/etc/hosts]``)."""
    table.add_row(*(c if isinstance(c, Text) else Text(c) for c in cells))


def _excerpt(text: str, width: int = 110) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


# ------------------------------------------------------------------ ingest


def _run_ingest(lookup_app: Any, paths: list[Path], **kwargs: Any) -> Any:
    with Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[chunks]} chunks"),
        TimeElapsedColumn(),
        TextColumn("{task.fields[current]}"),
        console=err,
        transient=True,
    ) as progress:
        task = progress.add_task("ingest", total=None, chunks=0, current="")

        def on_progress(event: Any) -> None:
            progress.update(
                task,
                description=event.phase,
                completed=event.documents_done,
                total=event.documents_total,
                chunks=event.chunks_written,
                current=_excerpt(event.current, 50),
            )

        return lookup_app.ingest(paths, progress=on_progress, **kwargs)


def _ingest_table(report: Any) -> Table:
    table = Table(title="Ingest summary")
    for column in (
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
    ):
        table.add_column(column, justify="right")
    _row(
        table,
        *(
            str(v)
            for v in (
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
        ),
    )
    return table


@app.command()
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
    with _app() as lookup_app:
        report = _run_ingest(
            lookup_app, paths, category=category, root=root, doc_id=doc_id, sync=sync
        )
    if as_json:
        _print_json(report.as_dict())
    else:
        out.print(_ingest_table(report))
        for failure in report.failures:
            err.print(f"[yellow]skipped[/] {escape(failure.source)}: {escape(failure.reason)}")


# ------------------------------------------------------------------ lookup


def _evidence_table(result: dict[str, Any]) -> Table:
    table = Table(title=None, show_lines=False)
    table.add_column("#", justify="right")
    table.add_column("document_id", overflow="fold")
    table.add_column("source", overflow="fold")
    table.add_column("score", justify="right")
    table.add_column("excerpt", overflow="fold")
    for block in result["evidenceBlocks"]:
        _row(
            table,
            str(block["rank"]),
            block["document_id"],
            block["source"],
            f"{block['score']:.3f}",
            _excerpt(block["content"]),
        )
    return table


def _show_lookup(result: dict[str, Any]) -> None:
    trace = result["retrievalTrace"]
    out.print(f"[bold]{escape(result['message'])}[/]")
    fallback = trace.get("fallbackReason")
    out.print(
        f"relevance: {result['relevanceLevel']}  completeness: {result['completenessHint']}  "
        f"mode: {trace.get('mode')}  filter: {escape(trace.get('filterApplied') or '-')}"
        + (f"  fallback: {fallback}" if fallback else ""),
    )
    if result["evidenceBlocks"]:
        out.print(_evidence_table(result))
    out.print(f"[dim]invocation {result['invocationId']}[/]")


@app.command()
def lookup(
    query: Annotated[str, typer.Argument(help="What to look up.")],
    session: Annotated[str, typer.Option(help="Session id the call is recorded under.")] = "cli",
    step: Annotated[str | None, typer.Option(help="Step id within the session.")] = None,
    mode: Annotated[
        Mode | None, typer.Option(help="Search mode (default: rag.search-mode).")
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
    with _app() as lookup_app:
        result = lookup_app.lookup_result(
            query,
            session_id=session,
            step_id=step,
            mode=mode.value if mode else None,
            category=category,
        )
    payload = result.to_tool_json()
    failed = result.error_code is not None
    if as_json:
        _print_json(payload)
    elif not failed:
        _show_lookup(payload)
    if failed:
        err.print(f"error: {payload['message']}", markup=False, highlight=False)
        raise typer.Exit(1)


# ------------------------------------------------------------------ audit


def _invocations_table(items: Any) -> Table:
    table = Table()
    for column in (
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
    ):
        table.add_column(column, overflow="fold")
    for inv in items:
        _row(
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
            _excerpt(inv.query, 40),
            inv.id,
        )
    return table


@audit_app.command("list")
def audit_list(
    session: Annotated[str | None, typer.Option(help="Only this session.")] = None,
    step: Annotated[str | None, typer.Option(help="Only this step.")] = None,
    status: Annotated[str | None, typer.Option(help="ok, no_evidence or error.")] = None,
    since: Annotated[str | None, typer.Option(help="ISO date/time (inclusive).")] = None,
    until: Annotated[str | None, typer.Option(help="ISO date/time (exclusive).")] = None,
    limit: Annotated[int, typer.Option(help="Page size.")] = 50,
    offset: Annotated[int, typer.Option(help="Rows to skip.")] = 0,
    newest_first: Annotated[bool, typer.Option("--newest-first")] = False,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """List recorded invocations."""
    from lookup_knowledge.application.ports import InvocationFilter, TimeRange

    query = InvocationFilter(
        session_id=session,
        step_id=step,
        status=status,
        time_range=TimeRange(parse_when(since, "--since"), parse_when(until, "--until")),
        limit=limit,
        offset=offset,
        newest_first=newest_first,
    )
    with _app() as lookup_app:
        page = lookup_app.audit.list_invocations(query)
    if as_json:
        _print_json({"items": page.items, "nextOffset": page.next_offset})
        return
    out.print(_invocations_table(page.items))
    if page.next_offset is not None:
        out.print(f"[dim]more: --offset {page.next_offset}[/]")


@audit_app.command("show")
def audit_show(
    invocation_id: Annotated[str, typer.Argument(help="Invocation id.")],
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """One invocation with the evidence it returned and its traces."""
    with _app() as lookup_app:
        detail = lookup_app.audit.get_invocation(invocation_id)
    if as_json:
        _print_json(detail)
        return
    s = detail.summary
    out.print(
        f"[bold]{s.id}[/]  session {escape(s.session_id)} seq {s.seq} "
        f"step {escape(s.step_id or '-')}"
    )
    out.print(f"query: {escape(s.query)}")
    out.print(
        f"status: {s.status}  mode: {s.retrieval_mode}  filter: {s.filter_applied or '-'}  "
        f"fallback: {s.fallback_reason or '-'}  quality: {s.quality_score:.2f}  "
        f"relevance: {s.relevance_level}  {s.duration_ms:.0f} ms"
    )
    if detail.error_message:
        out.print(f"[red]error[/] {s.error_code}: {escape(detail.error_message)}")
    table = Table(title="Evidence returned")
    for column in ("rank", "document_id", "source", "before", "after", "projected", "packed"):
        table.add_column(column, overflow="fold")
    for e in detail.evidence:
        _row(
            table,
            str(e.rank),
            e.document_id,
            e.source,
            f"{e.score_before:.3f}",
            f"{e.score_after:.3f}",
            "yes" if e.projected else "no",
            "yes" if e.in_context_pack else "no",
        )
    out.print(table)


@audit_app.command("verify")
def audit_verify(
    document_ids: Annotated[list[str], typer.Argument(help="The document_ids the agent cited.")],
    session: Annotated[str, typer.Option(help="The agent's session id.")],
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """EvidenceGuard: exit 1 when a cited document_id was never returned in the session."""
    with _app() as lookup_app:
        report = lookup_app.verify_citations(session, document_ids)
    if as_json:
        _print_json(
            {
                "sessionId": report.session_id,
                "valid": report.valid,
                "unknown": report.unknown,
                "pendingInSpool": report.pending_in_spool,
                "conclusive": report.conclusive,
            }
        )
    else:
        table = Table(title=f"Citations in session {session}")
        for column in ("document_id", "verdict", "invocation", "step", "seq", "rank"):
            table.add_column(column, overflow="fold")
        for v in report.valid:
            _row(
                table,
                v.document_id,
                Text("valid", style="green"),
                v.invocation_id,
                v.step_id or "-",
                str(v.seq),
                str(v.rank),
            )
        for unknown in report.unknown:
            _row(table, unknown, Text("unknown", style="red"), "-", "-", "-", "-")
        out.print(table)
        if not report.conclusive:
            err.print(
                f"{report.pending_in_spool} record(s) of this session are still spooled; "
                "the verdict is not conclusive"
            )
    if report.unknown:
        raise typer.Exit(1)


@audit_app.command("stats")
def audit_stats(
    since: Annotated[str | None, typer.Option(help="ISO date/time (inclusive).")] = None,
    until: Annotated[str | None, typer.Option(help="ISO date/time (exclusive).")] = None,
    top: Annotated[int, typer.Option(help="How many most-returned documents.")] = 10,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Quality summary: counts, no-evidence and fallback rates, quality, latency."""
    from lookup_knowledge.application.ports import TimeRange

    with _app() as lookup_app:
        summary = lookup_app.audit.quality_summary(
            TimeRange(parse_when(since, "--since"), parse_when(until, "--until")), top
        )
    data = {
        "count": summary.count,
        "ok": summary.ok_count,
        "noEvidence": summary.no_evidence_count,
        "errors": summary.error_count,
        "noEvidenceRate": summary.no_evidence_rate,
        "fallbackRate": summary.fallback_rate,
        "meanQuality": summary.mean_quality,
        "p50DurationMs": summary.p50_duration_ms,
        "p95DurationMs": summary.p95_duration_ms,
        "topDocuments": summary.top_documents,
    }
    if as_json:
        _print_json(data)
        return
    table = Table(title="Audit quality summary")
    table.add_column("metric")
    table.add_column("value", justify="right")
    for key, value in data.items():
        if key == "topDocuments":
            continue
        _row(table, key, f"{value:.3f}" if isinstance(value, float) else str(value))
    out.print(table)
    docs = Table(title="Most returned documents")
    for column in ("document_id", "times", "sessions"):
        docs.add_column(column, overflow="fold")
    for d in summary.top_documents:
        _row(docs, d.document_id, str(d.times_returned), str(d.sessions))
    out.print(docs)


# ------------------------------------------------------------------ db, config, mcp


@db_app.command("upgrade")
def db_upgrade(revision: Annotated[str, typer.Argument()] = "head") -> None:
    """Upgrade the audit database schema (creates it when empty)."""
    from lookup_knowledge.adapters.audit import upgrade_database

    settings = _loaded().settings
    now = upgrade_database(settings.audit_database_url, revision=revision)
    out.print(f"audit database at revision {now}")


@db_app.command("current")
def db_current() -> None:
    """Show the audit database's schema revision and the newest one this version knows."""
    from lookup_knowledge.adapters.audit import current_revision, head_revision

    settings = _loaded().settings
    current = current_revision(settings.audit_database_url)
    head = head_revision()
    out.print(f"current: {current or '(empty database)'}  head: {head}")
    if current != head:
        err.print("the database is not at head: run `lookup-knowledge db upgrade`")
        raise typer.Exit(1)


@config_app.command("show")
def config_show(as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """Print the effective configuration, secrets masked, with the source of each value."""
    from lookup_knowledge.adapters.config import describe_settings

    loaded = _loaded()
    rows = describe_settings(loaded)
    if as_json:
        _print_json([{"key": k, "value": v, "source": s} for k, v, s in rows])
        return
    table = Table(title=f"Effective configuration ({loaded.config_file or 'no config file'})")
    table.add_column("key")
    table.add_column("value", overflow="fold")
    table.add_column("source", overflow="fold")
    for key, value, source in rows:
        _row(table, key, value, source)
    out.print(table)


@app.command()
def mcp() -> None:
    """Serve lookup_knowledge(query) to MCP clients over stdio."""
    from lookup_knowledge.adapters.mcp_server import serve_stdio

    with _app() as lookup_app:
        serve_stdio(lookup_app)


# ------------------------------------------------------------------ quickstart


@app.command()
def quickstart(
    questions: Annotated[int, typer.Option(help="How many sample questions to ask.")] = 4,
) -> None:
    """Ingest the bundled sample corpus, run lookups, show the audit rows and a citation check."""
    from lookup_knowledge.application.ports import InvocationFilter
    from lookup_knowledge.sample_corpus import corpus_path

    corpus = corpus_path()
    loaded = _loaded({"rag.domains-file": str(corpus / "domains.yaml")})
    settings = loaded.settings
    out.rule("[bold]lookup-knowledge quickstart")
    out.print(f"data directory: {settings.data_dir}")
    out.print(f"milvus: {settings.milvus_uri}   audit: {_mask(settings.audit_database_url)}")
    out.print(f"embedder: {settings.embedder.provider.value}   mode: {settings.rag.search_mode}")
    from lookup_knowledge.adapters.api import create_app

    with create_app(settings) as lookup_app:
        categories = sorted(
            p for p in corpus.iterdir() if p.is_dir() and not p.name.startswith("_")
        )
        out.rule("1. ingest the sample corpus")
        report = _run_ingest(lookup_app, categories, root=corpus, sync=True)
        out.print(_ingest_table(report))
        samples = json.loads((corpus / "questions.json").read_text(encoding="utf-8"))
        chosen = _pick_questions(samples, questions)
        session = f"quickstart-{datetime.now(UTC):%Y%m%d-%H%M%S}-{uuid.uuid4().hex[:6]}"
        out.rule(f"2. lookups in session {session}")
        returned: list[str] = []
        for step, sample in enumerate(chosen, 1):
            out.print(f"\n[bold cyan]Q{step}[/] {escape(sample['query'])}")
            result = lookup_app.lookup(sample["query"], session_id=session, step_id=f"step-{step}")
            _show_lookup(result)
            returned += [b["document_id"] for b in result["evidenceBlocks"]]
            hit = any(b["source"] == sample["expected_doc"] for b in result["evidenceBlocks"])
            out.print(
                f"expected source {sample['expected_doc']}: "
                + ("[green]returned[/]" if hit else "[yellow]not in the top results[/]")
            )
        out.rule("3. the audit store")
        page = lookup_app.audit.list_invocations(InvocationFilter(session_id=session))
        out.print(_invocations_table(page.items))
        out.rule("4. citation check (EvidenceGuard)")
        cited = [*returned[:2], "made-up/document.md#chunk-0"]
        verdict = lookup_app.verify_citations(session, cited)
        for v in verdict.valid:
            out.print(f"[green]valid[/]   {escape(v.document_id)}  (step {v.step_id}, seq {v.seq})")
        for unknown in verdict.unknown:
            out.print(f"[red]unknown[/] {escape(unknown)}  (never returned in this session)")
    out.rule("done")
    data_dir_flag = f"--data-dir {settings.data_dir} " if state.data_dir else ""
    out.print(
        "Try next:\n"
        f'  lookup-knowledge {data_dir_flag}lookup "PG-53300 too many connections"\n'
        f"  lookup-knowledge {data_dir_flag}audit list --session {session}\n"
        f"  lookup-knowledge {data_dir_flag}audit stats\n"
        f"  lookup-knowledge {data_dir_flag}ingest path/to/your/docs"
    )


def _pick_questions(samples: list[dict[str, str]], n: int) -> list[dict[str, str]]:
    """A mix: English questions first, then at least one Chinese one when n > 1."""
    chinese = [s for s in samples if any("\u4e00" <= ch <= "\u9fff" for ch in s["query"])]
    english = [s for s in samples if s not in chinese]
    picked = english[: max(n - 1, 1)] + chinese[:1] if n > 1 else english[:1]
    return picked[:n]


def _mask(url: str) -> str:
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        return make_url(url).render_as_string(hide_password=True)
    except (ArgumentError, ValueError):
        return "<unparseable url>"


# ------------------------------------------------------------------ entry point


def main() -> None:
    try:
        # Without standalone mode click returns an Exit's code instead of raising it.
        code = app(standalone_mode=False)
    except typer.Exit as done:
        raise SystemExit(done.exit_code) from None
    except typer.Abort:
        err.print("aborted")
        raise SystemExit(130) from None
    except Exception as error:  # noqa: BLE001 - the CLI boundary: one line, not a traceback
        raise SystemExit(_report(error)) from None
    raise SystemExit(code if isinstance(code, int) else 0)


def _report(error: BaseException) -> int:
    import click

    if state.debug:
        err.print_exception()
    if isinstance(error, click.exceptions.ClickException):
        error.show()
        return error.exit_code
    if isinstance(error, ConfigurationError | InvalidInputError):
        err.print(f"error: {error}", markup=False, highlight=False)
        return 2
    if isinstance(error, NotFoundError):
        err.print(f"not found: {error}", markup=False, highlight=False)
        return 1
    if isinstance(error, LookupKnowledgeError):
        err.print(f"error ({error.code}): {error}", markup=False, highlight=False)
        return 1
    err.print(
        f"internal error: {type(error).__name__}: {error} (run with --debug for the traceback)",
        markup=False,
        highlight=False,
    )
    return 1


if __name__ == "__main__":  # pragma: no cover
    main()
