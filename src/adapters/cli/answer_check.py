"""``audit check-answer`` and ``audit checks``: the answer checker on the command line.

``register_answer_commands(audit_app, open_app)`` adds both commands to the ``audit``
group; ``open_app`` builds a ``LookupApp`` from the global options (``--config``,
``--data-dir``). ``check-answer`` exits 0 only when every claim is supported, 1 otherwise;
usage errors (no answer, both, unreadable file, bad JSON) exit 2.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from lookup_knowledge.adapters.cli.context import parse_when
from lookup_knowledge.adapters.cli.render import console, json_text, shown
from lookup_knowledge.domain.errors import InvalidInputError

if TYPE_CHECKING:
    from lookup_knowledge.application.ports import AnswerCheck, AnswerCheckSummary

# By verdict value: the checker (application, domain) is imported when a command runs,
# not when the command line is built.
_STYLE = {
    "supported": "green",
    "unsupported": "red",
    "uncited": "yellow",
    "invalid_citation": "red",
    "contradicted": "bold red",
}


class AnswerFormatChoice(StrEnum):
    """The values of ``AnswerFormat``, for the option."""

    text = "text"
    anthropic = "anthropic"


def _json_out(value: Any) -> None:
    sys.stdout.write(json_text(value) + "\n")  # control characters escaped, as everywhere


def _read_answer(answer: str | None, answer_file: Path | None, fmt: AnswerFormatChoice) -> Any:
    if (answer is None) == (answer_file is None):
        raise InvalidInputError("give exactly one of --answer and --answer-file")
    if answer_file is not None:
        try:
            text = (
                sys.stdin.read()
                if str(answer_file) == "-"
                else answer_file.read_text(encoding="utf-8")
            )
        except OSError as error:
            raise InvalidInputError(f"cannot read {answer_file}: {error.strerror}") from None
    else:
        assert answer is not None
        text = answer
    if fmt is AnswerFormatChoice.text:
        return text
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise InvalidInputError(
            f"--format anthropic needs the Claude response as JSON: {error}"
        ) from None


def _claims_table(check: AnswerCheck) -> Table:
    table = Table(title=f"Answer check {check.id} (session {check.session_id})")
    for column in ("#", "verdict", "cited", "reason / support", "claim"):
        table.add_column(column, overflow="fold")
    for claim in check.claims:
        cited = "\n".join(f"{c.document_id} ({c.status.value})" for c in claim.citations) or "-"
        if claim.support is not None:
            detail = (
                f"{claim.support.document_id}[{claim.support.start}:{claim.support.end}] "
                f"score {claim.support.score:.2f}"
            )
        else:
            detail = "; ".join(claim.reasons) or "-"
        judge = claim.signals.get("judge")
        if isinstance(judge, dict) and judge.get("label"):
            detail += f"\njudge: {judge['label']}"
        table.add_row(
            Text(str(claim.index)),
            Text(claim.verdict.value, style=_STYLE[claim.verdict.value]),
            Text(shown(cited)),
            Text(shown(detail)),
            Text(" ".join(shown(claim.text).split())),
        )
    return table


_SessionOption = Annotated[str, typer.Option(help="The agent's session id.")]
_AnswerOption = Annotated[
    str | None, typer.Option(help="The answer text (or Claude JSON with --format).")
]
_AnswerFileOption = Annotated[
    Path | None,
    typer.Option("--answer-file", help="Read the answer from a file (- = stdin)."),
]
_FormatOption = Annotated[
    AnswerFormatChoice,
    typer.Option(
        "--format",
        help="text: prose with [document_id] citations; anthropic: a Claude response "
        "(message or content blocks) with search_result_location citations.",
    ),
]
_StepOption = Annotated[str | None, typer.Option(help="Step id the answer belongs to.")]
_JsonOption = Annotated[bool, typer.Option("--json")]
_OnlySessionOption = Annotated[str | None, typer.Option(help="Only this session.")]
_SinceOption = Annotated[str | None, typer.Option(help="ISO date/time (inclusive).")]
_UntilOption = Annotated[str | None, typer.Option(help="ISO date/time (exclusive).")]
_LimitOption = Annotated[int, typer.Option(help="Page size.")]
_OffsetOption = Annotated[int, typer.Option(help="Rows to skip.")]


def register_answer_commands(audit_app: typer.Typer, open_app: Callable[[], Any]) -> None:
    @audit_app.command("check-answer")
    def check_answer(
        session: _SessionOption,
        answer: _AnswerOption = None,
        answer_file: _AnswerFileOption = None,
        answer_format: _FormatOption = AnswerFormatChoice.text,
        step: _StepOption = None,
        as_json: _JsonOption = False,
    ) -> None:
        """Check each claim of an answer against what the session was shown; record it.

        Exits 0 only when every claim is supported."""
        payload = _read_answer(answer, answer_file, answer_format)
        _check_answer(open_app, session, payload, answer_format, step, as_json)

    @audit_app.command("checks")
    def checks(
        session: _OnlySessionOption = None,
        since: _SinceOption = None,
        until: _UntilOption = None,
        limit: _LimitOption = 50,
        offset: _OffsetOption = 0,
        as_json: _JsonOption = False,
    ) -> None:
        """List recorded answer checks (oldest first) with their verdict counts."""
        from lookup_knowledge.application.ports import AnswerCheckFilter, TimeRange

        query = AnswerCheckFilter(
            session_id=session,
            time_range=TimeRange(parse_when(since, "--since"), parse_when(until, "--until")),
            limit=limit,
            offset=offset,
        )
        with open_app() as lookup_app:
            items = lookup_app.answer_checks.list_checks(query)
        _show_checks(items, as_json)


def _check_answer(
    open_app: Callable[[], Any],
    session: str,
    payload: Any,
    answer_format: AnswerFormatChoice,
    step: str | None,
    as_json: bool,
) -> None:
    from lookup_knowledge.application.answer_check import answer_check_json
    from lookup_knowledge.application.ports import AnswerFormat
    from lookup_knowledge.domain.answer_check import Verdict

    with open_app() as lookup_app:
        check: AnswerCheck = lookup_app.check_answer(
            session, payload, step_id=step, answer_format=AnswerFormat(answer_format.value)
        )
    if as_json:
        _json_out(answer_check_json(check))
    else:
        out = console()
        out.print(_claims_table(check))
        out.print(
            f"verdict: [bold]{check.verdict.value}[/]  claims: {len(check.claims)}  "
            f"supported: {check.count(Verdict.SUPPORTED)}  "
            f"contradicted: {check.count(Verdict.CONTRADICTED)}"
        )
    if not check.conclusive:
        console(stderr=True).print(
            f"{check.pending_in_spool} record(s) of this session are still in the journal; "
            "'unknown' citations may not be final"
        )
    if not check.all_supported:
        raise typer.Exit(1)


def _show_checks(items: Sequence[AnswerCheckSummary], as_json: bool) -> None:
    if as_json:
        _json_out(
            [
                {
                    "checkId": s.id,
                    "sessionId": s.session_id,
                    "stepId": s.step_id,
                    "verdict": s.verdict.value,
                    "claims": s.claim_count,
                    "supported": s.supported_count,
                    "unsupported": s.unsupported_count,
                    "uncited": s.uncited_count,
                    "invalidCitation": s.invalid_citation_count,
                    "contradicted": s.contradicted_count,
                    "checkerVersion": s.checker_version,
                    "createdAt": s.created_at.isoformat(),
                }
                for s in items
            ]
        )
        return
    table = Table(title="Answer checks")
    columns = ("created", "session", "step", "verdict", "claims", "supported", "contradicted")
    for column in (*columns, "id"):
        table.add_column(column, overflow="fold")
    for s in items:
        table.add_row(
            Text(s.created_at.strftime("%Y-%m-%d %H:%M:%S")),
            Text(shown(s.session_id)),
            Text(shown(s.step_id or "-")),
            Text(s.verdict.value, style=_STYLE[s.verdict.value]),
            Text(str(s.claim_count)),
            Text(str(s.supported_count)),
            Text(str(s.contradicted_count)),
            Text(shown(s.id)),
        )
    console().print(table)
