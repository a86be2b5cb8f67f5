"""``DurableFiles``: the one place that makes a file, an append or a rename durable.

The audit journal and the full-text index's journal both append lines that must survive a
crash, replace files atomically and make a directory entry durable. They do it through
one value, so a test swaps the ``fsync`` function (to count calls, to slow one down, to
fail) instead of patching ``os``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

Fsync = Callable[[int], None]


@dataclass(frozen=True, slots=True)
class DurableFiles:
    """``fsync``: what makes a descriptor's data durable (``os.fsync``; a test's fake);
    ``enabled`` False: nothing is fsync'd (written to the operating system only)."""

    fsync: Fsync = os.fsync
    enabled: bool = True

    def sync(self, handle: IO[Any] | int) -> None:
        """Durably write what ``handle`` (a file object or a descriptor) holds."""
        if self.enabled:
            self.fsync(handle if isinstance(handle, int) else handle.fileno())

    def sync_dir(self, path: Path) -> None:
        """Durably record the directory's entries (a file created, renamed or removed)."""
        if not self.enabled or os.name != "posix":  # pragma: no cover - non-POSIX
            return
        fd = os.open(path, os.O_RDONLY)
        try:
            self.fsync(fd)
        finally:
            os.close(fd)

    def append_line(self, path: Path, data: bytes) -> None:
        """Append ``data`` to ``path`` (created private), durably; the directory entry
        too when the file is new."""
        created = not path.exists()
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            os.write(fd, data)
            self.sync(fd)
        finally:
            os.close(fd)
        if created:
            self.sync_dir(path.parent)

    def replace(self, source: Path, target: Path) -> None:
        """Rename ``source`` over ``target`` (atomic), durably."""
        os.replace(source, target)
        self.sync_dir(target.parent)

    def remove(self, path: Path) -> None:
        """Remove ``path`` if present, durably."""
        if path.exists():
            path.unlink()
            self.sync_dir(path.parent)


#: Appends, renames and removals fsync'd with ``os.fsync``: the default.
FSYNCED = DurableFiles()
