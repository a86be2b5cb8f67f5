"""The ``lookup-knowledge`` command line (typer + rich): the root app with its global
options, the command groups it is built from, and the error mapping at its boundary.

Errors are one line on stderr and a non-zero exit code (2: bad configuration or input,
1: anything else); ``--debug`` shows the traceback instead.

Commands, one module each: ``knowledge`` (ingest, lookup, health), ``audit``, ``db``,
``config``, ``mcp``, ``quickstart``, ``serve``, ``eval``; what they share: ``context``
(options, settings, the app) and ``render`` (consoles, JSON, tables).
"""

from __future__ import annotations

import atexit
import logging
import os
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
import typer.core
import typer.main

from lookup_knowledge.adapters.cli.context import OPTIONS, command_group, set_global_options
from lookup_knowledge.adapters.cli.memory import limit_malloc_arenas
from lookup_knowledge.adapters.cli.render import console, error_line
from lookup_knowledge.domain.errors import (
    ConfigurationError,
    InvalidInputError,
    LookupKnowledgeError,
    NotFoundError,
)


def _global_options(
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
        str | None,  # text, not Path: Path("") would silently mean the working directory
        typer.Option(
            "--data-dir",
            metavar="<path>",
            help="Data directory (Milvus Lite file, SQLite audit, journal).",
        ),
    ] = None,
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks.")] = False,
) -> None:
    if data_dir is not None and not data_dir.strip():
        raise typer.BadParameter("must name a folder, not be empty", param_hint="'--data-dir'")
    set_global_options(config, data_dir, debug)


class _LazyGroup(typer.core.TyperGroup):
    """A command group that imports its module only when it is run (or its own help
    asked for): the root ``--help`` lists it from its help text alone. The eval group
    pulls the whole evaluation harness, most of a second on a small machine."""

    def __init__(self, name: str, help: str, load: Callable[[], typer.Typer]) -> None:
        super().__init__(name=name, help=help, no_args_is_help=True)
        self._load = load
        self._real: Any = None

    def _target(self) -> Any:
        if self._real is None:
            self._real = typer.main.get_command(self._load())
        return self._real

    def make_context(
        self, info_name: str | None, args: list[str], parent: Any = None, **extra: Any
    ) -> Any:
        return self._target().make_context(info_name, args, parent=parent, **extra)

    def list_commands(self, ctx: Any) -> list[str]:
        return list(self._target().list_commands(ctx))

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        return self._target().get_command(ctx, cmd_name)


def _eval_app() -> typer.Typer:
    from lookup_knowledge.adapters.cli.eval import eval_app

    return eval_app


class _RootGroup(typer.core.TyperGroup):
    """The root group: the registered commands, plus the lazily imported groups."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.add_command(
            _LazyGroup("eval", "Retrieval quality on BEIR collections; replay.", load=_eval_app),
            "eval",
        )


def build_app() -> typer.Typer:
    """The root app with every command group registered (the eval group imported only
    when it runs)."""
    from lookup_knowledge.adapters.cli.audit import audit_app
    from lookup_knowledge.adapters.cli.config import config_app
    from lookup_knowledge.adapters.cli.db import db_app
    from lookup_knowledge.adapters.cli.knowledge import health, ingest, lookup
    from lookup_knowledge.adapters.cli.mcp import mcp
    from lookup_knowledge.adapters.cli.quickstart import quickstart
    from lookup_knowledge.adapters.cli.serve import serve

    app = command_group(
        name="lookup-knowledge",
        help="Evidence lookup for LLM agents over Milvus, with a SQL audit store.",
        cls=_RootGroup,
    )
    app.callback()(_global_options)
    for command in (ingest, lookup, health, mcp, quickstart, serve):
        app.command()(command)
    app.add_typer(audit_app, name="audit")
    app.add_typer(db_app, name="db")
    app.add_typer(config_app, name="config")
    return app


def main() -> None:
    """The ``lookup-knowledge`` console script: run the command, then ``exit_now``."""
    limit_malloc_arenas()  # before any thread allocates (memory.py)
    try:
        run(build_app())
    except SystemExit as done:
        exit_now(done)


def exit_now(done: SystemExit) -> NoReturn:
    """Exit with ``done``'s status once what the command wrote is out, without the
    interpreter's teardown of every module it imported (after a lookup: pandas, pyarrow,
    SQLAlchemy, onnxruntime, gRPC; a noticeable part of a cold lookup, see
    benchmarks/README.md, "Figures that were in source comments").

    Exit handlers (``atexit``) run first, then logging is shut down and the standard
    streams are flushed. Commands close what they open (the app: its audit journal and
    store, Milvus) before they return, so nothing durable is left to a finaliser. The
    normal exit is taken instead when another non-daemon thread still runs (the
    interpreter would wait for it), the status is not a number from 0 to 255, or a
    stream cannot be flushed (so a closed pipe is reported as Python reports it).
    """
    code = 0 if done.code is None else done.code
    main_thread = threading.main_thread()
    running = [t for t in threading.enumerate() if t is not main_thread and not t.daemon]
    if not isinstance(code, int) or not 0 <= code <= 255 or running:
        raise done
    atexit._run_exitfuncs()
    logging.shutdown()
    try:
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:  # None: started with that descriptor closed
                stream.flush()
    except (OSError, ValueError):
        raise done from None
    os._exit(code)


def run(app: typer.Typer) -> NoReturn:
    """Run ``app`` on ``sys.argv`` and exit with its code; an error is one line."""
    try:
        # Without standalone mode click returns an Exit's code instead of raising it.
        code = app(standalone_mode=False)
    except typer.Exit as done:
        raise SystemExit(done.exit_code) from None
    except typer.Abort:
        error_line("aborted")
        raise SystemExit(130) from None
    except Exception as error:  # noqa: BLE001 - the CLI boundary: one line, not a traceback
        raise SystemExit(_report(error)) from None
    raise SystemExit(code if isinstance(code, int) else 0)


def _report(error: BaseException) -> int:
    if OPTIONS.debug:
        console(stderr=True).print_exception()
    if isinstance(error, typer.TyperException):
        # typer's own copy of click (not the click package): usage errors (exit 2) and
        # the few other errors it raises, each with typer's message.
        message = getattr(error, "message", None)
        if isinstance(message, str):
            # typer converts values with pydantic, whose text for a bad choice starts
            # "Value error, ": pydantic's wording, not the user's concern.
            error.message = message.replace("Value error, ", "")
        show = getattr(error, "show", None)
        if callable(show):
            show()
        else:
            error_line(f"Error: {error.format_message()}")
        return error.exit_code
    if isinstance(error, ConfigurationError | InvalidInputError):
        error_line(f"error: {error}")
        return 2
    if isinstance(error, NotFoundError):
        error_line(f"not found: {error}")
        return 1
    if isinstance(error, LookupKnowledgeError):
        error_line(f"error ({error.code}): {error}")
        return 1
    if isinstance(error, OSError):
        # A file or folder the system refused (a data directory that cannot be made, a
        # full disk, a permission): what and where, on one line.
        error_line(f"error: {_os_error(error)}")
        return 1
    error_line(
        f"internal error: {type(error).__name__}: {error} (run with --debug for the traceback)"
    )
    return 1


def _os_error(error: OSError) -> str:
    reason = error.strerror or type(error).__name__
    if error.filename is None:
        return f"{reason} ({type(error).__name__})"
    return f"{reason}: {error.filename}"


if __name__ == "__main__":  # pragma: no cover
    main()
