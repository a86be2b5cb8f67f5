"""``SqlToolInvocationRecorder``: every lookup leaves a durable record before it returns.

The record goes to the local journal first (``spool.py``: fsync'd, group-committed when
several threads append at once), and ``record`` returns once it is durable there. Moving
journal entries into the SQL store happens in batches, oldest first, in one transaction
per batch:

1. PostgreSQL: ``pg_advisory_xact_lock`` on each session of the batch, in key order
   (writers of one session queue up, whatever process they run in); SQLite:
   ``BEGIN IMMEDIATE`` (the database write lock, taken before reading).
2. The ids already stored are skipped: a replayed entry is a no-op.
3. Each session's next ``seq`` = max(seq of the session) + 1, read through the
   (session_id, seq) index, then assigned in journal order.
4. One multi-row INSERT of the invocations and one of their evidence rows; commit.

With ``write_behind`` (what the container builds) a background writer does the moving,
so the lookup pays only the journal append; without it, ``record`` moves the journal
itself before it returns (``COMMITTED`` when its record is stored). ``flush`` is the
barrier readers use: it moves everything pending (ignoring the backoff) and waits until
no record (of a session) is pending anywhere in the journal directory, so a verify right
after a lookup sees it.

A unique violation on (session_id, seq) (a writer that does not take the lock) is
retried. A transient failure leaves the entries in the journal: they are moved, in order,
once the database is back (``RecordOutcome.SPOOLED`` tells a caller that its record waits
for that). After a failure the database is left alone for a backoff interval (doubling up
to ``backoff_max_s``), so that a dead database costs one failed attempt, not one per call;
``flush`` ignores the backoff. A batch the database refuses for good is split, and the one
record it refuses is set aside in ``rejected.jsonl``. At start-up the journals that dead
processes left in the directory are adopted and replayed (idempotent by invocation id).

``pending_count`` counts this process's pending entries and the records of the other
journal files in the directory (other processes' live journals, orphans not adopted yet)
that the database does not hold yet; ``flush`` waits for those too. A Verifier in another
process is therefore never told "unknown, conclusive" about a record that is only in a
journal.

With ``commit_before_return`` (``audit.durability=database``, for replicas whose disk
does not outlive them) ``record`` writes the record into the database itself, in its own
transaction, and returns ``COMMITTED`` only once it is committed; when it cannot (the
database refuses or is away, or is in its backoff after a failure) it raises
``AuditNotRecorded`` and keeps nothing: the lookup is then not answered, so no answer
exists that the store does not hold. The journal still exists for the records of other
journals adopted from the directory.

Every journal line names the database it is for (``database_key``, see ``spool.py``): a
journal left by a process configured for another database is never moved into this one.

``close`` (also run at interpreter exit) stops the writer and makes one attempt to move
what is pending; what the database does not take stays in the journal for the next
recorder on the directory. A record arriving after ``close`` still goes to a journal file
of its own, left for adoption, and ``record`` returns ``SPOOLED``.
"""

from __future__ import annotations

import atexit
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

from sqlalchemy import JSON, Connection, Engine, Table, func, insert, select, text
from sqlalchemy.exc import DBAPIError, IntegrityError, OperationalError, SQLAlchemyError

from lookup_knowledge.adapters.audit.backoff import Backoff
from lookup_knowledge.adapters.audit.codec import clean_invocation, without_shown_text
from lookup_knowledge.adapters.audit.engine import SQLITE_BEGIN_OPTION, database_key
from lookup_knowledge.adapters.audit.errors import is_permanent, is_seq_conflict
from lookup_knowledge.adapters.audit.models import invocation_evidence, tool_invocation
from lookup_knowledge.adapters.audit.spool import EntryState, Spool, SpoolClosed, SpoolEntry
from lookup_knowledge.application.ports import (
    RecordOutcome,
    ToolInvocation,
    ToolInvocationRecorder,
)
from lookup_knowledge.domain.errors import AuditError, AuditNotRecorded

T = tool_invocation
E = invocation_evidence

logger = logging.getLogger(__name__)

_COMMIT_ATTEMPTS = 3  # audit.durability=database: waits for SQLite's write lock
_IDLE_WAKE_S = 60.0  # the background writer's check for a recorder nobody closed
_ID_CHUNK = 500
# Journal entries moved into the database per transaction (256 measured ~1.5x slower
# into PostgreSQL: the per-batch round trips).
BATCH_SIZE = 1024
_PG_LOCK_SESSIONS = text(
    "SELECT pg_advisory_xact_lock(k) FROM unnest(CAST(:keys AS bigint[])) AS k"
)

_LIVE: weakref.WeakSet[SqlToolInvocationRecorder] = weakref.WeakSet()


@atexit.register
def _close_at_exit() -> None:
    """Move what is pending (one attempt each) and release the journals at exit."""
    for recorder in list(_LIVE):
        try:
            recorder.close()
        except Exception:
            logger.exception("closing the audit recorder at exit failed")


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
            "row_tenant": e.row_tenant,
        }
        for e in invocation.evidence
    ]


def copy_rows(conn: Connection, table: Table, rows: list[dict[str, Any]]) -> None:
    """``COPY table (columns of the rows) FROM STDIN`` through psycopg, in ``conn``'s
    transaction. Values go as the ORM would send them (JSON documents as ``Jsonb``); a
    driver error is raised as SQLAlchemy's (``IntegrityError`` ...), like ``execute``."""
    if not rows:
        return
    from psycopg import Error as PsycopgError
    from psycopg.types.json import Jsonb

    columns = list(rows[0])
    json_columns = {c for c in columns if isinstance(table.c[c].type, JSON)}
    statement = f"COPY {table.name} ({', '.join(columns)}) FROM STDIN"
    raw = conn.connection.driver_connection
    try:
        with raw.cursor() as cursor, cursor.copy(statement) as copy:  # type: ignore[union-attr]
            for row in rows:
                copy.write_row([Jsonb(row[c]) if c in json_columns else row[c] for c in columns])
    except PsycopgError as error:
        raise DBAPIError.instance(statement, None, error, PsycopgError) from error


class SqlToolInvocationRecorder(ToolInvocationRecorder):
    """Thread-safe. ``engine`` from ``create_audit_engine``; ``spool_dir`` a local directory
    (created if missing) that survives restarts, e.g. next to the SQLite file or under
    the service's state directory: it holds the journal."""

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
        write_behind: bool = False,
        batch_size: int = BATCH_SIZE,
        linger_s: float = 0.0,
        keep_shown_text: bool = True,
        prepare: Callable[[], object] | None = None,
        commit_before_return: bool = False,
        adopt_unbound_journals: bool = True,
    ) -> None:
        """``fsync`` False: journal appends are not fsync'd (``audit.durability=process``).

        ``write_behind``: the background writer moves journal entries into the database
        (``record`` returns ``JOURNALED``); False: ``record`` does it before returning.
        ``linger_s``: how long the background writer lets the oldest entry wait for
        others to share its transaction (fewer, fuller batches: less work competing with
        the lookups); readers never wait for it, ``flush`` moves everything at once.
        ``background_drain_s``: while entries wait out a backoff, the background writer
        looks at least this often (in real seconds) whether it is over; ``None``: no
        background writer (entries are moved by ``record`` and ``flush`` only; not with
        ``write_behind``). ``keep_shown_text`` False: store (and journal) only the hash of
        each shown block.

        ``prepare``: what must succeed once before the first write (the schema migration
        a start-up could not run because the database was down); until it has, every
        write counts as failed, so records stay in the journal and are moved after it.

        ``commit_before_return``: ``record`` commits the record into the database before
        it returns, or raises ``AuditNotRecorded`` (``audit.durability=database``).
        ``adopt_unbound_journals``: journal lines written before lines named their
        database are moved into this one (the container passes
        ``audit.adopt-unbound-journals``, off by default)."""
        if background_drain_s is not None and not background_drain_s > 0:
            raise ValueError("background_drain_s must be > 0 or None")
        if write_behind and background_drain_s is None:
            raise ValueError("write_behind needs the background writer (background_drain_s)")
        if max_seq_retries < 1:
            raise ValueError("max_seq_retries must be >= 1")
        if batch_size < 1:
            raise ValueError("batch_size must be >= 1")
        if not linger_s >= 0:
            raise ValueError("linger_s must be >= 0")
        self._linger_s = linger_s
        self._lingering = False  # the writer waits for a fuller batch: no need to wake it
        self._engine = engine
        self._keep_shown_text = keep_shown_text
        self._prepare = prepare
        self._prepare_lock = threading.Lock()
        self._is_pg = engine.dialect.name == "postgresql"
        self._is_sqlite = engine.dialect.name == "sqlite"
        self._commit_before_return = commit_before_return
        self._spool = Spool(
            spool_dir,
            fsync=fsync,
            database=database_key(engine.url),
            adopt_unbound=adopt_unbound_journals,
        )
        self._lock = threading.RLock()  # closing + counters
        self._replay_lock = threading.Lock()  # one mover at a time
        self._failures = 0
        self._max_seq_retries = max_seq_retries
        self._batch_size = batch_size
        self._monotonic = monotonic
        self._backoff = Backoff(backoff_initial_s, backoff_max_s, monotonic=monotonic)
        self._closed = False
        self._fsync = fsync
        self._write_behind = write_behind
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
                name=f"audit-journal-writer-{self._spool.path.stem}",
                daemon=True,
            )
            self._drainer.start()
        _LIVE.add(self)

    # ------------------------------------------------------------------ port

    def record(self, invocation: ToolInvocation) -> RecordOutcome:
        clean = clean_invocation(invocation)
        if not self._keep_shown_text:
            clean = without_shown_text(clean)
        if self._commit_before_return:
            return self._commit_now(clean)
        if self._closed:
            return self._keep_late(clean)
        try:
            entry = self._spool.append(clean, cleaned=True)  # durable from here on
        except SpoolClosed:
            return self._keep_late(clean)
        except AuditError:  # the disk refuses: the one failure that reaches the caller
            with self._lock:
                self._failures += 1
            raise
        if self._write_behind:
            if not self._lingering or len(self._spool) >= self._batch_size:
                self._wake.set()  # (a lingering writer waits for a full batch, no more)
            if self._in_backoff() or self._prepare is not None:
                return RecordOutcome.SPOOLED  # the database is known to be away
            return RecordOutcome.JOURNALED
        if not self._in_backoff():
            self._drain(respect_backoff=True, blocking=True)
        if entry.state is EntryState.STORED:
            return RecordOutcome.COMMITTED
        self._wake.set()  # the background writer retries once the backoff is over
        return RecordOutcome.SPOOLED

    def _commit_now(self, clean: ToolInvocation) -> RecordOutcome:
        """``audit.durability=database``: committed in the database now, or not at all."""
        if self._in_backoff():
            with self._lock:
                self._failures += 1
            raise AuditNotRecorded(
                "the audit database failed a moment ago and is left alone for "
                f"{self._backoff.seconds_left():.1f} s; the lookup is not answered "
                "(audit.durability=database)"
            )
        try:
            for attempt in range(1, _COMMIT_ATTEMPTS + 1):
                try:
                    self._write_batch([clean])
                    break
                except OperationalError as error:
                    # SQLite's lock outlasted the busy timeout (a large batch of another
                    # writer): worth another wait; anything else fails at once.
                    if not self._is_sqlite or attempt == _COMMIT_ATTEMPTS:
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
        return RecordOutcome.COMMITTED

    def _keep_late(self, clean: ToolInvocation) -> RecordOutcome:
        """Closed (a lookup that was in flight): a journal file of its own, left unlocked
        for the next recorder on this directory to adopt; raises ``AuditError`` only if
        the disk refuses."""
        late = Spool(self._spool.directory, fsync=self._fsync, database=self._spool.database)
        try:
            late.append(clean, cleaned=True)
        finally:
            late.close()
        logger.warning(
            "audit record arrived after the recorder was closed; kept in the journal %s",
            late.path.name,
            extra={"invocation_id": clean.id},
        )
        return RecordOutcome.SPOOLED

    def flush(self, session_id: str | None = None, timeout_s: float = 10.0) -> bool:
        """The readers' barrier: move what is pending (adopting orphans first), then wait,
        up to ``timeout_s``, until no record (of the session) is pending anywhere in the
        journal directory, including live journals of other processes."""
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

    def barrier(self, session_id: str | None = None, timeout_s: float = 10.0) -> bool:
        """What a reader of the store runs first: ``flush``, but while the database is
        known to be away (the last attempt failed) one attempt only, not a wait of
        ``timeout_s``: the reader then fails, or reports the records still pending."""
        with self._lock:
            down = self._backoff.down
        return self.flush(session_id, 0.0 if down else timeout_s)

    def pending_count(self, session_id: str | None = None) -> int:
        """Records (of the session) in this journal not yet in the database, plus those in
        the directory's other journal files that the database does not hold (all of them
        if it cannot tell)."""
        if self._closed:  # what this journal held is on disk now, perhaps adopted since
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
        try:
            with self._engine.connect() as conn:
                found = self._present(conn, [uuid.UUID(i) for i in ids])
        except (SQLAlchemyError, ValueError) as error:
            logger.debug("cannot check journal ids against the audit database: %s", error)
            return set()
        return {str(i).lower() for i in found}

    def failure_count(self) -> int:
        return self._failures

    def rejected_count(self) -> int:
        """Records (or journal lines) set aside in ``rejected.jsonl``: kept, never replayed."""
        return self._spool.rejected_count()

    def stranded_count(self) -> int:
        """Records in orphan journals of another database, left in the directory."""
        return self._spool.stranded_count()

    def close(self) -> None:
        """Stop the background writer, make one attempt (unless in backoff) to move what
        is pending, and release the journal: what is left stays on disk for the next
        recorder. A record arriving later still goes to a journal (see ``record``)."""
        self._stop.set()
        self._wake.set()
        drainer = self._drainer
        if drainer is not None and drainer is not threading.current_thread():
            drainer.join()
        with self._replay_lock:
            if self._closed:
                return
            if len(self._spool) and not self._in_backoff():
                try:
                    self._drain_locked(respect_backoff=True)
                except Exception:
                    logger.exception("moving the audit journal on close failed")
            with self._lock:
                self._closed = True
                self._spool.close()
        _LIVE.discard(self)

    def background_step(self) -> float:
        """One round of the background writer: move what is pending unless in backoff.
        Returns how long to wait (real seconds) before the next round; a new record ends
        the wait early."""
        poll = self._background_s or _IDLE_WAKE_S
        self._lingering = False
        if self._closed or not len(self._spool):
            return _IDLE_WAKE_S
        if self._in_backoff():
            return min(self._backoff.seconds_left(), poll)
        head = self._spool.head()
        if self._linger_s and head is not None and len(self._spool) < self._batch_size:
            wait = head.at + self._linger_s - time.monotonic()
            if wait > 0:
                self._lingering = True
                return wait
        try:
            self._drain(respect_backoff=True, blocking=False)
        except Exception:  # a writer that dies would leave records pending until a flush
            logger.exception("background move of the audit journal failed")
        return poll if len(self._spool) else _IDLE_WAKE_S

    # ------------------------------------------------------------------ moving

    def _drain(self, *, respect_backoff: bool, blocking: bool) -> None:
        for _ in range(3):  # a record appended while the mover was finishing
            if not self._replay_lock.acquire(blocking=blocking):
                return
            try:
                ok = self._drain_locked(respect_backoff)
            finally:
                self._replay_lock.release()
            if not ok or not len(self._spool):
                return

    def _drain_locked(self, respect_backoff: bool) -> bool:
        """Move batches from the head until empty or a transient failure (False then)."""
        try:
            while True:
                with self._lock:
                    if self._closed or (respect_backoff and self._in_backoff()):
                        return False
                batch = self._spool.head_batch(self._batch_size)
                if not batch:
                    return True
                if not self._move(batch):
                    return False
        finally:
            self._spool.compact(force=False)

    def _move(self, batch: list[SpoolEntry]) -> bool:
        """Store ``batch`` (the journal's head) in one transaction; False on a transient
        failure. A batch refused for good is moved one entry at a time, so that only the
        entry the database refuses is set aside."""
        try:
            self._write_batch([e.invocation for e in batch])
        except Exception as error:  # noqa: BLE001 - classified below, never lost
            if not is_permanent(error):
                self._note_failure(error, batch[0].invocation.id, "write")
                return False
            if len(batch) > 1:
                return all(self._move([entry]) for entry in batch)
            [entry] = batch
            self._note_failure(error, entry.invocation.id, "write (rejected)", backoff=False)
            self._spool.reject_head(entry, f"{type(error).__name__}: {error}")
            return True
        self._note_success()
        self._spool.pop_entries(batch)
        return True

    # ------------------------------------------------------------------ database

    def _ensure_prepared(self) -> None:
        if self._prepare is None:
            return
        with self._prepare_lock:
            if self._prepare is not None:
                self._prepare()
                self._prepare = None

    def _write_batch(self, invocations: list[ToolInvocation]) -> None:
        """Insert those not stored yet, in one transaction, seq in journal order."""
        self._ensure_prepared()
        for attempt in range(1, self._max_seq_retries + 1):
            try:
                self._insert_batch(invocations)
                return
            except IntegrityError as error:
                if attempt == self._max_seq_retries or not (
                    is_seq_conflict(error) or self._any_stored(invocations)
                ):
                    raise
                # Another writer took a seq, or stored one of these ids, first: again.
                time.sleep(random.uniform(0.0, 0.002 * attempt))
        raise AssertionError("unreachable")  # pragma: no cover

    def _insert_batch(self, invocations: list[ToolInvocation]) -> None:
        options = {SQLITE_BEGIN_OPTION: "IMMEDIATE"} if self._is_sqlite else {}
        with self._engine.connect().execution_options(**options) as conn, conn.begin():
            sessions = sorted({i.session_id for i in invocations})
            if self._is_pg:
                keys = sorted({session_lock_key(s) for s in sessions})
                conn.execute(_PG_LOCK_SESSIONS, {"keys": keys})
            ids = [uuid.UUID(i.id) for i in invocations]
            seen = self._present(conn, ids)
            next_seq = self._next_seqs(conn, sessions)
            rows: list[dict[str, Any]] = []
            evidence: list[dict[str, Any]] = []
            for invocation, invocation_id in zip(invocations, ids, strict=True):
                if invocation_id in seen:
                    continue  # stored already (a replay, or the same record twice)
                seen.add(invocation_id)
                seq = next_seq.get(invocation.session_id, 0) + 1
                next_seq[invocation.session_id] = seq
                rows.append(invocation_row(invocation, seq))
                evidence.extend(evidence_rows(invocation))
            if rows:
                self._insert_rows(conn, rows, evidence)

    def _insert_rows(
        self, conn: Connection, rows: list[dict[str, Any]], evidence: list[dict[str, Any]]
    ) -> None:
        """The batch's rows, inside its transaction: ``COPY`` on PostgreSQL (a pipelined
        executemany is one statement per row: ~10x slower), executemany on SQLite."""
        if self._is_pg:
            copy_rows(conn, T, rows)
            copy_rows(conn, E, evidence)
            return
        conn.execute(insert(T), rows)
        if evidence:
            conn.execute(insert(E), evidence)

    def _next_seqs(self, conn: Connection, sessions: list[str]) -> dict[str, int]:
        """Each session's highest stored seq (absent: none yet). Runs after the session
        locks, so it sees every committed writer."""
        highest: dict[str, int] = {}
        for start in range(0, len(sessions), _ID_CHUNK):
            chunk = sessions[start : start + _ID_CHUNK]
            rows = conn.execute(
                select(T.c.session_id, func.max(T.c.seq))
                .where(T.c.session_id.in_(chunk))
                .group_by(T.c.session_id)
            ).all()
            highest.update((r[0], int(r[1])) for r in rows)
        return highest

    @staticmethod
    def _present(conn: Connection, ids: Collection[uuid.UUID]) -> set[uuid.UUID]:
        """Which of ``ids`` are stored."""
        wanted = sorted(set(ids))
        found: set[uuid.UUID] = set()
        for start in range(0, len(wanted), _ID_CHUNK):
            chunk = wanted[start : start + _ID_CHUNK]
            found.update(conn.execute(select(T.c.id).where(T.c.id.in_(chunk))).scalars())
        return found

    def _any_stored(self, invocations: list[ToolInvocation]) -> bool:
        try:
            with self._engine.connect() as conn:
                return bool(self._present(conn, [uuid.UUID(i.id) for i in invocations]))
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
            "audit %s failed; record kept in the local journal",
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
    """The background writer: holds the recorder weakly, so a recorder nobody closed
    can still be collected (its journal file is then released for adoption)."""
    while not stop.is_set():
        wake.clear()
        recorder = ref()
        if recorder is None:
            return
        delay = recorder.background_step()
        del recorder
        wake.wait(delay)
