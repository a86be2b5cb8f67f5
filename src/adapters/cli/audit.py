"""``lookup-knowledge audit ...``: the Verifier's and the Eval's views of the audit store."""

from __future__ import annotations

from enum import StrEnum
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table
from rich.text import Text

from lookup_knowledge.adapters.cli.answer_check import register_answer_commands
from lookup_knowledge.adapters.cli.audit_trail import register_trail_commands
from lookup_knowledge.adapters.cli.context import command_group, open_audit_app, parse_when
from lookup_knowledge.adapters.cli.render import (
    add_row,
    console,
    invocations_table,
    literal,
    print_json,
    shown,
)

if TYPE_CHECKING:
    from lookup_knowledge.application.ports import (
        CitationReport,
        InvocationDetail,
        QualitySummary,
        TimeRange,
    )
    from lookup_knowledge.domain.model import Traffic

audit_app = command_group(help="Query the audit store (Verifier and Eval views).")

_SINCE = "ISO date/time (inclusive)."
_UNTIL = "ISO date/time (exclusive)."


class TrafficChoice(StrEnum):
    production = "production"
    eval = "eval"
    replay = "replay"
    all = "all"


_TRAFFIC = "production (agents), eval, replay or all."
_TENANT = "Only lookups made for this principal tenant."


def _traffic(choice: TrafficChoice) -> Traffic | None:
    from lookup_knowledge.domain.model import Traffic

    return None if choice is TrafficChoice.all else Traffic(choice.value)


def _time_range(since: str | None, until: str | None) -> TimeRange:
    from lookup_knowledge.application.ports import TimeRange

    return TimeRange(parse_when(since, "--since"), parse_when(until, "--until"))


@audit_app.command("list")
def audit_list(
    session: Annotated[str | None, typer.Option(help="Only this session.")] = None,
    step: Annotated[str | None, typer.Option(help="Only this step.")] = None,
    status: Annotated[str | None, typer.Option(help="ok, no_evidence or error.")] = None,
    since: Annotated[str | None, typer.Option(help=_SINCE)] = None,
    until: Annotated[str | None, typer.Option(help=_UNTIL)] = None,
    limit: Annotated[int, typer.Option(help="Page size.")] = 50,
    offset: Annotated[int, typer.Option(help="Rows to skip.")] = 0,
    newest_first: Annotated[bool, typer.Option("--newest-first")] = False,
    traffic: Annotated[
        TrafficChoice | None,
        typer.Option(help=_TRAFFIC + " Default: production, or all with --session."),
    ] = None,
    tenant: Annotated[str | None, typer.Option(help=_TENANT)] = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """List recorded invocations (agents' traffic unless --traffic or --session)."""
    from lookup_knowledge.application.ports import InvocationFilter

    query = InvocationFilter(
        session_id=session,
        step_id=step,
        status=status,
        time_range=_time_range(since, until),
        limit=limit,
        offset=offset,
        newest_first=newest_first,
        traffic=None if traffic is None else (_traffic(traffic) or "all"),
        tenant=tenant,
    )
    with open_audit_app() as lookup_app:
        page = lookup_app.audit.list_invocations(query)
    if as_json:
        print_json({"items": page.items, "nextOffset": page.next_offset})
        return
    out = console()
    out.print(invocations_table(page.items))
    if page.next_offset is not None:
        out.print(f"[dim]more: --offset {page.next_offset}[/]")


@audit_app.command("show")
def audit_show(
    invocation_id: Annotated[str, typer.Argument(help="Invocation id.")],
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """One invocation with the evidence it returned and its traces."""
    with open_audit_app() as lookup_app:
        detail = lookup_app.audit.get_invocation(invocation_id)
    if as_json:
        print_json(detail)
    else:
        _show_invocation(detail)


def _show_invocation(detail: InvocationDetail) -> None:
    out = console()
    s = detail.summary
    out.print(
        f"[bold]{literal(s.id)}[/]  session {literal(s.session_id)} seq {s.seq} "
        f"step {literal(s.step_id or '-')}"
    )
    out.print(f"query: {literal(s.query)}")
    out.print(
        f"status: {literal(s.status)}  mode: {literal(s.retrieval_mode)}  "
        f"filter: {literal(s.filter_applied or '-')}  "
        f"principal: {literal(s.principal_tenant or '-')}/{literal(s.principal_user or '-')}  "
        f"access: {literal(s.access_mode)}  "
        f"fallback: {literal(s.fallback_reason or '-')}  quality: {s.quality_score:.2f}  "
        f"relevance: {literal(s.relevance_level)}  {s.duration_ms:.0f} ms"
    )
    if detail.error_message:
        out.print(f"[red]error[/] {literal(s.error_code or '-')}: {literal(detail.error_message)}")
    table = Table(title="Evidence returned")
    columns = ("rank", "document_id", "row tenant", "source", "before", "after", "projected")
    for column in (*columns, "packed"):
        table.add_column(column, overflow="fold")
    for e in detail.evidence:
        add_row(
            table,
            str(e.rank),
            e.document_id,
            _row_tenant(e.row_tenant),
            e.source,
            f"{e.score_before:.3f}",
            f"{e.score_after:.3f}",
            "yes" if e.projected else "no",
            "yes" if e.in_context_pack else "no",
        )
    out.print(table)


def _row_tenant(row_tenant: str | None) -> str:
    """Whose copy of the document_id was shown: the tenant, "(none)" for a row without a
    tenant, "?" when not recorded (records written before audit revision 0005)."""
    if row_tenant is None:
        return "?"
    return row_tenant or "(none)"


@audit_app.command("verify")
def audit_verify(
    document_ids: Annotated[list[str], typer.Argument(help="The document_ids the agent cited.")],
    session: Annotated[str, typer.Option(help="The agent's session id.")],
    group: Annotated[
        list[str] | None,
        typer.Option(
            "--group",
            help="A group of the session's principal (repeat; checked against the record).",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """EvidenceGuard: exit 1 when a cited document_id was never returned in the session
    (unknown) or is one the session's principal could not see (forbidden)."""
    with open_audit_app() as lookup_app:
        report = lookup_app.verify_citations(
            session, document_ids, groups=list(group) if group else None
        )
    if as_json:
        print_json(
            {
                "sessionId": report.session_id,
                "valid": report.valid,
                "unknown": report.unknown,
                "forbidden": report.forbidden,
                "pendingInSpool": report.pending_in_spool,
                "conclusive": report.conclusive,
            }
        )
    else:
        _show_verdict(session, report)
    if report.unknown or report.forbidden:
        raise typer.Exit(1)


def _show_verdict(session: str, report: CitationReport) -> None:
    table = Table(title=Text(f"Citations in session {shown(session)}"))
    for column in ("document_id", "verdict", "invocation", "step", "seq", "rank"):
        table.add_column(column, overflow="fold")
    for v in report.valid:
        add_row(
            table,
            v.document_id,
            Text("valid", style="green"),
            v.invocation_id,
            v.step_id or "-",
            str(v.seq),
            str(v.rank),
        )
    for unknown in report.unknown:
        add_row(table, unknown, Text("unknown", style="red"), "-", "-", "-", "-")
    for forbidden in report.forbidden:
        add_row(table, forbidden, Text("forbidden", style="red"), "-", "-", "-", "-")
    console().print(table)
    if not report.conclusive:
        console(stderr=True).print(
            f"{report.pending_in_spool} record(s) of this session are still in the journal; "
            "the verdict is not conclusive"
        )


@audit_app.command("stats")
def audit_stats(
    since: Annotated[str | None, typer.Option(help=_SINCE)] = None,
    until: Annotated[str | None, typer.Option(help=_UNTIL)] = None,
    top: Annotated[int, typer.Option(help="How many most-returned documents.")] = 10,
    traffic: Annotated[
        TrafficChoice, typer.Option(help=_TRAFFIC + " Evals and replays are not counted.")
    ] = TrafficChoice.production,
    tenant: Annotated[str | None, typer.Option(help=_TENANT)] = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Quality summary: counts, no-evidence and fallback rates, quality, latency."""
    with open_audit_app() as lookup_app:
        summary = lookup_app.audit.quality_summary(
            _time_range(since, until), top, _traffic(traffic), tenant
        )
    data = _summary_data(summary)
    if as_json:
        print_json(data)
        return
    out = console()
    table = Table(title="Audit quality summary")
    table.add_column("metric")
    table.add_column("value", justify="right")
    for key, value in data.items():
        if key == "topDocuments":
            continue
        add_row(table, key, f"{value:.3f}" if isinstance(value, float) else str(value))
    out.print(table)
    docs = Table(title="Most returned documents")
    for column in ("document_id", "times", "sessions"):
        docs.add_column(column, overflow="fold")
    for d in summary.top_documents:
        add_row(docs, d.document_id, str(d.times_returned), str(d.sessions))
    out.print(docs)


def _summary_data(summary: QualitySummary) -> dict[str, object]:
    return {
        "count": summary.count,
        "ok": summary.ok_count,
        "noEvidence": summary.no_evidence_count,
        "errors": summary.error_count,
        "noEvidenceRate": summary.no_evidence_rate,
        "fallbackRate": summary.fallback_rate,
        "meanQuality": summary.mean_quality,
        "p50DurationMs": summary.p50_duration_ms,
        "p95DurationMs": summary.p95_duration_ms,
        "claimsChecked": summary.claims_checked,
        "supportedClaimShare": summary.supported_claim_share,
        "claimsContradicted": summary.claims_contradicted,
        "topDocuments": summary.top_documents,
    }


register_answer_commands(audit_app, open_audit_app)  # audit check-answer, audit checks
register_trail_commands(audit_app, open_audit_app)  # verify-log, export, verify-bundle, prune
