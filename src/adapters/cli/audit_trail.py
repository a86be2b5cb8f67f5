"""``lookup-knowledge audit public-key | verify-log | export | verify-bundle | prune``:
the tamper-evident trail (docs/audit.md, "Proving the trail was not edited").

``verify-log`` and ``verify-bundle`` exit 0 when intact, 1 naming the first broken record
and what is wrong with it, 2 for a usage error (a key file that is missing, say)."""

from __future__ import annotations

import json
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from lookup_knowledge.adapters.cli.context import parse_when
from lookup_knowledge.adapters.cli.render import console, literal, print_json

if TYPE_CHECKING:
    from lookup_knowledge.adapters.api import LookupApp
    from lookup_knowledge.application.ports.trail import TrailReport
    from lookup_knowledge.domain.trail import Problem

_KEY_FILE = typer.Option(
    "--public-key",
    help="The checkpoints' public key (PEM, from `audit public-key`); default: the configured key's.",
    exists=True,
    dir_okay=False,
    readable=True,
)


def _problem_data(problem: Problem | None) -> dict[str, object] | None:
    if problem is None:
        return None
    return {
        "what": problem.kind.value,
        "detail": problem.detail,
        "position": problem.position,
        "recordKind": problem.record_kind,
        "recordId": problem.record_id,
        "sessionId": problem.session_id,
        "seq": problem.seq,
        "checkpoint": problem.checkpoint,
        "message": problem.describe(),
    }


def _report_data(report: TrailReport) -> dict[str, object]:
    last = report.last_checkpoint
    return {
        "intact": report.intact,
        "problem": _problem_data(report.problem),
        "records": report.records,
        "contentChecked": report.content_checked,
        "firstPosition": report.first_position,
        "lastPosition": report.last_position,
        "checkpoints": report.checkpoints,
        "lastCheckpoint": None if last is None else last.as_dict(),
        "unsigned": report.unsigned,
        "prunedThrough": report.pruned_through,
        "pruneCheckpoint": report.prune_checkpoint,
        "chainedAtUpgrade": report.upgrade_chained,
        "keyId": report.key_id,
        "witness": report.witness,
        "witnessed": report.witnessed,
    }


def _show_report(report: TrailReport) -> None:
    out = console()
    if report.problem is not None:
        out.print(f"audit trail BROKEN: {literal(report.problem.describe())}")
    else:
        span = (
            f" (positions {report.first_position}..{report.last_position})"
            if report.first_position is not None
            else ""
        )
        out.print(
            f"audit trail intact: {report.records} records{span}, "
            f"{report.content_checked} rehashed; key {report.key_id}"
        )
    last = report.last_checkpoint
    if last is not None:
        out.print(
            f"checkpoints: {report.checkpoints}, the last #{last.number} ({literal(last.kind)}) "
            f"at {last.created_at} UTC signed {last.position} records"
        )
    else:
        out.print("checkpoints: none signed yet")
    if report.pruned_through:
        out.print(
            f"pruned: records 1..{report.pruned_through} removed behind signed checkpoint "
            f"#{report.prune_checkpoint}"
        )
    if report.upgrade_chained:
        out.print(
            f"{report.upgrade_chained} records were chained at the upgrade (revision 0007): "
            "proven unchanged since then"
        )
    if report.witness is not None:
        out.print(
            f"witness: {report.witnessed} checkpoints in {literal(report.witness)} checked "
            "against the database"
        )
    if report.unsigned:
        out.print(f"{report.unsigned} records after the last checkpoint are not signed yet")


def register_trail_commands(
    audit_app: typer.Typer, open_app: Callable[[], AbstractContextManager[LookupApp]]
) -> None:
    @audit_app.command("public-key")
    def public_key() -> None:
        """Print the public key (PEM) that verifies the trail's signed checkpoints."""
        with open_app() as app:
            pem = app.audit_trail.public_key_pem()
        typer.echo(pem, nl=False)

    _register_verify_log(audit_app, open_app)
    _register_bundles(audit_app, open_app)
    _register_prune(audit_app, open_app)


def _register_verify_log(
    audit_app: typer.Typer, open_app: Callable[[], AbstractContextManager[LookupApp]]
) -> None:
    @audit_app.command("verify-log")
    def verify_log(
        since: Annotated[
            str | None, typer.Option(help="Only records chained at or after this ISO time.")
        ] = None,
        session: Annotated[
            str | None, typer.Option(help="Rehash only this session's records.")
        ] = None,
        key: Annotated[Path | None, _KEY_FILE] = None,
        witness: Annotated[
            Path | None,
            typer.Option(
                help="A witness's copy of the checkpoints (JSON lines, as "
                "audit.checkpoint-file writes them); default: that file, when configured.",
                exists=True,
                dir_okay=False,
                readable=True,
            ),
        ] = None,
        as_json: Annotated[bool, typer.Option("--json")] = False,
    ) -> None:
        """Recompute the hash chain and check the signed checkpoints (and a witness's
        copy of them): exit 0 when intact, 1 naming the first broken record and what is
        wrong."""
        at = parse_when(since, "--since")
        with open_app() as app:
            report = app.audit_trail.verify_log(
                at,
                session,
                None if key is None else str(key),
                None if witness is None else str(witness),
            )
        if as_json:
            print_json(_report_data(report))
        else:
            _show_report(report)
        if not report.intact:
            raise typer.Exit(1)


def _register_bundles(
    audit_app: typer.Typer, open_app: Callable[[], AbstractContextManager[LookupApp]]
) -> None:
    @audit_app.command("export")
    def export(
        session: Annotated[str, typer.Option(help="The session to export.")],
        bundle: Annotated[
            Path, typer.Option(help="The evidence bundle file to write (JSON).", dir_okay=False)
        ],
    ) -> None:
        """Write a session's evidence bundle: its records with what was shown, their
        hashes and the chain to a signed checkpoint (checked offline by verify-bundle)."""
        with open_app() as app:
            data = app.audit_trail.export_bundle(session)
        bundle.write_text(json.dumps(data, ensure_ascii=False, indent=1) + "\n", "utf-8")
        console().print(
            f"wrote {len(data['records'])} records of session {literal(session)} to "
            f"{literal(str(bundle))} (checkpoint #{data['checkpoint']['number']})"
        )

    @audit_app.command("verify-bundle")
    def verify_bundle(
        bundle: Annotated[
            Path, typer.Argument(help="The evidence bundle.", exists=True, dir_okay=False)
        ],
        key: Annotated[
            Path,
            typer.Option(
                "--public-key",
                help="The checkpoints' public key (PEM).",
                exists=True,
                dir_okay=False,
            ),
        ],
        as_json: Annotated[bool, typer.Option("--json")] = False,
    ) -> None:
        """Verify an evidence bundle offline, without the database: exit 0 when intact,
        1 naming what is wrong."""
        _check_bundle(bundle, key, as_json)


def _register_prune(
    audit_app: typer.Typer, open_app: Callable[[], AbstractContextManager[LookupApp]]
) -> None:
    @audit_app.command("prune")
    def prune(
        before: Annotated[
            str, typer.Option(help="Remove the records chained before this ISO time.")
        ],
    ) -> None:
        """Remove old records behind a signed checkpoint at the cut (verify-log still
        passes and reports the pruned range); refuses when the trail does not verify."""
        at = parse_when(before, "--before")
        assert at is not None
        with open_app() as app:
            done = app.audit_trail.prune(at)
        if done.checkpoint is None:
            console().print("nothing to prune: no record was chained before that time")
            return
        console().print(
            f"pruned {done.removed} records (positions up to {done.pruned_through}) behind "
            f"signed checkpoint #{done.checkpoint.number}"
        )


def _check_bundle(bundle: Path, key: Path, as_json: bool) -> None:
    from lookup_knowledge.adapters.signing import TrailVerifyKey
    from lookup_knowledge.domain.trail import FORMATS
    from lookup_knowledge.domain.trail_checks import verify_bundle as check

    verify_key = TrailVerifyKey.from_file(key)
    try:
        data: Any = json.loads(bundle.read_text("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        data = {"format": f"unreadable ({error})"}
    if not isinstance(data, dict):
        data = {"format": "not a JSON object"}
    report = check(data, FORMATS, verify_key.check, verify_key.key_id)
    if as_json:
        print_json(
            {
                "intact": report.ok,
                "records": report.records,
                "checkpoint": report.checkpoint,
                "problem": _problem_data(report.problem),
            }
        )
    elif report.ok:
        console().print(
            f"bundle intact: {report.records} records of session "
            f"{literal(str(data.get('sessionId')))}, chained to checkpoint "
            f"#{report.checkpoint} signed by key {verify_key.key_id}"
        )
    else:
        problem = report.problem
        console().print(f"bundle BROKEN: {literal(problem.describe() if problem else 'unknown')}")
    if not report.ok:
        raise typer.Exit(1)
