"""``SqlToolInvocationRecorder``: every lookup leaves a durable record, or a spooled one.

Write path (one transaction per invocation):

1. PostgreSQL: ``pg_advisory_xact_lock`` on the session (writers of one session queue
   up); SQLite: ``BEGIN IMMEDIATE`` (the database write lock, taken before reading).
2. If the id is already there, stop: a retried write is a no-op.
3. ``seq`` = max(seq of the session) + 1, read through the (session_id, seq) index.
4. Insert the invocation and its evidence rows; commit.

A unique violation on (session_id, seq) (a writer that does not take the lock) is retried.
Any failure puts the record in the local spool (fsync'd) instead, and the call still
returns: ``RecordOutcome.SPOOLED``. Spooled records are replayed in order, before any new
write, on the next ``record`` and on ``flush``, and at start-up (including spools that a
dead process left behind in the same directory). While the spool is not empty, new
records queue behind it, so a session's ``seq`` follows the order of its lookups.
After a failure, the database is left alone for a backoff interval (doubling up to
``backoff_max_s``), so that a dead database costs a lookup one failed attempt, not one per
call; ``flush`` ignores the backoff. A background thread replays the spool once the backoff
allows, so records do not stay spooled in a process that has stopped recording.

``pending_count`` counts this process's spooled records and the records of the other spool
files in the directory (other processes' live spools, orphans not adopted yet) that the
database does not hold yet; ``flush`` waits for those too. A Verifier in another process
is therefore never told "unknown, conclusive" about a record that is only spooled.

After ``close`` a record is still kept: it goes to a spool file of its own, left for the
next recorder on the directory to adopt, and ``record`` returns ``SPOOLED``.
"""

from __future__ import annotations

import hashlib
import logging
import random
import threading
import time
import uuid
import weakref
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, exists, func, insert, select
from sqlalchemy.exc import IntegrityError, SQLAlchemyError

from lookup_knowledge.adapters.audit.backoff import Backoff
from lookup_knowledge.adapters.audit.codec import clean_invocation, without_shown_text
from lookup_knowledge.adapters.audit.engine import SQLITE_BEGIN_OPTION
from lookup_knowledge.adapters.audit.errors import is_permanent, is_seq_conflict
from lookup_knowledge.adapters.audit.models import invocation_evidence, tool_invocation
from lookup_knowledge.adapters.audit.spool import Spool, SpoolEntry
from lookup_knowledge.application.ports import (
    RecordOutcome,
    ToolInvocation,
    ToolInvocationRecorder,
)

T = tool_invocation
E = invocation_evidence

logger = logging.getLogger(__name__)

_COMPACT_EVERY = 256
_IDLE_WAKE_S = 60.0  # the background drainer's check for a recorder nobody closed
_ID_CHUNK = 500


def session_lock_key(session_id: str) -> int:
    """A stable signed 64-bit key for ``pg_advisory_xact_lock`` (the same in every process)."""
    digest = hashlib.blake2b(session_id.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def invocation_row(invocation: ToolInvocation, seq: int) -> dict[str, Any]:
    return {
        "id": uuid.UUID(invocation.id),
        "session_id": invocation.session_id,
        "seq": seq,
        "step_id": invocation.step_id,
        "tool_call_id": invocation.tool_call_id,
        "tool_name": invocation.tool_name,
        "query": invocation.query,
        "status": invocation.status,
        "error_code": invocation.error_code,
        "error_message": invocation.error_message,
        "quality_score": float(invocation.quality_score),
        "relevance_level": invocation.relevance_level,
        "retrieval_mode": invocation.retrieval_mode,
        "filter_applied": invocation.filter_applied,
        "fallback_reason": invocation.fallback_reason,
        "retrieve_k": invocation.retrieve_k,
        "return_n": invocation.return_n,
        "candidate_count": invocation.candidate_count,
        "returned_count": invocation.returned_count,
        "started_at": invocation.started_at,
        "duration_ms": float(invocation.duration_ms),
        "trace_id": invocation.trace_id,
        "span_id": invocation.span_id,
        "retrieval_details": dict(invocation.retrieval_details),
        "traffic": invocation.traffic,
        "principal_tenant": invocation.principal_tenant,
        "principal_user": invocation.principal_user,
        "principal_groups_hash": invocation.principal_groups_hash,
        "access_mode": invocation.access_mode,
        "access_filter": invocation.access_filter,
    }


def evidence_rows(invocation: ToolInvocation) -> list[dict[str, Any]]:
    invocation_id = uuid.UUID(invocation.id)
    return [
        {
            "invocation_id": invocation_id,
            "rank": e.rank,
            "session_id": invocation.session_id,
            "document_id": e.document_id,
            "doc_id": e.doc_id,
            "chunk_index": e.chunk_index,
            "source": e.source,
            "category": e.category,
            "score_before": float(e.score_before),
            "score_after": float(e.score_after),
            "projected": bool(e.projected),
            "in_context_pack": bool(e.in_context_pack),
            "content_hash": e.content_hash,
            "shown_text": e.shown_text,
        }
        for e in invocation.evidence
    ]


class SqlToolInvocationRecorder(ToolInvocationRecorder):
    """Thread-safe. ``engine`` from ``create_audit_engine``; ``spool_dir`` a local directory
    (created if missing) that survives restarts, e.g. next to the SQLite file or under
    the service's state directory."""

    def __init__(
        self,
        engine: Engine,
        spool_dir: str | Path,
        *,
        replay_on_start: bool = True,
        backoff_initial_s: float = 0.5,
        backoff_max_s: float = 30.0,
        max_seq_retries: int = 20,
        fsync: bool = True,
        monotonic: Callable[[], float] = time.monotonic,
        background_drain_s: float | None = 1.0,
        keep_shown_text: bool = True,
        prepare: Callable[[], object] | None = None,
    ) -> None:
        """``background_drain_s``: while records are spooled, the background drainer looks
        at least this often (in real seconds) whether the backoff is over; ``None``: no
        background drainer (records are replayed by ``record`` and ``flush`` only).
        ``keep_shown_text`` False: store (and spool) only the hash of each shown block.

        ``prepare``: what must succeed once before the first write (the schema migration
        a start-up could not run because the database was down); until it has, every
        write counts as failed, so records are spooled and replayed after it."""
        if background_drain_s is not None and not background_drain_s > 0:
            raise ValueError("background_drain_s must be > 0 or None")
        if max_seq_retries < 1:
            raise ValueError("max_seq_retries must be >= 1")
        self._engine = engine
        self._keep_shown_text = keep_shown_text
        self._prepare = prepare
        self._prepare_lock = threading.Lock()
        self._is_pg = engine.dialect.name == "postgresql"
        self._is_sqlite = engine.dialect.name == "sqlite"
        self._spool = Spool(spool_dir, fsync=fsync)
        self._lock = threading.RLock()  # spool + counters
        self._replay_lock = threading.Lock()  # one replayer at a time
        self._failures = 0
        self._max_seq_retries = max_seq_retries
        self._monotonic = monotonic
        self._backoff = Backoff(backoff_initial_s, backoff_max_s, monotonic=monotonic)
        self._closed = False
        self._fsync = fsync
        self._background_s = background_drain_s
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._drainer: threading.Thread | None = None
        if replay_on_start:
            self._spool.adopt_orphans()
            if len(self._spool):
                self._drain(respect_backoff=False, blocking=True)
        if background_drain_s is not None:
            self._drainer = threading.Thread(
                target=_drain_in_background,
                args=(weakref.ref(self), self._stop, self._wake),
                name=f"audit-spool-drainer-{self._spool.path.stem}",
                daemon=True,
            )
            self._drainer.start()

    # ------------------------------------------------------------------ port

    def record(self, invocation: ToolInvocation) -> RecordOutcome:
        clean = clean_invocation(invocation)
        if not self._keep_shown_text:
            clean = without_shown_text(clean)
        if self._closed:
            return self._keep(clean)
        if len(self._spool):
            self._drain(respect_backoff=True, blocking=False)
        with self._lock:
            if len(self._spool) or self._in_backoff():
                # Behind the queue: keeps the session's order.
                return self._keep(clean)
        try:
            self._write(clean)
        except Exception as error:  # noqa: BLE001 - any failure: the record must not be lost
            self._note_failure(error, clean.id, "write")
            return self._keep(clean)
        self._note_success()
        return RecordOutcome.COMMITTED

    def _keep(self, clean: ToolInvocation) -> RecordOutcome:
        """Spool ``clean`` durably; raises ``AuditError`` only if the disk refuses."""
        with self._lock:
            if not self._closed:
                self._spool.append(clean)
                self._wake.set()
                return RecordOutcome.SPOOLED
        # Closed (a lookup that was in flight): a spool file of its own, left unlocked
        # for the next recorder on this directory to adopt.
        late = Spool(self._spool.directory, fsync=self._fsync)
        try:
            late.append(clean)
        finally:
            late.close()
        logger.warning(
            "audit record arrived after the recorder was closed; kept in the spool %s",
            late.path.name,
            extra={"invocation_id": clean.id},
        )
        return RecordOutcome.SPOOLED

    def flush(self, session_id: str | None = None, timeout_s: float = 10.0) -> bool:
        """Replay this process's spool (adopting orphans first), then wait, up to
        ``timeout_s``, until no record (of the session) is pending anywhere in the spool
        directory, including live spools of other processes."""
        deadline = self._monotonic() + max(0.0, timeout_s)
        pause = 0.05
        while True:
            if self._closed:
                return self.pending_count(session_id) == 0
            self._spool.adopt_orphans()
            if self._spool.pending(session_id):
                self._drain(respect_backoff=False, blocking=True)
            if not self._spool.pending(session_id) and not self._foreign_pending(
                session_id, respect_backoff=False
            ):
                return True
            remaining = deadline - self._monotonic()
            if remaining <= 0:
                return False
            time.sleep(min(pause, remaining))
            pause = min(pause * 2, 1.0)

    def pending_count(self, session_id: str | None = None) -> int:
        """Records (of the session) spooled here, plus those in the directory's other
        spool files that the database does not hold (all of them if it cannot tell)."""
        if self._closed:  # what this spool held is on disk now, perhaps adopted since
            return self._foreign_pending(session_id)
        foreign = self._foreign_pending(session_id)
        return self._spool.pending(session_id) + foreign

    def _foreign_pending(self, session_id: str | None, *, respect_backoff: bool = True) -> int:
        foreign = self._spool.foreign_ids(session_id)
        if not foreign:
            return 0
        if not self._closed:
            # Read after the scan: a record adopted into this spool meanwhile is seen here.
            foreign.difference_update(self._spool.pending_ids(session_id))
        return len(foreign - self._committed_ids(foreign, respect_backoff=respect_backoff))

    def _committed_ids(self, ids: Collection[str], *, respect_backoff: bool = True) -> set[str]:
        """Which of ``ids`` the database holds; none when it cannot be asked (now)."""
        if not ids or (respect_backoff and self._in_backoff()):
            return set()
        found: set[str] = set()
        wanted = sorted(ids)
        try:
            with self._engine.connect() as conn:
                for start in range(0, len(wanted), _ID_CHUNK):
                    chunk = [uuid.UUID(i) for i in wanted[start : start + _ID_CHUNK]]
                    rows = conn.execute(select(T.c.id).where(T.c.id.in_(chunk))).scalars()
                    found.update(str(r).lower() for r in rows)
        except (SQLAlchemyError, ValueError) as error:
            logger.debug("cannot check spooled ids against the audit database: %s", error)
            return set()
        return found

    def failure_count(self) -> int:
        return self._failures

    def rejected_count(self) -> int:
        """Records (or spool lines) set aside in ``rejected.jsonl``: kept, never replayed."""
        return self._spool.rejected_count()

    def close(self) -> None:
        """Stop; spooled records stay on disk and are replayed by the next recorder.

        Waits for the background drainer (and a replay in progress) to finish. A record
        arriving later is still spooled (see ``record``)."""
        self._stop.set()
        self._wake.set()
        drainer = self._drainer
        if drainer is not None and drainer is not threading.current_thread():
            drainer.join()
        with self._replay_lock, self._lock:
            if self._closed:
                return
            self._closed = True
            self._spool.close()

    def background_step(self) -> float:
        """One round of the background drainer: replay if records are pending and the
        backoff is over. Returns how long to wait (real seconds) before the next round;
        a spooled record ends the wait early."""
        poll = self._background_s or _IDLE_WAKE_S
        if self._closed or not len(self._spool):
            return _IDLE_WAKE_S
        if self._in_backoff():
            return min(self._backoff.seconds_left(), poll)
        try:
            self._drain(respect_backoff=True, blocking=False)
        except Exception:  # a drainer that dies would leave records spooled until a flush
            logger.exception("background replay of the audit spool failed")
        return poll if len(self._spool) else _IDLE_WAKE_S

    # ------------------------------------------------------------------ replay

    def _drain(self, *, respect_backoff: bool, blocking: bool) -> None:
        for _ in range(3):  # a record spooled while the replayer was finishing
            if not self._replay_lock.acquire(blocking=blocking):
                return
            try:
                ok = self._drain_locked(respect_backoff)
            finally:
                self._replay_lock.release()
            if not ok or not len(self._spool):
                return

    def _drain_locked(self, respect_backoff: bool) -> bool:
        """Replay from the head until empty or a transient failure (False then)."""
        done = 0
        try:
            while True:
                with self._lock:
                    if self._closed or (respect_backoff and self._in_backoff()):
                        return False
                    entry = self._spool.head()
                if entry is None:
                    return True
                if not self._replay_one(entry):
                    return False
                done += 1
                if done % _COMPACT_EVERY == 0:
                    self._spool.compact()
        finally:
            self._spool.compact()

    def _replay_one(self, entry: SpoolEntry) -> bool:
        try:
            self._write(entry.invocation)
        except Exception as error:  # noqa: BLE001 - classified below, never lost
            if is_permanent(error):
                self._note_failure(error, entry.invocation.id, "replay (rejected)", backoff=False)
                self._spool.reject_head(entry, f"{type(error).__name__}: {error}")
                return True
            self._note_failure(error, entry.invocation.id, "replay")
            return False
        self._note_success()
        self._spool.pop_head(entry)
        return True

    # ------------------------------------------------------------------ database

    def _ensure_prepared(self) -> None:
        if self._prepare is None:
            return
        with self._prepare_lock:
            if self._prepare is not None:
                self._prepare()
                self._prepare = None

    def _write(self, invocation: ToolInvocation) -> bool:
        """Insert in one transaction; False when the id was already recorded."""
        self._ensure_prepared()
        invocation_id = uuid.UUID(invocation.id)
        for attempt in range(1, self._max_seq_retries + 1):
            try:
                return self._insert_once(invocation)
            except IntegrityError as error:
                if self._exists(invocation_id):
                    return False  # a concurrent retry of the same record won
                if not is_seq_conflict(error) or attempt == self._max_seq_retries:
                    raise
                time.sleep(random.uniform(0.0, 0.002 * attempt))
        raise AssertionError("unreachable")  # pragma: no cover

    def _insert_once(self, invocation: ToolInvocation) -> bool:
        options = {SQLITE_BEGIN_OPTION: "IMMEDIATE"} if self._is_sqlite else {}
        with self._engine.connect().execution_options(**options) as conn, conn.begin():
            if self._is_pg:
                conn.execute(
                    select(func.pg_advisory_xact_lock(session_lock_key(invocation.session_id)))
                )
            seq = self._next_seq(conn, invocation)
            if seq is None:
                return False
            conn.execute(insert(T), [invocation_row(invocation, seq)])
            rows = evidence_rows(invocation)
            if rows:
                conn.execute(insert(E), rows)
        return True

    def _next_seq(self, conn: Connection, invocation: ToolInvocation) -> int | None:
        """The session's next seq, or None when this invocation is already recorded.

        One round trip; runs after the session lock, so it sees every committed writer.
        """
        present = exists().where(T.c.id == uuid.UUID(invocation.id))
        next_seq = (
            select(func.coalesce(func.max(T.c.seq), 0) + 1)
            .where(T.c.session_id == invocation.session_id)
            .scalar_subquery()
        )
        row = conn.execute(select(present, next_seq)).one()
        return None if row[0] else int(row[1])

    def _exists(self, invocation_id: uuid.UUID) -> bool:
        try:
            with self._engine.connect() as conn:
                return bool(conn.execute(select(exists().where(T.c.id == invocation_id))).scalar())
        except SQLAlchemyError:
            return False

    # ------------------------------------------------------------------ health

    def _in_backoff(self) -> bool:
        return self._backoff.waiting()

    def _note_failure(
        self, error: BaseException, invocation_id: str, doing: str, *, backoff: bool = True
    ) -> None:
        with self._lock:
            self._failures += 1
            if backoff:
                self._backoff.failed()
            failures = self._failures
        logger.warning(
            "audit %s failed; record kept in the local spool",
            doing,
            extra={
                "invocation_id": invocation_id,
                "error": f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}",
                "audit_failures": failures,
                "audit_pending": len(self._spool),
            },
        )

    def _note_success(self) -> None:
        with self._lock:
            self._backoff.succeeded()


def _drain_in_background(
    ref: weakref.ref[SqlToolInvocationRecorder], stop: threading.Event, wake: threading.Event
) -> None:
    """The background drainer: holds the recorder weakly, so a recorder nobody closed
    can still be collected (its spool file is then released for adoption)."""
    while not stop.is_set():
        wake.clear()
        recorder = ref()
        if recorder is None:
            return
        delay = recorder.background_step()
        del recorder
        wake.wait(delay)
