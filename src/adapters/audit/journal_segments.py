"""The audit journal's segments: one file per live journal, found, locked and read here.

Every journal writes its own segment ``journal-<token>.jsonl`` and holds an exclusive
``flock`` on it for its lifetime; a segment nobody holds is an orphan of a process that
died (or of a closed recorder), for a live journal to adopt. Segments written before the
rename (``spool-<token>.jsonl``) are found, read and adopted the same way, so an upgrade
leaves nothing behind. Without ``fcntl`` (not POSIX) orphans are not adopted.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from lookup_knowledge.adapters.audit.journal_format import decode_bound, session_needle

try:
    import fcntl
except ImportError:  # pragma: no cover - non-POSIX
    fcntl = None  # type: ignore[assignment]

logger = logging.getLogger(__name__)

SEGMENT_PREFIX = "journal-"
LEGACY_PREFIX = "spool-"  # segments written before "spool" was renamed "journal"
SEGMENT_SUFFIX = ".jsonl"
REJECTED_NAME = "rejected.jsonl"
_SCAN_ATTEMPTS = 3

CAN_LOCK = fcntl is not None


def segment_name(token: str) -> str:
    return f"{SEGMENT_PREFIX}{token}{SEGMENT_SUFFIX}"


def segments(directory: Path, *, but: str = "") -> list[Path]:
    """The directory's segments (old names too), sorted, but the one named ``but``."""
    try:
        found = [
            p
            for prefix in (LEGACY_PREFIX, SEGMENT_PREFIX)
            for p in directory.glob(f"{prefix}*{SEGMENT_SUFFIX}")
            if p.name != but
        ]
    except OSError as error:
        logger.warning("cannot list the audit journal directory %s: %s", directory, error)
        return []
    return sorted(found)


def open_for_reading(path: Path) -> IO[str]:
    return open(path, encoding="ascii", errors="replace", newline="")


def try_lock(handle: IO[Any]) -> bool:
    if fcntl is None:  # pragma: no cover
        return True
    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False
    return True


def lock_orphan(
    path: Path, open_segment: Callable[[Path], IO[str]] = open_for_reading
) -> IO[str] | None:
    """The segment at ``path``, open (with ``open_segment``) and locked, if it is an
    orphan; else None."""
    try:
        handle = open_segment(path)
    except FileNotFoundError:
        return None
    except OSError:
        logger.exception("cannot open audit journal %s", path)
        return None
    try:
        if not try_lock(handle):
            handle.close()
            return None  # a live journal of another process
        locked = os.fstat(handle.fileno())
        try:
            current = os.stat(path)
        except FileNotFoundError:  # adopted and removed by someone else meanwhile
            handle.close()
            return None
        if (locked.st_dev, locked.st_ino) != (current.st_dev, current.st_ino):
            # The owner rewrote its segment after we opened it: what we locked is the
            # old, replaced file; the one at ``path`` now is live (or, if its owner
            # died since, an orphan for the next adoption).
            handle.close()
            return None
    except BaseException:
        handle.close()
        raise
    return handle


def scan_ids(
    list_paths: Callable[[], list[Path]],
    session_id: str | None,
    belongs: Callable[[str | None], bool],
) -> set[str]:
    """Ids of the records (of ``session_id``, of this journal's database) in the
    segments ``list_paths`` names. Read-only, without locks; a damaged or half-written
    line is skipped. When a file vanishes while it is read (adopted or emptied
    meanwhile), the directory is listed again, and the ids found are the union."""
    needle = None if session_id is None else session_needle(session_id)
    ids: set[str] = set()
    for _ in range(_SCAN_ATTEMPTS):
        vanished = False
        for path in list_paths():
            try:
                with open_for_reading(path) as handle:
                    for line in handle:
                        if needle is not None and needle not in line:
                            continue
                        try:
                            invocation, database = decode_bound(line)
                        except ValueError:
                            continue
                        if not belongs(database):
                            continue  # never moved here: not pending here either
                        if session_id is None or invocation.session_id == session_id:
                            ids.add(invocation.id.lower())
            except FileNotFoundError:
                vanished = True
            except OSError as error:
                logger.warning("cannot read audit journal %s: %s", path, error)
        if not vanished:
            break
    return ids
