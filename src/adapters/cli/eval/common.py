"""What ``eval run`` and ``eval replay`` share: their settings (the global options, then
the command's own) and a progress bar driven by the use cases' events."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

if TYPE_CHECKING:
    from rich.console import Console

    from lookup_knowledge.adapters.config import Settings
    from lookup_knowledge.application.evaluation import EvalProgress

EMBEDDER_HELP = "Embedder: onnx-minilm (default), hashing (fast, for smoke runs), openai, none."


def _root_params(ctx: typer.Context) -> dict[str, Any]:
    """The parent ``lookup-knowledge`` options (``--config``, ``--data-dir``) when this
    sub-app runs under it; nothing when it runs on its own."""
    root = ctx.find_root()
    return dict(root.params) if root is not ctx else {}


@dataclass(frozen=True)
class SettingsLoader:
    """Loads the settings of an eval or a replay: the global options, this command's
    ``--data-dir`` (it wins) and ``--embedder``, then per call the overrides and the
    collection."""

    ctx: typer.Context | None
    data_dir: Path | None
    embedder: str | None
    #: The root options when there is no ``ctx`` (an eval a server runs for the CLI).
    root_params: dict[str, Any] | None = None

    def load(
        self, overrides: dict[str, object] | None = None, collection: str | None = None
    ) -> Settings:
        from lookup_knowledge.adapters.config import load_settings

        root = self.root_params if self.ctx is None else _root_params(self.ctx)
        root = root or {}
        values: dict[str, object] = {}
        directory = self.data_dir or root.get("data_dir")
        if directory is not None:
            values["data-dir"] = str(directory)
        if self.embedder:
            values["embedder.provider"] = self.embedder
        values.update(overrides or {})
        if collection:
            values["milvus.collection"] = collection
        return load_settings(config_file=root.get("config"), overrides=values).settings


class ProgressBar:
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

    def __enter__(self) -> ProgressBar:
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


def refuse_beside_server(settings: Settings) -> None:
    """A replay opens the Milvus Lite file itself and does not run through a server (an
    ``eval run`` does): with one holding the file, say which and how to go on
    (``SearchStoreInUse``)."""
    from lookup_knowledge.adapters.cli.context import server_holding_store
    from lookup_knowledge.domain.errors import SearchStoreInUse

    server = server_holding_store(settings)
    if server is not None:
        raise SearchStoreInUse(
            f"the Milvus Lite file {server.lite_path} is held by {server.describe()}, and "
            "eval replay does not run through a server: stop it (Ctrl-C or SIGTERM) and "
            "replay again, or give the replay another --data-dir"
        )
