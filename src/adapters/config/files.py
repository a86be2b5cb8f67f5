"""What the settings read from disk: the data directory's usability, the domains file,
the journal folder an older version left. ``Settings`` stays a pure validation of values;
these are the parts that look at the file system."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from lookup_knowledge.adapters.config.fields import split_keywords
from lookup_knowledge.domain.errors import ConfigurationError

if TYPE_CHECKING:
    from lookup_knowledge.adapters.config.settings import Settings

JOURNAL_DIR = "audit-journal"  # under the data directory
LEGACY_JOURNAL_DIR = "audit-spool"  # its name before "spool" was renamed "journal"


def audit_journal_dir(settings: Settings) -> Path:
    """``audit.journal-dir``, else ``<data-dir>/audit-journal``; a data directory an
    older version wrote keeps its ``audit-spool`` folder (nothing in it is lost)."""
    if settings.audit.journal_dir is not None:
        return settings.audit.journal_dir
    legacy = settings.data_dir / LEGACY_JOURNAL_DIR
    if legacy.is_dir() and not (settings.data_dir / JOURNAL_DIR).exists():
        return legacy
    return settings.data_dir / JOURNAL_DIR


def domain_dictionary(settings: Settings) -> dict[str, list[str]]:
    """``rag.domains-file`` entries, then ``rag.domains``; a category in both gets the
    keywords of both (file first, no repeats)."""
    merged: dict[str, list[str]] = {}
    sources: list[dict[str, list[str]]] = []
    if settings.rag.domains_file is not None:
        sources.append(read_domains_file(settings.rag.domains_file))
    sources.append(settings.rag.domains)
    for source in sources:
        for category, keywords in source.items():
            known = merged.setdefault(category.strip(), [])
            known.extend(k for k in keywords if k not in known)
    return merged


_DOMAINS_FILE_KEY = "rag.domains-file"
DATA_DIR_KEY = "data-dir"


def check_data_dir(path: Path) -> None:
    """What can be told without creating anything: ``path`` is a folder (or can become
    one) that this process can use. ``ConfigurationError`` naming ``data-dir`` if not;
    creating it may still fail (``/proc/x``), which ``private_files`` reports the same way.
    """
    if "\x00" in str(path):
        raise ConfigurationError(DATA_DIR_KEY, str(path), "must not contain NUL")
    try:
        if path.exists():
            if not path.is_dir():
                raise ConfigurationError(DATA_DIR_KEY, str(path), "is a file, not a folder")
            if not os.access(path, os.R_OK | os.W_OK | os.X_OK):
                raise ConfigurationError(
                    DATA_DIR_KEY, str(path), "is a folder this user cannot read and write"
                )
            return
        for parent in path.parents:
            if parent.exists():
                if not parent.is_dir():
                    raise ConfigurationError(
                        DATA_DIR_KEY, str(path), f"is under {parent}, which is a file"
                    )
                return
    except OSError as e:  # e.g. a name too long, a loop of links
        raise ConfigurationError(DATA_DIR_KEY, str(path), f"cannot be used ({e.strerror})") from e


def read_domains_file(path: Path) -> dict[str, list[str]]:
    """A YAML mapping of category -> keywords (a list or a comma-separated string)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise ConfigurationError(
            _DOMAINS_FILE_KEY, str(path), f"must be a readable file ({e.strerror})"
        ) from e
    try:
        data: Any = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise ConfigurationError(_DOMAINS_FILE_KEY, str(path), f"must be valid YAML ({e})") from e
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigurationError(
            _DOMAINS_FILE_KEY, str(path), "must hold a mapping of category -> keywords"
        )
    result: dict[str, list[str]] = {}
    for category, raw in data.items():
        keywords = split_keywords(raw)
        if (
            not isinstance(category, str)
            or not category.strip()
            or not isinstance(keywords, list)
            or not all(isinstance(k, str) for k in keywords)
        ):
            raise ConfigurationError(
                _DOMAINS_FILE_KEY,
                str(path),
                f"entry {category!r} must map a category name to a list of keywords",
            )
        result[category.strip()] = [str(k) for k in keywords]
    return result
