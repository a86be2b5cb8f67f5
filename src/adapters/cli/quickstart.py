"""``lookup-knowledge quickstart``: the bundled sample corpus end to end - ingest,
lookups, the audit rows they left, a citation check."""

from __future__ import annotations

import json
import shlex
import shutil
import sys
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from lookup_knowledge.adapters.cli.context import load
from lookup_knowledge.adapters.cli.knowledge import run_ingest
from lookup_knowledge.adapters.cli.render import (
    console,
    ingest_table,
    invocations_table,
    literal,
    show_lookup,
)

if TYPE_CHECKING:
    from rich.console import Console

    from lookup_knowledge.adapters.api import LookupApp
    from lookup_knowledge.adapters.config import Settings


def quickstart(
    questions: Annotated[int, typer.Option(help="How many sample questions to ask.")] = 4,
) -> None:
    """Ingest the bundled sample corpus, run lookups, show the audit rows and a citation check."""
    from lookup_knowledge.adapters.api import create_app
    from lookup_knowledge.adapters.api_requests import IngestRequest
    from lookup_knowledge.sample_corpus import corpus_path

    corpus = corpus_path()
    settings = load({"rag.domains-file": str(corpus / "domains.yaml")}).settings
    out = console()
    _introduce(out, settings)
    with create_app(settings) as lookup_app:
        out.rule("1. ingest the sample corpus")
        categories = sorted(
            p for p in corpus.iterdir() if p.is_dir() and not p.name.startswith("_")
        )
        out.print(
            ingest_table(run_ingest(lookup_app, IngestRequest(categories, root=corpus, sync=True)))
        )
        samples = json.loads((corpus / "questions.json").read_text(encoding="utf-8"))
        session = f"quickstart-{datetime.now(UTC):%Y%m%d-%H%M%S}-{uuid.uuid4().hex[:6]}"
        out.rule(f"2. lookups in session {session}")
        returned = _ask(out, lookup_app, session, pick_questions(samples, questions))
        out.rule("3. the audit store")
        from lookup_knowledge.application.ports import InvocationFilter

        page = lookup_app.audit.list_invocations(InvocationFilter(session_id=session))
        out.print(invocations_table(page.items))
        out.rule("4. citation check (EvidenceGuard)")
        _check_citations(out, lookup_app, session, [*returned[:2], "made-up/document.md#chunk-0"])
    out.rule("done")
    _suggest(out, settings.data_dir, session)


def _introduce(out: Console, settings: Settings) -> None:
    from lookup_knowledge.adapters.config import mask_url

    out.rule("[bold]lookup-knowledge quickstart")
    out.print(f"data directory: {settings.data_dir}")
    out.print(f"milvus: {settings.milvus_uri}   audit: {mask_url(settings.audit_database_url)}")
    out.print(f"embedder: {settings.embedder.provider.value}   mode: {settings.rag.search_mode}")


def _ask(
    out: Console, lookup_app: LookupApp, session: str, samples: list[dict[str, str]]
) -> list[str]:
    """Each sample question as one step of ``session``; the document_ids returned."""
    from lookup_knowledge.adapters.api_requests import LookupRequest

    returned: list[str] = []
    for step, sample in enumerate(samples, 1):
        out.print(f"\n[bold cyan]Q{step}[/] {literal(sample['query'])}")
        result = lookup_app.lookup_result(
            LookupRequest(sample["query"], session_id=session, step_id=f"step-{step}")
        )
        show_lookup(out, result.to_tool_json())
        returned += [b.document_id for b in result.evidence_blocks]
        hit = any(b.source == sample["expected_doc"] for b in result.evidence_blocks)
        out.print(
            f"expected source {literal(sample['expected_doc'])}: "
            + ("[green]returned[/]" if hit else "[yellow]not in the top results[/]")
        )
    return returned


def _check_citations(out: Console, lookup_app: LookupApp, session: str, cited: list[str]) -> None:
    verdict = lookup_app.verify_citations(session, cited)
    for v in verdict.valid:
        out.print(
            f"[green]valid[/]   {literal(v.document_id)}  (step {literal(v.step_id or '-')}, seq {v.seq})"
        )
    for unknown in verdict.unknown:
        out.print(f"[red]unknown[/] {literal(unknown)}  (never returned in this session)")


def _suggest(out: Console, data_dir: Path, session: str) -> None:
    cli = f"{runnable_cli()} --data-dir {shlex.quote(str(data_dir.resolve()))}"
    commands = (
        f'{cli} lookup "PG-53300 too many connections"',
        f"{cli} audit list --session {shlex.quote(session)}",
        f"{cli} audit stats",
        f"{cli} serve        # the audit console in a browser",
        f"{cli} ingest path/to/your/docs",
    )
    # Plain text: a path may contain brackets, and the lines are meant to be copied.
    out.print("Try next:\n" + "\n".join(f"  {c}" for c in commands), markup=False, soft_wrap=True)


def runnable_cli() -> str:
    """This command line as a shell in any folder runs it: ``lookup-knowledge`` when
    that is what PATH finds, else the console script's absolute path (a virtualenv's
    ``bin`` is rarely on PATH: ``scripts/quickstart`` runs ``.venv/bin/lookup-knowledge``)."""
    script = Path(sys.executable).parent / "lookup-knowledge"
    on_path = shutil.which("lookup-knowledge")
    if on_path is not None and script.exists() and Path(on_path).resolve() == script.resolve():
        return "lookup-knowledge"
    if script.exists():
        return shlex.quote(str(script.absolute()))
    return f"{shlex.quote(sys.executable)} -m lookup_knowledge.adapters.cli.app"


def pick_questions(samples: list[dict[str, str]], n: int) -> list[dict[str, str]]:
    """A mix: English questions first, then at least one Chinese one when n > 1."""
    chinese = [s for s in samples if any("\u4e00" <= ch <= "\u9fff" for ch in s["query"])]
    english = [s for s in samples if s not in chinese]
    picked = english[: max(n - 1, 1)] + chinese[:1] if n > 1 else english[:1]
    return picked[:n]
