"""``lookup-knowledge ingest`` and ``lookup-knowledge lookup``: fill the knowledge base
and ask it as an agent would."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from lookup_knowledge.adapters.cli.context import open_app, store_server
from lookup_knowledge.adapters.cli.render import (
    add_row,
    console,
    error_line,
    excerpt,
    ingest_table,
    literal,
    print_json,
    show_lookup,
)
from lookup_knowledge.domain.access import DocumentAccess, Principal
from lookup_knowledge.domain.errors import InvalidInputError
from lookup_knowledge.domain.model import SearchMode

if TYPE_CHECKING:
    from collections.abc import Sequence

    from lookup_knowledge.adapters.api import LookupApp
    from lookup_knowledge.adapters.api_requests import IngestPaths, IngestRequest, LookupRequest
    from lookup_knowledge.adapters.local_server import RunningServer
    from lookup_knowledge.application.ingest import IngestProgress, IngestReport
    from lookup_knowledge.application.lookup import LookupResult


def run_ingest(lookup_app: LookupApp, request: IngestRequest) -> IngestReport:
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
                current=literal(excerpt(event.current, 50)),
            )

        return lookup_app.ingest(request, progress=on_progress)


def _path_argument(help_text: str) -> Any:
    # typer checks that each PATH exists: a bad input path is a usage error (exit 2)
    return typer.Argument(help=help_text, exists=True)


RootOption = Annotated[
    Path | None,
    typer.Option(
        help="Folder doc_ids are relative to (default: each PATH).", exists=True, file_okay=False
    ),
]
SyncOption = Annotated[
    bool, typer.Option("--sync", help="Delete documents that disappeared from PATHs.")
]
SourceNameOption = Annotated[
    str | None,
    typer.Option(help="The ingest source (doc_id namespace); default: the folder's name."),
]
DryRunOption = Annotated[
    bool,
    typer.Option("--dry-run", help="List what would be added, updated, deleted; write nothing."),
]
DocumentTenantOption = Annotated[
    str | None,
    typer.Option(help="Tenant of every document without its own (front matter 'tenant')."),
]
AllowedGroupOption = Annotated[
    list[str] | None,
    typer.Option(
        "--allowed-group",
        help="A group that may see the documents (repeat; front matter 'allowed_groups').",
    ),
]
PublicOption = Annotated[
    bool, typer.Option("--public", help="Every lookup may see the documents (access.mode).")
]
JsonReportOption = Annotated[bool, typer.Option("--json", help="Print the report as JSON.")]


def ingest(
    paths: Annotated[list[Path], _path_argument("Files or folders to ingest.")],
    category: Annotated[str | None, typer.Option(help="Category for every document.")] = None,
    root: RootOption = None,
    doc_id: Annotated[str | None, typer.Option(help="doc_id for a single file.")] = None,
    sync: SyncOption = False,
    source_name: SourceNameOption = None,
    dry_run: DryRunOption = False,
    as_json: JsonReportOption = False,
    tenant: DocumentTenantOption = None,
    allowed_group: AllowedGroupOption = None,
    public: PublicOption = False,
) -> None:
    """Ingest Markdown, text and HTML files: chunk, embed, write to Milvus (idempotent).

    Exits 1 when any file failed (each listed on stderr with its reason; the others are
    ingested), 2 when a PATH does not exist.
    """
    from lookup_knowledge.adapters.api_requests import IngestRequest

    if category is not None:
        category = _category(category, "--category")
    groups = list(allowed_group or ())
    _access_options(tenant, groups, public)
    request = IngestRequest(
        paths,
        category=category,
        root=root,
        doc_id=doc_id,
        sync=sync,
        source_name=source_name,
        dry_run=dry_run,
        tenant=tenant,
        allowed_groups=groups,
        public=public,
    )
    server = store_server()
    if server is not None:
        report = _ingest_through(server, request)
    else:
        from lookup_knowledge.adapters.cli.memory import tune_for_ingest

        tune_for_ingest()  # batches' and Lite's Arrow buffers go back to the system (memory.py)
        with open_app() as lookup_app:
            report = run_ingest(lookup_app, request)
    _show_ingest(report, as_json=as_json, dry_run=dry_run)
    if report.failures:
        raise typer.Exit(1)


def _show_ingest(report: IngestReport, *, as_json: bool, dry_run: bool) -> None:
    if as_json:
        print_json(report.as_dict())
    else:
        console().print(ingest_table(report))
        if report.plan is not None and dry_run:
            out = console()
            for verb, ids in (
                ("add", report.plan.added),
                ("update", report.plan.updated),
                ("delete", report.plan.deleted),
            ):
                for doc in ids:
                    out.print(literal(f"would {verb} {doc}"), highlight=False)
    for notice in report.notices:
        error_line(f"note: {notice}")
    for failure in report.failures:
        reason = " ".join(failure.reason.split())  # a parser's complaint may span lines
        error_line(f"failed {failure.source}: {reason}")


def _ingest_through(server: RunningServer, request: IngestRequest) -> IngestReport:
    """``ingest`` run by the server that holds the Milvus Lite file (no progress bar)."""
    from lookup_knowledge.adapters.local_server import call_server

    root = request.root
    body: dict[str, object] = {
        # The server resolves nothing against its own working directory.
        "paths": [str(Path(p).resolve()) for p in _paths(request.paths)],
        "category": request.category,
        "root": None if root is None else str(Path(root).resolve()),
        "doc_id": request.doc_id,
        "sync": request.sync,
        "source_name": request.source_name,
        "dry_run": request.dry_run,
        "tenant": request.tenant,
        "allowed_groups": list(request.allowed_groups),
        "public": request.public,
    }
    return ingest_report_from_dict(call_server(server, "ingest", body))


def _paths(paths: IngestPaths) -> Sequence[str | Path]:
    return [paths] if isinstance(paths, str | Path) else paths


def ingest_report_from_dict(data: dict[str, Any]) -> IngestReport:
    """An ``IngestReport`` from its ``as_dict``."""
    from lookup_knowledge.application.ingest import IngestPlan, IngestReport
    from lookup_knowledge.application.ports import DocumentLoadFailure

    plan = data.get("plan")
    return IngestReport(
        documents_seen=data["documentsSeen"],
        added=data["added"],
        updated=data["updated"],
        unchanged=data["unchanged"],
        empty=data["empty"],
        deleted=data["deleted"],
        chunks_written=data["chunksWritten"],
        chunks_deleted=data["chunksDeleted"],
        failures=tuple(
            DocumentLoadFailure(f["source"], f["reason"], f.get("docId"))
            for f in data.get("failures", [])
        ),
        duration_ms=data.get("durationMs", 0.0),
        source_name=data.get("sourceName", ""),
        dry_run=data.get("dryRun", False),
        plan=None
        if plan is None
        else IngestPlan(
            added=tuple(plan["added"]),
            updated=tuple(plan["updated"]),
            deleted=tuple(plan["deleted"]),
            conflicts=tuple((c["docId"], c["owner"]) for c in plan.get("conflicts", [])),
        ),
        notices=tuple(data.get("notices", ())),
    )


def _access_options(tenant: str | None, groups: Sequence[str], public: bool) -> None:
    """Ingest access options checked as the documents will be (usage error, exit 2)."""
    try:
        DocumentAccess(tenant or "", frozenset(groups), public)
    except InvalidInputError as error:
        raise typer.BadParameter(error.message, param_hint="'--tenant/--allowed-group'") from None


def principal_options(
    tenant: str | None, user: str | None, groups: Sequence[str]
) -> Principal | None:
    """The principal of ``--tenant/--user/--group`` (None without ``--tenant``)."""
    if tenant is None:
        if user is not None or groups:
            raise typer.BadParameter("needs --tenant", param_hint="'--user/--group'")
        return None
    try:
        return Principal(tenant, user or "", frozenset(groups))
    except InvalidInputError as error:
        raise typer.BadParameter(error.message, param_hint="'--tenant/--user/--group'") from None


TenantOption = Annotated[
    str | None, typer.Option(help="Tenant of the principal the lookup is for (access.mode).")
]
UserOption = Annotated[str | None, typer.Option(help="User id of that principal (recorded).")]
GroupOption = Annotated[
    list[str] | None, typer.Option("--group", help="A group of that principal (repeat).")
]


def _category(value: str, option: str) -> str:
    """A category filter as given; empty or blank is a usage error, never "no filter"."""
    if not value.strip():
        raise typer.BadParameter(
            "must not be empty or blank (leave the option out for no category)",
            param_hint=f"'{option}'",
        )
    return value


class OutputFormat(StrEnum):
    """What ``lookup`` prints: a table for a reader, or what an agent's host receives."""

    TEXT = "text"
    JSON = "json"
    ANTHROPIC = "anthropic"
    OPENAI = "openai"


ModeOption = Annotated[
    SearchMode | None,
    typer.Option(help="Search mode (default: rag.search-mode).", case_sensitive=False),
]
CategoryFilterOption = Annotated[
    str | None, typer.Option(help="Only this category (a hard filter, no retry).")
]
FormatOption = Annotated[
    OutputFormat,
    typer.Option(
        "--format",
        help="text (a table); json (the exact tool JSON the agent receives); anthropic "
        "(the content of a Claude tool_result); openai (a Chat Completions tool message).",
        case_sensitive=False,
    ),
]
ToolCallIdOption = Annotated[
    str | None,
    typer.Option(
        help="The model's tool-call id: recorded with the call, and the id of the "
        "openai message (default: the invocation id)."
    ),
]


@dataclass(frozen=True, slots=True)
class _Answer:
    """What a lookup printed and exits with, wherever it ran."""

    tool_json: Any
    formatted: Any
    error_code: str | None
    error_message: str | None


def lookup(
    query: Annotated[str, typer.Argument(help="What to look up.")],
    session: Annotated[str, typer.Option(help="Session id the call is recorded under.")] = "cli",
    step: Annotated[str | None, typer.Option(help="Step id within the session.")] = None,
    mode: ModeOption = None,
    category: CategoryFilterOption = None,
    output: FormatOption = OutputFormat.TEXT,
    as_json: Annotated[bool, typer.Option("--json", help="Same as --format json.")] = False,
    tool_call_id: ToolCallIdOption = None,
    tenant: TenantOption = None,
    user: UserOption = None,
    group: GroupOption = None,
) -> None:
    """Run lookup_knowledge(QUERY) as an agent would; the call is recorded.

    Exits 1 when the lookup failed (status error), 2 when it failed on its input (an
    over-long query), with the reason on stderr; the call is recorded either way.
    """
    from lookup_knowledge.adapters.api_requests import LookupRequest

    if as_json:
        if output not in (OutputFormat.TEXT, OutputFormat.JSON):
            raise typer.BadParameter(
                f"--json is --format json; it cannot go with --format {output.value}",
                param_hint="'--json'",
            )
        output = OutputFormat.JSON
    if category is not None:
        category = _category(category, "--category")
    if tool_call_id is not None and not tool_call_id.strip():
        raise typer.BadParameter("must not be empty or blank", param_hint="'--tool-call-id'")
    request = LookupRequest(
        query,
        session_id=session,
        step_id=step,
        mode=mode,
        category=category,
        tool_call_id=tool_call_id,
        principal=principal_options(tenant, user, list(group or ())),
    )
    server = store_server()
    if server is not None:
        answer = _lookup_through(server, request, output)
    else:
        answer = _lookup_here(request, output)
    failed = answer.error_code is not None
    if output is OutputFormat.TEXT:
        if not failed:
            show_lookup(console(), answer.tool_json)
    else:
        print_json(answer.formatted)
    if failed:
        # The tool message tells an agent what to do; a person reads what went wrong.
        error_line(f"error: Knowledge lookup failed ({answer.error_code}): {answer.error_message}")
        # recorded either way; a query the tool refuses is the caller's input to fix
        raise typer.Exit(2 if answer.error_code == InvalidInputError.code else 1)


def _lookup_through(server: RunningServer, request: LookupRequest, output: OutputFormat) -> _Answer:
    """The lookup run by the server that holds the Milvus Lite file."""
    from lookup_knowledge.adapters.local_server import call_server

    principal = request.principal
    mode = request.mode
    answer: dict[str, Any] = call_server(
        server,
        "lookup",
        {
            "query": request.query,
            "session_id": request.session_id,
            "step_id": request.step_id,
            "mode": mode.value if isinstance(mode, SearchMode) else mode,
            "category": request.category,
            "tool_call_id": request.tool_call_id,
            "principal": None
            if principal is None
            else {
                "tenant": principal.tenant,
                "user": principal.user,
                "groups": sorted(principal.groups),
            },
            "format": output.value,
        },
    )
    tool_json = answer["toolJson"]
    return _Answer(
        tool_json=tool_json,
        formatted=answer.get("formatted", tool_json),
        error_code=answer["errorCode"],
        error_message=answer.get("errorMessage") or answer["message"],
    )


def _lookup_here(request: LookupRequest, output: OutputFormat) -> _Answer:
    mode = request.mode if isinstance(request.mode, SearchMode) else None
    with open_app() as lookup_app:
        if (mode or lookup_app.settings.rag.search_mode).needs_query_vector:
            # The model loads while the Lite file opens (a sparse lookup needs no model).
            lookup_app.warm()
        result = lookup_app.lookup_result(request)
    return _Answer(
        tool_json=result.to_tool_json(),
        formatted=None
        if output is OutputFormat.TEXT
        else _formatted(result, output, request.tool_call_id),
        error_code=result.error_code,
        error_message=result.error_message,
    )


def _formatted(result: LookupResult, output: OutputFormat, tool_call_id: str | None) -> object:
    from lookup_knowledge.application.agent_formats import (
        anthropic_tool_result_content,
        openai_tool_output,
    )

    if output is OutputFormat.ANTHROPIC:
        return anthropic_tool_result_content(result)
    if output is OutputFormat.OPENAI:
        return openai_tool_output(result, tool_call_id or result.invocation_id)
    return result.to_tool_json()


def health(
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Check that lookups can be answered and recorded now: the knowledge search (Milvus),
    the audit store and its journal. Exits 0 when all are healthy, 1 otherwise."""
    server = store_server()
    if server is not None:
        from lookup_knowledge.adapters.local_server import call_server
        from lookup_knowledge.application.health import ComponentHealth, Health

        data: dict[str, Any] = call_server(server, "health", {})
        report = Health(
            tuple(ComponentHealth(c["name"], c["ok"], c["detail"]) for c in data["components"])
        )
    else:
        with open_app() as lookup_app:
            report = lookup_app.health()
    if as_json:
        print_json(report.as_dict())
    else:
        table = Table(title="Health")
        for column in ("component", "status", "detail"):
            table.add_column(column, overflow="fold")
        styles = {"ok": "green", "empty": "yellow"}
        for component in report.components:
            status = Text(component.status, style=styles.get(component.status, "red"))
            add_row(table, component.name, status, component.detail)
        console().print(table)
    if not report.ok:
        raise typer.Exit(1)
