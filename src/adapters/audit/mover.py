"""``JournalMover``: moves the journal into the SQL store, and owns what that takes.

It owns the background writer (a thread), the backoff after a failure and the deferred
schema migration; the SQL itself is ``SqlBatchWriter``'s, the file the ``Journal``'s.

Entries move in batches from the head, oldest first. A transient failure leaves them in
the journal, to be moved in order once the database is back; after it the database is
left alone for a backoff interval (doubling up to its maximum), so that a dead database
costs one failed attempt, not one per call (``flush`` ignores the backoff). A batch the
database refuses for good is split, and the one record it refuses is set aside in
``rejected.jsonl``.

``prepare`` is what must succeed once before the first write (the schema migration a
start-up could not run because the database was down); until it has, every write counts
as failed, so records stay in the journal and are moved after it.

The background writer holds the mover weakly, so a recorder nobody closed can still be
collected (its journal file is then released for adoption); it wakes on a new record,
and at least every ``background_s`` while entries wait out a backoff. With ``linger_s``
it lets the oldest entry wait that long for others to share its transaction.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Callable, Collection

from sqlalchemy.exc import OperationalError, SQLAlchemyError

from lookup_knowledge.adapters.audit.backoff import Backoff
from lookup_knowledge.adapters.audit.errors import is_permanent
from lookup_knowledge.adapters.audit.journal import Journal
from lookup_knowledge.adapters.audit.journal_format import JournalEntry
from lookup_knowledge.adapters.audit.sql_writer import SqlBatchWriter
from lookup_knowledge.application.ports import ToolInvocation
from lookup_knowledge.domain.errors import AuditNotRecorded

logger = logging.getLogger(__name__)

_COMMIT_ATTEMPTS = 3  # audit.durability=database: waits for SQLite's write lock
IDLE_WAKE_S = 60.0  # the background writer's check for a mover nobody closed


class JournalMover:
    """Thread-safe. ``background_s`` None: no background writer (entries are moved by
    ``drain`` only)."""

    def __init__(
        self,
        journal: Journal,
        writer: SqlBatchWriter,
        backoff: Backoff,
        *,
        batch_size: int,
        linger_s: float = 0.0,
        background_s: float | None = 1.0,
        prepare: Callable[[], object] | None = None,
    ) -> None:
        if background_s is not None and not background_s > 0:
            raise ValueError("background_drain_s must be > 0 or None")
        if batch_size < 1:
            raise ValueError("batch_size must be >= 1")
        if not linger_s >= 0:
            raise ValueError("linger_s must be >= 0")
        self.journal = journal
        self._writer = writer
        self._backoff = backoff
        self._batch_size = batch_size
        self._linger_s = linger_s
        self._background_s = background_s
        self._prepare = prepare
        self._prepare_lock = threading.Lock()
        self._lock = threading.RLock()  # closing + counters
        self._move_lock = threading.Lock()  # one mover at a time
        self._lingering = False  # the writer waits for a fuller batch: no need to wake it
        self._failures = 0
        self.closed = False
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ state

    @property
    def failures(self) -> int:
        return self._failures

    def count_failure(self) -> None:
        with self._lock:
            self._failures += 1

    def in_backoff(self) -> bool:
        return self._backoff.waiting()

    @property
    def down(self) -> bool:
        """Whether the last attempt failed."""
        with self._lock:
            return self._backoff.down

    @property
    def unprepared(self) -> bool:
        """Whether the deferred migration has still to succeed."""
        return self._prepare is not None

    # ------------------------------------------------------------------ the thread

    def start(self) -> None:
        if self._background_s is None:
            return
        self._thread = threading.Thread(
            target=_move_in_background,
            args=(weakref.ref(self), self._stop, self._wake),
            name=f"audit-journal-writer-{self.journal.path.stem}",
            daemon=True,
        )
        self._thread.start()

    def wake(self, *, appended: bool = False) -> None:
        """A new record (``appended``) or a retry is due: end the writer's wait (a
        lingering writer waits for a full batch, no more)."""
        if not appended or not self._lingering or len(self.journal) >= self._batch_size:
            self._wake.set()

    def background_step(self) -> float:
        """One round of the background writer: move what is pending unless in backoff.
        Returns how long to wait (real seconds) before the next round; a new record ends
        the wait early."""
        poll = self._background_s or IDLE_WAKE_S
        self._lingering = False
        if self.closed or not len(self.journal):
            return IDLE_WAKE_S
        if self.in_backoff():
            return min(self._backoff.seconds_left(), poll)
        head = self.journal.head()
        if self._linger_s and head is not None and len(self.journal) < self._batch_size:
            wait = head.at + self._linger_s - self.journal.clock()
            if wait > 0:
                self._lingering = True
                return wait
        try:
            self.drain(respect_backoff=True, blocking=False)
        except Exception:  # a writer that dies would leave records pending until a flush
            logger.exception("background move of the audit journal failed")
        return poll if len(self.journal) else IDLE_WAKE_S

    def close(self) -> None:
        """Stop the background writer, make one attempt (unless in backoff) to move what
        is pending, and release the journal: what is left stays on disk."""
        self._stop.set()
        self._wake.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join()
        with self._move_lock:
            if self.closed:
                return
            if len(self.journal) and not self.in_backoff():
                try:
                    self._drain_locked(respect_backoff=True)
                except Exception:
                    logger.exception("moving the audit journal on close failed")
            with self._lock:
                self.closed = True
                self.journal.close()

    # ------------------------------------------------------------------ moving

    def drain(self, *, respect_backoff: bool, blocking: bool) -> None:
        for _ in range(3):  # a record appended while the mover was finishing
            if not self._move_lock.acquire(blocking=blocking):
                return
            try:
                ok = self._drain_locked(respect_backoff)
            finally:
                self._move_lock.release()
            if not ok or not len(self.journal):
                return

    def _drain_locked(self, respect_backoff: bool) -> bool:
        """Move batches from the head until empty or a transient failure (False then)."""
        try:
            while True:
                with self._lock:
                    if self.closed or (respect_backoff and self.in_backoff()):
                        return False
                batch = self.journal.head_batch(self._batch_size)
                if not batch:
                    return True
                if not self._move(batch):
                    return False
        finally:
            self.journal.compact(force=False)

    def _move(self, batch: list[JournalEntry]) -> bool:
        """Store ``batch`` (the journal's head) in one transaction; False on a transient
        failure. A batch refused for good is moved one entry at a time, so that only the
        entry the database refuses is set aside."""
        try:
            self._write([e.invocation for e in batch])
        except Exception as error:  # noqa: BLE001 - classified below, never lost
            if not is_permanent(error):
                self._note_failure(error, batch[0].invocation.id, "write")
                return False
            if len(batch) > 1:
                return all(self._move([entry]) for entry in batch)
            [entry] = batch
            self._note_failure(error, entry.invocation.id, "write (rejected)", backoff=False)
            self.journal.reject_head(entry, f"{type(error).__name__}: {error}")
            return True
        self._note_success()
        self.journal.pop_entries(batch)
        return True

    def commit(self, clean: ToolInvocation) -> None:
        """``audit.durability=database``: ``clean`` committed in the database now, or
        ``AuditNotRecorded`` (nothing kept)."""
        if self.in_backoff():
            self.count_failure()
            raise AuditNotRecorded(
                "the audit database failed a moment ago and is left alone for "
                f"{self._backoff.seconds_left():.1f} s; the lookup is not answered "
                "(audit.durability=database)"
            )
        try:
            for attempt in range(1, _COMMIT_ATTEMPTS + 1):
                try:
                    self._write([clean])
                    break
                except OperationalError as error:
                    # SQLite's lock outlasted the busy timeout (a large batch of another
                    # writer): worth another wait; anything else fails at once.
                    if not self._writer.is_sqlite or attempt == _COMMIT_ATTEMPTS:
                        raise
                    logger.debug("audit commit waited out the SQLite lock: %s", error)
        except Exception as error:  # any failure: the lookup is not answered
            self._note_failure(error, clean.id, "commit", backoff=not is_permanent(error))
            reason = str(error).strip().splitlines()[0] if str(error).strip() else ""
            raise AuditNotRecorded(
                f"the audit record could not be committed ({type(error).__name__}: "
                f"{reason[:200]}); the lookup is not answered (audit.durability=database)"
            ) from error
        self._note_success()

    def _write(self, invocations: list[ToolInvocation]) -> None:
        if self._prepare is not None:
            with self._prepare_lock:
                if self._prepare is not None:
                    self._prepare()
                    self._prepare = None
        self._writer.write(invocations)

    def committed_ids(self, ids: Collection[str], *, respect_backoff: bool = True) -> set[str]:
        """Which of ``ids`` the database holds; none when it cannot be asked (now)."""
        if not ids or (respect_backoff and self.in_backoff()):
            return set()
        try:
            return self._writer.stored_ids(ids)
        except (SQLAlchemyError, ValueError) as error:
            logger.debug("cannot check journal ids against the audit database: %s", error)
            return set()

    # ------------------------------------------------------------------ health

    def _note_failure(
        self, error: BaseException, invocation_id: str, doing: str, *, backoff: bool = True
    ) -> None:
        with self._lock:
            self._failures += 1
            if backoff:
                self._backoff.failed()
            failures = self._failures
        first = str(error).splitlines()[0] if str(error) else ""
        logger.warning(
            "audit %s failed; record kept in the local journal",
            doing,
            extra={
                "invocation_id": invocation_id,
                "error": f"{type(error).__name__}: {first}",
                "audit_failures": failures,
                "audit_pending": len(self.journal),
            },
        )

    def _note_success(self) -> None:
        with self._lock:
            self._backoff.succeeded()


def _move_in_background(
    ref: weakref.ref[JournalMover], stop: threading.Event, wake: threading.Event
) -> None:
    """The background writer's loop; holds the mover weakly (see the module)."""
    while not stop.is_set():
        wake.clear()
        mover = ref()
        if mover is None:
            return
        delay = mover.background_step()
        del mover
        wake.wait(delay)
