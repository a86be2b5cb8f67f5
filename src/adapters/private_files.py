"""Folders and files only their owner can read: the audit store holds every query users
asked, so what this package creates is 0700 (folders) and 0600 (files) whatever the
umask. A path that cannot be created is a ``ConfigurationError`` naming the setting, so
the CLI says which value to fix (exit 2) instead of an ``internal error: OSError``.

Only what is created here gets these modes; a folder the user made beforehand keeps its
own.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import IO

from lookup_knowledge.domain.errors import ConfigurationError

DIRECTORY_MODE = 0o700
FILE_MODE = 0o600


def _refuse(key: str, path: Path, error: OSError, doing: str) -> ConfigurationError:
    reason = error.strerror or type(error).__name__
    return ConfigurationError(key, str(path), f"{doing} ({reason})")


def private_directory(path: str | os.PathLike[str], *, key: str) -> Path:
    """``mkdir -p`` whose created folders are 0700; the folder, checked usable."""
    target = Path(path)
    missing: list[Path] = []
    probe = target
    try:
        while not probe.exists():
            missing.append(probe)
            if probe.parent == probe:
                break
            probe = probe.parent
        if probe.exists() and not probe.is_dir():
            raise ConfigurationError(key, str(target), f"is under {probe}, which is a file")
        for folder in reversed(missing):
            try:
                os.mkdir(folder, DIRECTORY_MODE)
            except FileExistsError:
                if not folder.is_dir():
                    raise
                continue
            os.chmod(folder, DIRECTORY_MODE)  # a umask cannot have widened it, only narrowed
    except ConfigurationError:
        raise
    except (OSError, ValueError) as error:
        if isinstance(error, ValueError):  # an embedded NUL
            raise ConfigurationError(key, str(target), "is not a valid path") from error
        raise _refuse(key, target, error, "cannot be created") from error
    if not target.is_dir():
        raise ConfigurationError(key, str(target), "is a file, not a folder")
    if not os.access(target, os.R_OK | os.W_OK | os.X_OK):
        raise ConfigurationError(key, str(target), "is a folder this user cannot read and write")
    return target


def private_file(path: str | os.PathLike[str], *, key: str) -> Path:
    """Create ``path`` empty with mode 0600 unless it exists (then it is left as is)."""
    target = Path(path)
    try:
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
    except FileExistsError:
        return target
    except OSError as error:
        raise _refuse(key, target, error, "cannot be created") from error
    try:
        os.fchmod(fd, FILE_MODE)
    finally:
        os.close(fd)
    return target


def open_private_append(path: str | os.PathLike[str], encoding: str) -> IO[str]:
    """``open(path, "a")`` whose file, if created, is 0600."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, FILE_MODE)
    return os.fdopen(fd, "a", encoding=encoding)
