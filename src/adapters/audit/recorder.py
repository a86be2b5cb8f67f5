"""``SqlToolInvocationRecorder``: every lookup leaves a durable record before it returns.

The port facade over three parts: the ``Journal`` (the local write-ahead log: append,
fsync, segments, replay), the ``SqlBatchWriter`` (one transaction per batch) and the
``JournalMover`` (the background writer, the backoff, the deferred migration).
``build_sql_recorder`` puts them together.

``record`` appends the record to the journal and returns once it is durable there. With
``write_behind`` (what the container builds) the mover's thread moves it into the
database, so the lookup pays only the append (``JOURNALED``; ``JOURNALED_OFFLINE`` when the
database is known to be away); without it, ``record`` moves the journal itself before it
returns (``COMMITTED`` when its record is stored). With ``commit_before_return``
(``audit.durability=database``) ``record`` commits the record into the database itself
and returns ``COMMITTED`` only then, else raises ``AuditNotRecorded`` and keeps nothing.

``flush`` is the barrier readers use: it moves everything pending (ignoring the backoff)
and waits until no record (of a session) is pending anywhere in the journal directory,
including other processes' live journals, so a Verifier is never told "unknown,
conclusive" about a record that is only in a journal.

``close`` (the container's Resource runs it; the CLI closes its app before ``exit_now``)
stops the writer and makes one attempt to move what is pending; what the database does
not take stays in the journal for the next recorder on the directory. A record arriving
after ``close`` still goes to a journal file of its own, left for adoption
(``JOURNALED_OFFLINE``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import Engine

from lookup_knowledge.adapters.audit.backoff import Backoff
from lookup_knowledge.adapters.audit.codec import clean_invocation, without_shown_text
from lookup_knowledge.adapters.audit.engine import database_key
from lookup_knowledge.adapters.audit.journal import Journal
from lookup_knowledge.adapters.audit.journal_format import EntryState, JournalClosed
from lookup_knowledge.adapters.audit.mover import JournalMover
from lookup_knowledge.adapters.audit.sql_writer import BATCH_SIZE, SqlBatchWriter
from lookup_knowledge.adapters.durable_files import FSYNCED, DurableFiles
from lookup_knowledge.application.ports import (
    RecordOutcome,
    ToolInvocation,
    ToolInvocationRecorder,
)
from lookup_knowledge.domain.errors import AuditError

if TYPE_CHECKING:
    from lookup_knowledge.adapters.audit.chain import AuditChain

logger = logging.getLogger(__name__)


class SqlToolInvocationRecorder(ToolInvocationRecorder):
    """Thread-safe. Built by ``build_sql_recorder``; ``clock`` and ``sleep`` time the
    ``flush`` wait (a test's fakes)."""

    def __init__(
        self,
        mover: JournalMover,
        *,
        write_behind: bool = False,
        commit_before_return: bool = False,
        keep_shown_text: bool = True,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        chain: AuditChain | None = None,
    ) -> None:
        self._mover = mover
        self._journal = mover.journal
        self._write_behind = write_behind
        self._commit_before_return = commit_before_return
        self._keep_shown_text = keep_shown_text
        self._clock = clock
        self._sleep = sleep
        self._writer_chain = chain

    def record(self, invocation: ToolInvocation) -> RecordOutcome:
        clean = clean_invocation(invocation)
        if not self._keep_shown_text:
            clean = without_shown_text(clean)
        if self._commit_before_return:
            self._mover.commit(clean)
            return RecordOutcome.COMMITTED
        if self._mover.closed:
            return self._keep_late(clean)
        try:
            entry = self._journal.append(clean, cleaned=True)  # durable from here on
        except JournalClosed:
            return self._keep_late(clean)
        except AuditError:  # the disk refuses: the one failure that reaches the caller
            self._mover.count_failure()
            raise
        if self._write_behind:
            self._mover.wake(appended=True)
            if self._mover.in_backoff() or self._mover.unprepared:
                return RecordOutcome.JOURNALED_OFFLINE  # the database is known to be away
            return RecordOutcome.JOURNALED
        if not self._mover.in_backoff():
            self._mover.drain(respect_backoff=True, blocking=True)
        if entry.state is EntryState.STORED:
            return RecordOutcome.COMMITTED
        self._mover.wake()  # the background writer retries once the backoff is over
        return RecordOutcome.JOURNALED_OFFLINE

    def _keep_late(self, clean: ToolInvocation) -> RecordOutcome:
        """Closed (a lookup that was in flight): a journal file of its own, left unlocked
        for the next recorder on this directory to adopt; raises ``AuditError`` only if
        the disk refuses."""
        journal = self._journal
        late = Journal(journal.directory, files=journal.files, database=journal.database)
        try:
            late.append(clean, cleaned=True)
        finally:
            late.close()
        logger.warning(
            "audit record arrived after the recorder was closed; kept in the journal %s",
            late.path.name,
            extra={"invocation_id": clean.id},
        )
        return RecordOutcome.JOURNALED_OFFLINE

    def flush(self, session_id: str | None = None, timeout_s: float = 10.0) -> bool:
        """The readers' barrier: move what is pending (adopting orphans first), then wait,
        up to ``timeout_s``, until no record (of the session) is pending anywhere in the
        journal directory, including live journals of other processes."""
        deadline = self._clock() + max(0.0, timeout_s)
        pause = 0.05
        while True:
            if self._mover.closed:
                return self.pending_count(session_id) == 0
            self._journal.adopt_orphans()
            if self._journal.pending(session_id):
                self._mover.drain(respect_backoff=False, blocking=True)
            if not self._journal.pending(session_id) and not self._foreign_pending(
                session_id, respect_backoff=False
            ):
                if self._writer_chain is not None:  # the trail: sign what was chained
                    self._writer_chain.flushed()
                return True
            remaining = deadline - self._clock()
            if remaining <= 0:
                return False
            self._sleep(min(pause, remaining))
            pause = min(pause * 2, 1.0)

    def barrier(self, session_id: str | None = None, timeout_s: float = 10.0) -> bool:
        """What a reader of the store runs first: ``flush``, but while the database is
        known to be away (the last attempt failed) one attempt only, not a wait of
        ``timeout_s``: the reader then fails, or reports the records still pending."""
        return self.flush(session_id, 0.0 if self._mover.down else timeout_s)

    def pending_count(self, session_id: str | None = None) -> int:
        """Records (of the session) in this journal not yet in the database, plus those in
        the directory's other journal files that the database does not hold (all of them
        if it cannot tell)."""
        if self._mover.closed:  # what this journal held is on disk now, perhaps adopted
            return self._foreign_pending(session_id)
        foreign = self._foreign_pending(session_id)
        return self._journal.pending(session_id) + foreign

    def _foreign_pending(self, session_id: str | None, *, respect_backoff: bool = True) -> int:
        foreign = self._journal.foreign_ids(session_id)
        if not foreign:
            return 0
        if not self._mover.closed:
            # Read after the scan: a record adopted into this journal meanwhile is seen.
            foreign.difference_update(self._journal.pending_ids(session_id))
        committed = self._mover.committed_ids(foreign, respect_backoff=respect_backoff)
        return len(foreign - committed)

    def failure_count(self) -> int:
        return self._mover.failures

    def rejected_count(self) -> int:
        """Records (or journal lines) set aside in ``rejected.jsonl``: kept, never replayed."""
        return self._journal.rejected_count()

    def stranded_count(self) -> int:
        """Records in orphan journals of another database, left in the directory."""
        return self._journal.stranded_count()

    def close(self) -> None:
        """Stop the background writer, make one attempt (unless in backoff) to move what
        is pending, and release the journal: what is left stays on disk for the next
        recorder. A record arriving later still goes to a journal (see ``record``)."""
        self._mover.close()
        if self._writer_chain is not None:  # the trail: a last checkpoint
            self._writer_chain.close()


def build_sql_recorder(
    engine: Engine,
    journal_dir: str | Path,
    *,
    replay_on_start: bool = True,
    backoff_initial_s: float = 0.5,
    backoff_max_s: float = 30.0,
    files: DurableFiles = FSYNCED,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    background_drain_s: float | None = 1.0,
    write_behind: bool = False,
    batch_size: int = BATCH_SIZE,
    linger_s: float = 0.0,
    keep_shown_text: bool = True,
    prepare: Callable[[], object] | None = None,
    commit_before_return: bool = False,
    adopt_unbound_journals: bool = True,
    writer: SqlBatchWriter | None = None,
    chain: AuditChain | None = None,
) -> SqlToolInvocationRecorder:
    """The recorder on ``engine`` (from ``create_audit_engine``) with its journal in
    ``journal_dir`` (a local directory that survives restarts, created if missing).

    ``files``: how the journal is made durable (``DurableFiles(enabled=False)``:
    ``audit.durability=process``). ``backoff_initial_s``, doubling up to
    ``backoff_max_s``: how long a failing database is left alone (on ``clock``). ``write_behind``: the
    background writer moves journal entries (``record`` returns ``JOURNALED``); False:
    ``record`` does it before returning. ``linger_s``: how long the background writer
    lets the oldest entry wait for others to share its transaction (readers never wait
    for it). ``background_drain_s``: while entries wait out a backoff, the background
    writer looks at least this often whether it is over; ``None``: no background writer
    (not with ``write_behind``). ``keep_shown_text`` False: store (and journal) only the
    hash of each shown block. ``prepare``: the deferred migration (see ``mover.py``).
    ``commit_before_return``: ``audit.durability=database``. ``adopt_unbound_journals``:
    journal lines written before lines named their database are moved into this one
    (``audit.adopt-unbound-journals``). ``replay_on_start``: adopt the orphans in the
    directory and move what they hold before returning. ``writer``: the SQL side (a
    test's variant; by default a ``SqlBatchWriter`` on ``engine``). ``chain``: the
    tamper-evident trail every batch is appended to (``chain.py``)."""
    if write_behind and background_drain_s is None:
        raise ValueError("write_behind needs the background writer (background_drain_s)")
    journal = Journal(
        journal_dir,
        files=files,
        database=database_key(engine.url),
        adopt_unbound=adopt_unbound_journals,
    )
    mover = JournalMover(
        journal,
        writer or SqlBatchWriter(engine, sleep=sleep, chain=chain),
        Backoff(backoff_initial_s, backoff_max_s, monotonic=clock),
        batch_size=batch_size,
        linger_s=linger_s,
        background_s=background_drain_s,
        prepare=prepare,
    )
    if replay_on_start:
        journal.adopt_orphans()
        if len(journal):
            mover.drain(respect_backoff=False, blocking=True)
    mover.start()
    return SqlToolInvocationRecorder(
        mover,
        write_behind=write_behind,
        commit_before_return=commit_before_return,
        keep_shown_text=keep_shown_text,
        clock=clock,
        sleep=sleep,
        chain=chain,
    )
