"""Optional extras: a feature whose extra is not installed is an ``ExtraNotInstalled``
(a ``ConfigurationError``: the CLI prints one line naming the pip command, exit 2), not
an ``ImportError`` traceback. pyproject.toml lists what each extra installs."""

from __future__ import annotations

import importlib
from types import ModuleType

from lookup_knowledge.domain.errors import ExtraNotInstalled


def require(extra: str, feature: str, *modules: str) -> None:
    """Import ``modules`` (the extra's top-level packages) or raise ``ExtraNotInstalled``."""
    for name in modules:
        load(extra, feature, name)


def load(extra: str, feature: str, module: str) -> ModuleType:
    try:
        return importlib.import_module(module)
    except ImportError as error:
        raise ExtraNotInstalled(extra, feature, error.name or module) from error


def missing_extra(error: ImportError, extra: str, feature: str) -> ExtraNotInstalled:
    """The typed error for an ``ImportError`` met while importing ``feature``'s code."""
    return ExtraNotInstalled(extra, feature, error.name or str(error))
