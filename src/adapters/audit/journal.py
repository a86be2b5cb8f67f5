"""The recorder's local journal: JSON lines, durable, moved to SQL in order.

Every record is appended here before ``record`` returns, whether the database is up or
not: the journal is the write-ahead log of the audit store, and it holds the records an
outage keeps back. Durability is ``fsync`` (each append is on disk before it returns;
appends that several threads make at once share one ``fsync``: group commit) or
``process`` (written to the operating system, no ``fsync``: survives the process being
killed, not a power cut). Once every entry is in the database the file is truncated (no
``fsync`` needed: an entry that reappears after a crash is already stored and its replay
is a no-op); while some are still pending it is rewritten once enough moved entries have
piled up. Lines (``journal_format.py``) carry a checksum; a line that fails to decode is
copied to ``rejected.jsonl`` (with the reason), counted and logged, and skipped.

One directory may serve several processes: each journal writes its own segment
(``journal_segments.py``), locked for its lifetime; an orphan segment is adopted (its
records moved into this journal, then the file removed) at start-up and on flush. The
records of several orphans are merged in ``started_at`` order (each file's own order
kept), so a session's records replay in the order of its lookups. Other processes'
segments are readable (``foreign_ids``), so one process can tell that records of a
session are still pending in another.

A journal is bound to its database (``database``: ``database_key``). It adopts, and
counts as pending, only the lines of its own database; an orphan holding a line of
another database is left untouched and reported (a warning, ``stranded_count``). Lines
written before the binding are adopted only with ``adopt_unbound``
(``audit.adopt-unbound-journals``): nothing is moved into a database it was not written
for.
"""

from __future__ import annotations

import heapq
import json
import logging
import os
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from itertools import islice
from pathlib import Path
from typing import IO

from lookup_knowledge.adapters.audit.journal_format import (
    EntryState,
    JournalClosed,
    JournalEntry,
    decode_bound,
    encode,
)
from lookup_knowledge.adapters.audit.journal_segments import (
    CAN_LOCK,
    REJECTED_NAME,
    lock_orphan,
    open_for_reading,
    scan_ids,
    segment_name,
    segments,
    try_lock,
)
from lookup_knowledge.adapters.durable_files import FSYNCED, DurableFiles
from lookup_knowledge.adapters.private_files import open_private_append, private_directory
from lookup_knowledge.application.ports import ToolInvocation
from lookup_knowledge.domain.errors import AuditError, ConfigurationError

logger = logging.getLogger(__name__)

REWRITE_AFTER = 1024  # moved entries left in a file that still holds pending ones


class Journal:
    """Thread-safe; every append durable (``fsync`` True: on disk, group-committed)."""

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        files: DurableFiles = FSYNCED,
        database: str | None = None,
        adopt_unbound: bool = True,
        clock: Callable[[], float] = time.monotonic,
        open_segment: Callable[[Path], IO[str]] = open_for_reading,
    ) -> None:
        """``database``: the key of the database this journal is for (None: unbound, it
        takes every line, as before the binding); ``adopt_unbound``: whether lines
        written before the binding are this journal's too. ``files``: how appends,
        rewrites and removals are made durable (``DurableFiles(enabled=False)``:
        ``audit.durability=process``); ``clock``: when an entry was journaled;
        ``open_segment``: how another segment is opened to be adopted (a test's hook)."""
        self.directory = Path(directory)
        self.files = files
        self.clock = clock
        self._open_segment = open_segment
        self.database = database
        self._adopt_unbound = adopt_unbound
        self._stranded: dict[str, int] = {}  # orphan file -> lines left for another db
        self._token = uuid.uuid4().hex
        self._entries: deque[JournalEntry] = deque()
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
            private_directory(self.directory, key="audit.journal-dir")
        except ConfigurationError as error:
            raise AuditError(f"cannot use the audit journal directory: {error}") from error

    # ------------------------------------------------------------------ state

    @property
    def path(self) -> Path:
        return self.directory / segment_name(self._token)

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
        """Ids of the records (of ``session_id``) in the directory's other segments (all
        of them once this journal is closed): live journals of other processes, and
        orphans not adopted yet."""
        return scan_ids(self._other_files, session_id, self.belongs)

    def _other_files(self) -> list[Path]:
        """The directory's segments but this journal's own (while it is open: once
        closed, the file it left is one more that another journal may adopt)."""
        return segments(self.directory, but="" if self._closed else self.path.name)

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

    def head(self) -> JournalEntry | None:
        with self._lock:
            return self._entries[0] if self._entries else None

    def head_batch(self, limit: int) -> list[JournalEntry]:
        """Up to ``limit`` entries from the head, oldest first (still pending)."""
        with self._lock:
            return list(islice(self._entries, limit))

    # ------------------------------------------------------------------ writing

    def append(self, invocation: ToolInvocation, *, cleaned: bool = False) -> JournalEntry:
        """Durably append one record; raises ``JournalClosed`` when the journal is closed and
        ``AuditError`` when the disk refuses. ``cleaned``: the record comes from
        ``clean_invocation`` (the recorder's case), so its details are not cleaned again.

        The write happens under the lock; the ``fsync`` after it, outside: the first
        thread to get there syncs what every thread has written so far (group commit).
        """
        line = encode(invocation, cleaned=cleaned, database=self.database)
        entry = JournalEntry(line, invocation, at=self.clock())
        with self._lock:
            if self._closed:
                raise JournalClosed(f"the audit journal {self.path} is closed")
            try:
                handle = self._handle or self._open_own()
                handle.write(entry.line)
                handle.flush()
            except OSError as error:
                raise AuditError(f"cannot write the audit journal {self.path}: {error}") from error
            self._entries.append(entry)
            self._written += 1
            ticket = self._written
        if self.files.enabled:
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
                self.files.sync(handle)
            except OSError as error:
                raise AuditError(f"cannot sync the audit journal {self.path}: {error}") from error
            self._synced = max(self._synced, target)

    def _append_entries(self, entries: list[JournalEntry]) -> None:
        """Durably append entries (one fsync for all of them); under ``_lock``."""
        if not entries:
            return
        with self._lock:
            if self._closed:
                raise JournalClosed(f"the audit journal {self.path} is closed")
            try:
                handle = self._handle or self._open_own()
                handle.writelines(e.line for e in entries)
                handle.flush()
                self.files.sync(handle)
            except OSError as error:
                raise AuditError(f"cannot write the audit journal {self.path}: {error}") from error
            self._entries.extend(entries)
            self._written += len(entries)
            self._synced = max(self._synced, self._written)

    def pop_head(self, entry: JournalEntry) -> None:
        """Forget ``entry`` (now in the database); the file catches up on ``compact``."""
        self.pop_entries([entry])

    def pop_entries(self, entries: Iterable[JournalEntry]) -> None:
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

    def reject_head(self, entry: JournalEntry, reason: str) -> None:
        with self._lock:
            self.reject(entry.line, reason, self.path.name)
            entry.state = EntryState.REJECTED
            self.pop_head(entry)

    def reject(self, line: str, reason: str, source: str) -> None:
        """Keep a line that cannot be replayed in ``rejected.jsonl``; count and log it."""
        self._rejected += 1
        logger.error(
            "audit journal record rejected",
            extra={
                "journal_source": source,
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
                self.files.sync(out)
        except OSError:
            logger.exception(
                "cannot write %s; the rejected line is only in this log", self.rejected_path
            )
            logger.error("rejected audit journal line: %s", line.rstrip("\n"))

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
                    try_lock(handle)
                    handle.writelines(e.line for e in self._entries)
                    handle.flush()
                    self.files.sync(handle)
                    self.files.replace(tmp, self.path)
                except BaseException:
                    handle.close()
                    raise
            except OSError:
                # The old file still holds every pending entry (and some already
                # written ones, which replay skips): nothing is lost by giving up here.
                logger.exception("cannot compact the audit journal %s", self.path)
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
                logger.exception("cannot truncate the audit journal %s", self.path)
                return
        self._dirty = False
        self._stale = 0
        self._synced = self._written

    def _open_own(self) -> IO[str]:
        tmp = self.directory / f".tmp-{self._token}-{uuid.uuid4().hex}"
        handle = open_private_append(tmp, "ascii")  # kept open for appends
        try:
            try_lock(handle)
            self.files.replace(tmp, self.path)
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
                self.files.sync_dir(self.directory)
            except OSError:
                logger.exception("cannot remove the empty audit journal %s", self.path)
            self._handle.close()
            self._handle = None

    # ------------------------------------------------------------------ orphans

    def adopt_orphans(self) -> int:
        """Move the records of segments no live process holds into this journal.

        Returns how many records were adopted. Bad lines are rejected (kept, counted).
        """
        if not CAN_LOCK:  # pragma: no cover
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
            orphans: list[tuple[Path, IO[str], list[JournalEntry]]] = []
            try:
                for path in paths:
                    handle = lock_orphan(path, self._open_segment)
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
                if orphans:
                    self.files.sync_dir(self.directory)
            finally:
                for _, handle, _ in orphans:
                    handle.close()
        for path, _, good in orphans:
            if good:
                logger.warning(
                    "adopted %d audit record(s) from orphaned journal %s", len(good), path.name
                )
        return sum(len(good) for _, _, good in orphans)

    def _read_orphan(
        self, handle: IO[str]
    ) -> tuple[list[JournalEntry], list[tuple[str, str]], int]:
        """The sound lines, the damaged ones (with the reason) and how many lines are
        not this journal's (another database's, or unbound ones it does not adopt).
        Lines are kept as they are (a recorder journals only cleaned records, and the
        checksum vouches for the line); an unbound line adopted is bound to this
        journal's database."""
        good: list[JournalEntry] = []
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
            good.append(JournalEntry(line, invocation, at=self.clock()))
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
