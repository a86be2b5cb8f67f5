"""The recorder's local durable spool: JSON lines, fsync'd, replayed in order.

Each line is ``<crc32 hex> <json>``; the checksum catches a line damaged on disk and a
line cut short by a crash mid-write. A line that fails to decode is copied to
``rejected.jsonl`` in the same directory (with the reason), counted and logged, and
skipped: never fatal.

One directory may serve several processes (workers of one host). Every ``Spool`` writes
its own file ``spool-<token>.jsonl`` and holds an exclusive ``flock`` on it for its
lifetime; a file nobody holds is an orphan of a process that died, and is adopted
(its records moved into this spool, then the file removed) at start-up and on flush.
Files only become visible under the ``spool-*.jsonl`` name once locked, and rewrites
replace the file by an already-locked one, so a live spool is never adopted. Without
``fcntl`` (not POSIX) orphans are not adopted automatically.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import uuid
import zlib
from collections import deque
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from lookup_knowledge.adapters.audit.codec import from_json, to_json
from lookup_knowledge.application.audit import validate_invocation
from lookup_knowledge.application.ports import ToolInvocation
from lookup_knowledge.domain.errors import AuditError

try:
    import fcntl
except ImportError:  # pragma: no cover - non-POSIX
    fcntl = None  # type: ignore[assignment]

logger = logging.getLogger(__name__)

FORMAT_VERSION = 1
SPOOL_PREFIX = "spool-"
SPOOL_SUFFIX = ".jsonl"
REJECTED_NAME = "rejected.jsonl"


@dataclass(frozen=True, slots=True)
class SpoolEntry:
    line: str
    invocation: ToolInvocation

    @property
    def session_id(self) -> str:
        return self.invocation.session_id


def encode(invocation: ToolInvocation) -> str:
    body = json.dumps(
        {"v": FORMAT_VERSION, "invocation": to_json(invocation)},
        ensure_ascii=True,
        separators=(",", ":"),
        allow_nan=False,
    )
    return f"{zlib.crc32(body.encode('ascii')):08x} {body}\n"


def decode(line: str) -> ToolInvocation:
    """Raises ``ValueError`` with the reason when the line is not a sound record."""
    text = line.rstrip("\n")
    if not line.endswith("\n"):
        raise ValueError("truncated line (no line end)")
    crc, sep, body = text.partition(" ")
    if not sep or len(crc) != 8:
        raise ValueError("no checksum")
    try:
        expected = int(crc, 16)
        raw = body.encode("ascii")
    except (ValueError, UnicodeEncodeError):
        raise ValueError("malformed checksum or non-ASCII body") from None
    if zlib.crc32(raw) != expected:
        raise ValueError("checksum mismatch")
    try:
        data = json.loads(body)
        if not isinstance(data, dict) or data.get("v") != FORMAT_VERSION:
            raise ValueError(
                f"unknown spool format {data.get('v') if isinstance(data, dict) else data!r}"
            )
        invocation = from_json(data["invocation"])
        validate_invocation(invocation)
    except (KeyError, TypeError, ValueError, AuditError) as error:
        raise ValueError(f"undecodable record: {error}") from None
    return invocation


def _fsync_dir(path: Path) -> None:
    if os.name != "posix":  # pragma: no cover
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _try_lock(handle: IO[Any]) -> bool:
    if fcntl is None:  # pragma: no cover
        return True
    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False
    return True


class Spool:
    """Thread-compatible (the recorder serialises access); durable on every append."""

    def __init__(self, directory: str | os.PathLike[str], *, fsync: bool = True) -> None:
        self.directory = Path(directory)
        self._fsync = fsync
        self._token = uuid.uuid4().hex
        self._entries: deque[SpoolEntry] = deque()
        self._handle: IO[str] | None = None
        self._dirty = False
        self._rejected = 0
        self._lock = threading.RLock()
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise AuditError(
                f"cannot create audit spool directory {self.directory}: {error}"
            ) from error
        if not self.directory.is_dir():
            raise AuditError(f"audit spool path is not a directory: {self.directory}")

    # ------------------------------------------------------------------ state

    @property
    def path(self) -> Path:
        return self.directory / f"{SPOOL_PREFIX}{self._token}{SPOOL_SUFFIX}"

    @property
    def rejected_path(self) -> Path:
        return self.directory / REJECTED_NAME

    def __len__(self) -> int:
        return len(self._entries)

    def pending(self, session_id: str | None = None) -> int:
        with self._lock:
            if session_id is None:
                return len(self._entries)
            return sum(1 for e in self._entries if e.session_id == session_id)

    def rejected_count(self) -> int:
        return self._rejected

    def head(self) -> SpoolEntry | None:
        with self._lock:
            return self._entries[0] if self._entries else None

    # ------------------------------------------------------------------ writing

    def append(self, invocation: ToolInvocation) -> None:
        """Durably append one record; raises ``AuditError`` when the disk refuses."""
        line = encode(invocation)
        with self._lock:
            try:
                handle = self._handle or self._open_own()
                handle.write(line)
                handle.flush()
                if self._fsync:
                    os.fsync(handle.fileno())
            except OSError as error:
                raise AuditError(f"cannot write the audit spool {self.path}: {error}") from error
            self._entries.append(SpoolEntry(line, invocation))

    def pop_head(self, entry: SpoolEntry) -> None:
        """Forget ``entry`` (now in the database); the file catches up on ``compact``."""
        with self._lock:
            if self._entries and self._entries[0] is entry:
                self._entries.popleft()
                self._dirty = True

    def reject_head(self, entry: SpoolEntry, reason: str) -> None:
        with self._lock:
            self.reject(entry.line, reason, self.path.name)
            self.pop_head(entry)

    def reject(self, line: str, reason: str, source: str) -> None:
        """Keep a line that cannot be replayed in ``rejected.jsonl``; count and log it."""
        self._rejected += 1
        logger.error(
            "audit spool record rejected",
            extra={
                "spool_source": source,
                "reason": reason,
                "rejected_file": str(self.rejected_path),
            },
        )
        record = {
            "rejected_at": datetime.now(UTC).isoformat(),
            "source": source,
            "reason": reason,
            "line": line,
        }
        try:
            with open(self.rejected_path, "a", encoding="utf-8") as out:
                out.write(json.dumps(record, ensure_ascii=True) + "\n")
                out.flush()
                if self._fsync:
                    os.fsync(out.fileno())
        except OSError:
            logger.exception(
                "cannot write %s; the rejected line is only in this log", self.rejected_path
            )
            logger.error("rejected audit spool line: %s", line.rstrip("\n"))

    def reject_record(self, invocation: ToolInvocation, reason: str) -> None:
        """Keep a record that failed validation (it is never replayed)."""
        try:
            line = encode(invocation)
        except (TypeError, ValueError, AttributeError):
            line = repr(invocation) + "\n"
        self.reject(line, reason, "record")

    def compact(self) -> None:
        """Rewrite the own file to hold exactly the pending entries (atomic replace)."""
        with self._lock:
            if not self._dirty:
                return
            if not self._entries:
                self._drop_own()
                self._dirty = False
                return
            tmp = self.directory / f".tmp-{self._token}-{uuid.uuid4().hex}"
            try:
                handle = open(tmp, "a", encoding="ascii")  # noqa: SIM115 - kept open
                try:
                    _try_lock(handle)
                    handle.writelines(e.line for e in self._entries)
                    handle.flush()
                    if self._fsync:
                        os.fsync(handle.fileno())
                    os.replace(tmp, self.path)
                    if self._fsync:
                        _fsync_dir(self.directory)
                except BaseException:
                    handle.close()
                    raise
            except OSError:
                # The old file still holds every pending entry (and some already
                # written ones, which replay skips): nothing is lost by giving up here.
                logger.exception("cannot compact the audit spool %s", self.path)
                tmp.unlink(missing_ok=True)
                return
            old, self._handle = self._handle, handle
            if old is not None:
                old.close()
            self._dirty = False

    def _open_own(self) -> IO[str]:
        tmp = self.directory / f".tmp-{self._token}-{uuid.uuid4().hex}"
        handle = open(tmp, "a", encoding="ascii")  # noqa: SIM115 - kept open for appends
        try:
            _try_lock(handle)
            os.replace(tmp, self.path)
            if self._fsync:
                _fsync_dir(self.directory)
        except BaseException:
            handle.close()
            tmp.unlink(missing_ok=True)
            raise
        self._handle = handle
        return handle

    def _drop_own(self) -> None:
        if self._handle is not None:
            try:
                self.path.unlink(missing_ok=True)
                if self._fsync:
                    _fsync_dir(self.directory)
            except OSError:
                logger.exception("cannot remove the empty audit spool %s", self.path)
            self._handle.close()
            self._handle = None

    # ------------------------------------------------------------------ orphans

    def adopt_orphans(self) -> int:
        """Move the records of spool files no live process holds into this spool.

        Returns how many records were adopted. Bad lines are rejected (kept, counted).
        """
        if fcntl is None:  # pragma: no cover
            return 0
        adopted = 0
        with self._lock:
            own = self.path.name
            candidates = sorted(
                p for p in self.directory.glob(f"{SPOOL_PREFIX}*{SPOOL_SUFFIX}") if p.name != own
            )
            for path in candidates:
                adopted += self._adopt(path)
        return adopted

    def _adopt(self, path: Path) -> int:
        try:
            handle = open(path, encoding="ascii", errors="replace", newline="")  # noqa: SIM115
        except FileNotFoundError:
            return 0
        except OSError:
            logger.exception("cannot open audit spool %s", path)
            return 0
        with handle:
            if not _try_lock(handle):
                return 0  # a live spool of another process
            if not path.exists():  # adopted and removed by someone else meanwhile
                return 0
            good: list[ToolInvocation] = []
            for number, line in enumerate(handle, 1):
                if not line.strip():
                    continue
                try:
                    good.append(decode(line))
                except ValueError as reason:
                    self.reject(line, f"line {number}: {reason}", path.name)
            for invocation in good:
                self.append(invocation)  # durable here before the orphan goes
            path.unlink()
            if self._fsync:
                _fsync_dir(self.directory)
        if good:
            logger.warning(
                "adopted %d audit record(s) from orphaned spool %s", len(good), path.name
            )
        return len(good)

    def close(self) -> None:
        """Release the file: removed when empty, left for adoption when not."""
        with self._lock:
            self.compact()
            if not self._entries:
                self._drop_own()
            elif self._handle is not None:
                self._handle.close()
                self._handle = None
