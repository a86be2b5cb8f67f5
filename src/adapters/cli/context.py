"""What every command shares: the global options (``--config``, ``--data-dir``,
``--debug``), the settings they select, the app built from them, and option parsing.

The configuration and the API are imported when a command loads them, not with the
command line: ``lookup-knowledge --help`` reads no settings and starts no driver.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from lookup_knowledge.adapters.logging_setup import configure_logging
from lookup_knowledge.domain.errors import InvalidInputError

if TYPE_CHECKING:
    from lookup_knowledge.adapters.api import LookupApp
    from lookup_knowledge.adapters.config import LoadedSettings, Settings
    from lookup_knowledge.adapters.local_server import RunningServer


@dataclass
class GlobalOptions:
    """The root command's options, set by its callback before any command runs."""

    config_file: Path | None = None
    data_dir: str | None = None
    debug: bool = False


OPTIONS = GlobalOptions()


def command_group(**settings: Any) -> typer.Typer:
    """A typer app as every group of this CLI is made: help without a group's
    arguments, tracebacks left to the error mapping, plain help text.

    Plain, because typer's rich help labels every flag ``<bool>`` (``--json <bool>``)
    as if it took a value; the plain formatter names flags as they are typed."""
    defaults: dict[str, Any] = {
        "no_args_is_help": True,
        "pretty_exceptions_enable": False,
        "add_completion": False,
        "rich_markup_mode": None,
    }
    return typer.Typer(**{**defaults, **settings})


def set_global_options(config_file: Path | None, data_dir: str | None, debug: bool) -> None:
    OPTIONS.config_file, OPTIONS.data_dir, OPTIONS.debug = config_file, data_dir, debug
    # Until the settings are read (they may be invalid), only warnings and errors.
    configure_logging("DEBUG" if debug else "WARNING", json_lines=False)


def load(extra: dict[str, object] | None = None) -> LoadedSettings:
    """The settings (defaults < file < env < ``--data-dir`` < ``extra``); configures
    logging from them."""
    from lookup_knowledge.adapters.config import load_settings

    overrides: dict[str, object] = {}
    if OPTIONS.data_dir is not None:
        overrides["data-dir"] = OPTIONS.data_dir
    overrides.update(extra or {})
    loaded = load_settings(config_file=OPTIONS.config_file, overrides=overrides)
    log = loaded.settings.log
    # log.level governs the product's own loggers; the CLI stays quiet below WARNING
    # unless asked (--debug, or log.level set by the user).
    level = "DEBUG" if OPTIONS.debug else log.level
    if loaded.sources.get("log.level", "default") == "default" and not OPTIONS.debug:
        level = "WARNING"
    configure_logging(level, json_lines=log.json_)
    return loaded


# What dependency_injector's wiring module imports, when installed, to recognise these
# frameworks' markers in the functions it wires.
_WIRING_HOOKS = ("fastapi", "fast_depends", "starlette", "werkzeug")


def import_container_lightly() -> None:
    """Import dependency_injector (the container's library) without the web frameworks
    its wiring module imports only to recognise their markers in wired functions
    (FastAPI, Starlette, Werkzeug: ~0.3 s of a cold ``audit list`` with the ``server``
    extra installed). Nothing in this package is wired, and the command line is the
    whole process; a framework already imported is left alone, and every one can still
    be imported afterwards (``serve`` does). A host that embeds the package imports it as
    usual: this runs in the command line only."""
    if "dependency_injector.wiring" in sys.modules:
        return
    hidden = [name for name in _WIRING_HOOKS if name not in sys.modules]
    for name in hidden:
        sys.modules[name] = None  # type: ignore[assignment] # import raises ImportError
    try:
        import dependency_injector.wiring  # noqa: F401
    finally:
        for name in hidden:
            if sys.modules.get(name, 0) is None:
                del sys.modules[name]


def open_app(extra: dict[str, object] | None = None) -> LookupApp:
    """An app on the loaded settings; the caller closes it (``with``)."""
    import_container_lightly()
    from lookup_knowledge.adapters.api import create_app

    return create_app(load(extra).settings)


def open_audit_app(extra: dict[str, object] | None = None) -> LookupApp:
    """An app for a command that reads (or adds to) the audit store: the knowledge
    search and the embedder start only if the command turns out to need them, so
    ``audit list`` loads neither the Milvus client nor the model runtime."""
    import_container_lightly()
    from lookup_knowledge.adapters.api import create_app

    return create_app(load(extra).settings, eager=False)


def server_holding_store(settings: Settings) -> RunningServer | None:
    """The live server (``<data-dir>/server.json``) that holds the Milvus Lite file these
    settings open: the commands that need the knowledge store go through it, since Lite
    opens a file in one process. None when there is none (or these settings open no
    Lite file, or another one)."""
    from lookup_knowledge.adapters.local_server import held_lite_path, running_server

    lite = held_lite_path(settings.search.backend.value, settings.milvus_uri)
    if lite is None:
        return None
    server = running_server(settings.data_dir)
    if server is None or server.lite_path != lite:
        return None
    return server


def store_server() -> RunningServer | None:
    """``server_holding_store`` on the loaded settings; says on stderr when one is used."""
    from lookup_knowledge.adapters.cli.render import error_line

    server = server_holding_store(load().settings)
    if server is not None:
        error_line(f"note: through {server.describe()}, which holds the Milvus Lite file")
    return server


def parse_when(value: str | None, name: str) -> datetime | None:
    """An ISO date or datetime option; a naive one is taken as UTC."""
    if value is None:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise InvalidInputError(f"{name} must be an ISO date or datetime, got {value!r}") from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
