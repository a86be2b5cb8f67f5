"""The recorder's local journal (the spool): JSON lines, durable, moved to SQL in order.

Every record is appended here before ``record`` returns, whether the database is up or
not: the journal is the write-ahead log of the audit store, and the spool of the records
an outage keeps back is the same file. Durability is ``fsync`` (each append is on disk
before it returns; appends that several threads make at once share one ``fsync``: group
commit) or ``process`` (written to the operating system, no ``fsync``: survives the
process being killed, not a power cut). Once the recorder has moved every entry into the
database the file is truncated (no ``fsync`` needed: an entry that reappears after a crash
is already stored and its replay is a no-op); while some are still pending it is rewritten
once enough moved entries have piled up.

Each line is ``<crc32 hex> <json>``; the checksum catches a line damaged on disk and a
line cut short by a crash mid-write. A line that fails to decode is copied to
``rejected.jsonl`` in the same directory (with the reason), counted and logged, and
skipped: never fatal.

One directory may serve several processes (workers of one host). Every ``Spool`` writes
its own file ``spool-<token>.jsonl`` and holds an exclusive ``flock`` on it for its
lifetime; a file nobody holds is an orphan of a process that died (or of a closed
recorder), and is adopted (its records moved into this spool, then the file removed) at
start-up and on flush. Files only become visible under the ``spool-*.jsonl`` name once
locked, and rewrites replace the file by an already-locked one; an adopter checks, once
it holds the lock, that the file it locked is still the one at that name (a rewrite may
have replaced it meanwhile), so a live spool is never adopted. The records of several
orphans are merged in ``started_at`` order (each file's own order kept), so a session's
records replay in the order of its lookups whichever process ran them. Without ``fcntl``
(not POSIX) orphans are not adopted automatically.

Other processes' spools are readable (``foreign_ids``), so that one process can tell
that records of a session are still pending in another.

A journal is bound to its database: every line names the database it is for (``db``: a
hash of the database URL without its password, ``database_key``). A spool adopts, and
counts as pending, only the lines of its own database; an orphan file holding a line of
another database is left where it is, untouched, reported (a warning, and
``stranded_count`` for the health check) for a process configured for that database to
move. Lines written before the binding (no ``db``) are adopted only when the spool is
told to (``adopt_unbound``; ``audit.adopt-unbound-journals``), else left and reported the
same way: nothing is ever moved into a database it was not written for.
"""

from __future__ import annotations

import heapq
import json
import logging
import os
import threading
import time
import uuid
import zlib
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from itertools import islice
from pathlib import Path
from typing import IO, Any

from lookup_knowledge.adapters.audit.codec import from_json, to_json
from lookup_knowledge.adapters.private_files import open_private_append, private_directory
from lookup_knowledge.application.ports import ToolInvocation
from lookup_knowledge.domain.errors import AuditError, ConfigurationError

try:
    import fcntl
except ImportError:  # pragma: no cover - non-POSIX
    fcntl = None  # type: ignore[assignment]

logger = logging.getLogger(__name__)

FORMAT_VERSION = 1
SPOOL_PREFIX = "spool-"
SPOOL_SUFFIX = ".jsonl"
REJECTED_NAME = "rejected.jsonl"
_SCAN_ATTEMPTS = 3
REWRITE_AFTER = 1024  # moved entries left in a file that still holds pending ones


class EntryState(StrEnum):
    PENDING = "pending"
    STORED = "stored"  # in the database (written now, or found there already)
    REJECTED = "rejected"  # set aside in rejected.jsonl


@dataclass(slots=True, eq=False)
class SpoolEntry:
    line: str
    invocation: ToolInvocation
    state: EntryState = EntryState.PENDING
    at: float = field(default_factory=time.monotonic)  # when it was journaled here

    @property
    def session_id(self) -> str:
        return self.invocation.session_id


class SpoolClosed(AuditError):
    """An append to a journal that was closed meanwhile (the recorder is shutting down)."""


def encode(
    invocation: ToolInvocation, *, cleaned: bool = False, database: str | None = None
) -> str:
    """One journal line; ``cleaned``: the record comes from ``clean_invocation``;
    ``database``: the key of the database it is for (``database_key``)."""
    document: dict[str, object] = {"v": FORMAT_VERSION}
    if database is not None:
        document["db"] = database
    document["invocation"] = to_json(invocation, cleaned=cleaned)
    body = json.dumps(document, ensure_ascii=True, separators=(",", ":"), allow_nan=False)
    return f"{zlib.crc32(body.encode('ascii')):08x} {body}\n"


def decode(line: str) -> ToolInvocation:
    """Raises ``ValueError`` with the reason when the line is not a sound record."""
    return decode_bound(line)[0]


def decode_bound(line: str) -> tuple[ToolInvocation, str | None]:
    """The record and the key of the database it is for (None: written before the
    binding); ``ValueError`` with the reason when the line is not a sound record."""
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
        invocation = from_json(data["invocation"])  # validates on construction
        database = data.get("db")
        if database is not None and not isinstance(database, str):
            raise ValueError(f"malformed database key {database!r}")
    except (KeyError, TypeError, ValueError, AuditError) as error:
        raise ValueError(f"undecodable record: {error}") from None
    return invocation, database


def _fsync_dir(path: Path) -> None:
    if os.name != "posix":  # pragma: no cover
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _session_needle(session_id: str) -> str:
    """How ``encode`` writes the session id: a cheap filter before decoding a line."""
    return '"session_id":' + json.dumps(session_id, ensure_ascii=True)


def _open_for_reading(path: Path) -> IO[str]:
    return open(path, encoding="ascii", errors="replace", newline="")


def _try_lock(handle: IO[Any]) -> bool:
    if fcntl is None:  # pragma: no cover
        return True
    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False
    return True


class Spool:
    """Thread-safe; every append durable (``fsync`` True: on disk, group-committed)."""

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        fsync: bool = True,
        database: str | None = None,
        adopt_unbound: bool = True,
    ) -> None:
        """``database``: the key of the database this journal is for (None: unbound, it
        takes every line, as before the binding); ``adopt_unbound``: whether lines
        written before the binding are this journal's too."""
        self.directory = Path(directory)
        self._fsync = fsync
        self.database = database
        self._adopt_unbound = adopt_unbound
        self._stranded: dict[str, int] = {}  # orphan file -> lines left for another db
        self._token = uuid.uuid4().hex
        self._entries: deque[SpoolEntry] = deque()
        self._handle: IO[str] | None = None
        self._dirty = False
        self._stale = 0  # entries gone from ``_entries`` but still in the file
        self._rejected = 0
        self._closed = False
        self._lock = threading.RLock()
        # Taken before ``_lock`` (never after it): whoever fsyncs the file, or replaces or
        # truncates it, holds it, so an fsync never meets a handle closed under it.
        self._sync_lock = threading.RLock()
        self._written = 0  # appends so far
        self._synced = 0  # appends known to be on disk
        try:
            private_directory(self.directory, key="audit.spool-dir")
        except ConfigurationError as error:
            raise AuditError(f"cannot use the audit spool directory: {error}") from error

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

    def pending_ids(self, session_id: str | None = None) -> list[str]:
        with self._lock:
            return [
                e.invocation.id
                for e in self._entries
                if session_id is None or e.session_id == session_id
            ]

    def foreign_ids(self, session_id: str | None = None) -> set[str]:
        """Ids of the records (of ``session_id``) in the directory's other spool files
        (all of them once this spool is closed).

        Those are live spools of other processes, and orphans not adopted yet. Read-only,
        without locks; a damaged or half-written line is skipped. When a file vanishes
        while it is read (adopted or emptied meanwhile; its records moved on or reached
        the database), the directory is read again, and the ids found are the union.
        """
        needle = None if session_id is None else _session_needle(session_id)
        ids: set[str] = set()
        for _ in range(_SCAN_ATTEMPTS):
            vanished = False
            for path in self._other_files():
                try:
                    with _open_for_reading(path) as handle:
                        for line in handle:
                            if needle is not None and needle not in line:
                                continue
                            try:
                                invocation, database = decode_bound(line)
                            except ValueError:
                                continue
                            if not self.belongs(database):
                                continue  # never moved here: not pending here either
                            if session_id is None or invocation.session_id == session_id:
                                ids.add(invocation.id.lower())
                except FileNotFoundError:
                    vanished = True
                except OSError as error:
                    logger.warning("cannot read audit spool %s: %s", path, error)
            if not vanished:
                break
        return ids

    def _other_files(self) -> list[Path]:
        """The directory's spool files but this spool's own (while it is open: once closed,
        the file it left is one more file that another spool may adopt)."""
        own = "" if self._closed else self.path.name
        try:
            return sorted(
                p for p in self.directory.glob(f"{SPOOL_PREFIX}*{SPOOL_SUFFIX}") if p.name != own
            )
        except OSError as error:
            logger.warning("cannot list the audit spool directory %s: %s", self.directory, error)
            return []

    def rejected_count(self) -> int:
        return self._rejected

    def belongs(self, database: str | None) -> bool:
        """Whether a line for ``database`` is this journal's to move."""
        if self.database is None:
            return True
        if database is None:
            return self._adopt_unbound
        return database == self.database

    def stranded_count(self) -> int:
        """Records in orphan journals of another database (or written before the
        binding, when those are not adopted), left in the directory untouched."""
        with self._lock:
            return sum(self._stranded.values())

    def head(self) -> SpoolEntry | None:
        with self._lock:
            return self._entries[0] if self._entries else None

    def head_batch(self, limit: int) -> list[SpoolEntry]:
        """Up to ``limit`` entries from the head, oldest first (still pending)."""
        with self._lock:
            return list(islice(self._entries, limit))

    # ------------------------------------------------------------------ writing

    def append(self, invocation: ToolInvocation, *, cleaned: bool = False) -> SpoolEntry:
        """Durably append one record; raises ``SpoolClosed`` when the spool is closed and
        ``AuditError`` when the disk refuses. ``cleaned``: the record comes from
        ``clean_invocation`` (the recorder's case), so its details are not cleaned again.

        The write happens under the lock; the ``fsync`` after it, outside: the first
        thread to get there syncs what every thread has written so far (group commit).
        """
        entry = SpoolEntry(encode(invocation, cleaned=cleaned, database=self.database), invocation)
        with self._lock:
            if self._closed:
                raise SpoolClosed(f"the audit spool {self.path} is closed")
            try:
                handle = self._handle or self._open_own()
                handle.write(entry.line)
                handle.flush()
            except OSError as error:
                raise AuditError(f"cannot write the audit spool {self.path}: {error}") from error
            self._entries.append(entry)
            self._written += 1
            ticket = self._written
        if self._fsync:
            self._sync(ticket)
        return entry

    def _sync(self, ticket: int) -> None:
        with self._sync_lock:
            if self._synced >= ticket:
                return  # another thread's fsync covered this append
            with self._lock:
                target, handle = self._written, self._handle
            if handle is None:  # pragma: no cover - only replaced under _sync_lock
                return
            try:
                os.fsync(handle.fileno())
            except OSError as error:
                raise AuditError(f"cannot sync the audit spool {self.path}: {error}") from error
            self._synced = max(self._synced, target)

    def _append_entries(self, entries: list[SpoolEntry]) -> None:
        """Durably append entries (one fsync for all of them); under ``_lock``."""
        if not entries:
            return
        with self._lock:
            if self._closed:
                raise SpoolClosed(f"the audit spool {self.path} is closed")
            try:
                handle = self._handle or self._open_own()
                handle.writelines(e.line for e in entries)
                handle.flush()
                if self._fsync:
                    os.fsync(handle.fileno())
            except OSError as error:
                raise AuditError(f"cannot write the audit spool {self.path}: {error}") from error
            self._entries.extend(entries)
            self._written += len(entries)
            self._synced = max(self._synced, self._written)

    def pop_head(self, entry: SpoolEntry) -> None:
        """Forget ``entry`` (now in the database); the file catches up on ``compact``."""
        self.pop_entries([entry])

    def pop_entries(self, entries: Iterable[SpoolEntry]) -> None:
        """Forget ``entries``, the head of the journal in order (now in the database)."""
        with self._lock:
            for entry in entries:
                if not self._entries or self._entries[0] is not entry:
                    break
                self._entries.popleft()
                if entry.state is EntryState.PENDING:
                    entry.state = EntryState.STORED
                self._stale += 1
                self._dirty = True

    def reject_head(self, entry: SpoolEntry, reason: str) -> None:
        with self._lock:
            self.reject(entry.line, reason, self.path.name)
            entry.state = EntryState.REJECTED
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
            with open_private_append(self.rejected_path, "utf-8") as out:
                out.write(json.dumps(record, ensure_ascii=True) + "\n")
                out.flush()
                if self._fsync:
                    os.fsync(out.fileno())
        except OSError:
            logger.exception(
                "cannot write %s; the rejected line is only in this log", self.rejected_path
            )
            logger.error("rejected audit spool line: %s", line.rstrip("\n"))

    def compact(self, *, force: bool = True) -> None:
        """Make the own file hold exactly the pending entries: truncated when none is
        left, else rewritten (atomic replace), unless ``force`` is False and fewer than
        ``REWRITE_AFTER`` moved entries are still in it."""
        with self._sync_lock, self._lock:
            if not self._dirty or self._closed:
                return
            if not self._entries:
                self._truncate_own()
                return
            if not force and self._stale < REWRITE_AFTER:
                return
            tmp = self.directory / f".tmp-{self._token}-{uuid.uuid4().hex}"
            try:
                handle = open_private_append(tmp, "ascii")  # kept open
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
            self._stale = 0
            self._synced = self._written  # every pending entry is in the synced new file

    def _truncate_own(self) -> None:
        """Empty the own file (every entry is in the database). No fsync: if the crash
        comes first, the entries reappear and their replay is a no-op."""
        if self._handle is not None:
            try:
                self._handle.flush()
                os.ftruncate(self._handle.fileno(), 0)
            except OSError:
                logger.exception("cannot truncate the audit spool %s", self.path)
                return
        self._dirty = False
        self._stale = 0
        self._synced = self._written

    def _open_own(self) -> IO[str]:
        tmp = self.directory / f".tmp-{self._token}-{uuid.uuid4().hex}"
        handle = open_private_append(tmp, "ascii")  # kept open for appends
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
        with self._lock:
            if self._closed:
                return 0
            return self._adopt(*self._other_files())

    def _adopt(self, *paths: Path) -> int:
        """Adopt those of ``paths`` that are orphans, merged in ``started_at`` order."""
        with self._lock:
            present = {p.name for p in paths}
            self._stranded = {n: c for n, c in self._stranded.items() if n in present}
            orphans: list[tuple[Path, IO[str], list[SpoolEntry]]] = []
            try:
                for path in paths:
                    handle = self._lock_orphan(path)
                    if handle is None:
                        continue
                    entries, bad, foreign = self._read_orphan(handle)
                    if foreign:
                        handle.close()
                        self._strand(path, foreign)
                        continue
                    self._stranded.pop(path.name, None)
                    for line, reason in bad:
                        self.reject(line, reason, path.name)
                    orphans.append((path, handle, entries))
                # Oldest first; each file keeps its own order, ties go to the older file.
                orphans.sort(
                    key=lambda o: (
                        o[2][0].invocation.started_at.timestamp() if o[2] else 0.0,
                        o[0].name,
                    )
                )
                merged = heapq.merge(
                    *(o[2] for o in orphans), key=lambda e: e.invocation.started_at
                )
                self._append_entries(list(merged))  # durable here before the orphans go
                for path, _, _ in orphans:
                    path.unlink(missing_ok=True)
                if orphans and self._fsync:
                    _fsync_dir(self.directory)
            finally:
                for _, handle, _ in orphans:
                    handle.close()
        for path, _, good in orphans:
            if good:
                logger.warning(
                    "adopted %d audit record(s) from orphaned spool %s", len(good), path.name
                )
        return sum(len(good) for _, _, good in orphans)

    @staticmethod
    def _lock_orphan(path: Path) -> IO[str] | None:
        """The file at ``path``, open and locked, if it is an orphan; else None."""
        try:
            handle = _open_for_reading(path)
        except FileNotFoundError:
            return None
        except OSError:
            logger.exception("cannot open audit spool %s", path)
            return None
        try:
            if not _try_lock(handle):
                handle.close()
                return None  # a live spool of another process
            locked = os.fstat(handle.fileno())
            try:
                current = os.stat(path)
            except FileNotFoundError:  # adopted and removed by someone else meanwhile
                handle.close()
                return None
            if (locked.st_dev, locked.st_ino) != (current.st_dev, current.st_ino):
                # The owner rewrote its spool after we opened it: what we locked is the
                # old, replaced file; the one at ``path`` now is live (or, if its owner
                # died since, an orphan for the next adoption).
                handle.close()
                return None
        except BaseException:
            handle.close()
            raise
        return handle

    def _read_orphan(self, handle: IO[str]) -> tuple[list[SpoolEntry], list[tuple[str, str]], int]:
        """The sound lines, the damaged ones (with the reason) and how many lines are
        not this journal's (another database's, or unbound ones it does not adopt).
        Lines are kept as they are (a recorder journals only cleaned records, and the
        checksum vouches for the line); an unbound line adopted is bound to this
        journal's database."""
        good: list[SpoolEntry] = []
        bad: list[tuple[str, str]] = []
        foreign = 0
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                invocation, database = decode_bound(line)
            except ValueError as reason:
                bad.append((line, f"line {number}: {reason}"))
                continue
            if not self.belongs(database):
                foreign += 1
            elif database is None and self.database is not None:
                line = encode(invocation, cleaned=True, database=self.database)
            good.append(SpoolEntry(line, invocation))
        return good, bad, foreign

    def _strand(self, path: Path, foreign: int) -> None:
        """Leave an orphan that holds another database's records; say so once."""
        if path.name not in self._stranded:
            logger.warning(
                "audit journal %s holds %d record(s) for another audit database (or "
                "written before journals named theirs); left in %s for a process "
                "configured for that database (audit.adopt-unbound-journals moves "
                "unnamed ones)",
                path.name,
                foreign,
                self.directory,
            )
        self._stranded[path.name] = foreign

    def close(self) -> None:
        """Release the file: removed when empty, left for adoption when not."""
        with self._sync_lock, self._lock:
            if self._closed:
                return
            self.compact()
            if not self._entries:
                self._drop_own()
            elif self._handle is not None:
                self._handle.close()
                self._handle = None
            self._closed = True
