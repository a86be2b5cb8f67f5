"""``AuditChain``: appends every record to the hash chain inside the transaction that
stores it, and signs checkpoints of the chain's head.

The writers call ``append`` in their batch transaction, after their rows are in:
the chain's head row (``audit_chain_head``) is read ``FOR UPDATE`` on PostgreSQL (every
writer of every process queues there, so positions follow the store's commit order);
SQLite's write lock, taken by ``BEGIN IMMEDIATE``, does the same. Hashing happens in the
writer: the journal mover's thread for lookups (off the lookup's path), the caller's
own thread only with ``audit.durability=database``.

After a commit the writer calls ``committed``: every ``every`` records, ``interval_s``
seconds after the first record not yet covered, on ``flushed`` (the recorder's flush)
and on ``close``, a checkpoint is signed and stored (``audit_checkpoint``) and, with a
witness (``audit.checkpoint-file``; ``-`` is stdout), appended there as one JSON line.
Before it signs, the tail since the previous checkpoint is verified (links and record
digests): a chain edited behind the store's back is never signed over.
"""

from __future__ import annotations

import json
import logging
import sys
import threading
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from sqlalchemy import Connection, Engine, insert, select, update
from sqlalchemy.exc import SQLAlchemyError

from lookup_knowledge.adapters.audit.chain_rows import (
    ANSWER_CHECK,
    INVOCATION,
    Fetched,
    digest_of,
    digest_records,
    fast_json,
    fetch_records,
    time_text,
)
from lookup_knowledge.adapters.audit.engine import SQLITE_BEGIN_OPTION
from lookup_knowledge.adapters.audit.models import audit_chain, audit_chain_head, audit_checkpoint
from lookup_knowledge.adapters.audit.pg_batch import copy_tuples
from lookup_knowledge.domain.trail import (
    ANSWER_CHECK_FORMAT,
    GENESIS,
    INVOCATION_FORMAT,
    ChainEntry,
    ChainVerifier,
    Checkpoint,
    Problem,
    ProblemKind,
    StoredRecord,
    make_entry,
)

if TYPE_CHECKING:  # cryptography is imported when a checkpoint is first signed
    from lookup_knowledge.adapters.signing import TrailSigner

logger = logging.getLogger(__name__)

H = audit_chain_head
CH = audit_chain
CP = audit_checkpoint
HEAD_ID = 1
DEFAULT_KEY_FILE = "audit-signing-key.pem"  # in the data directory (audit.signing-key)
_T = TypeVar("_T")
CHUNK = 2000  # records per page of verify_range (two pages in memory)


def lock_head(conn: Connection) -> tuple[int, str]:
    """The chain's head (position, hash), locked for this transaction (PostgreSQL: FOR
    UPDATE; SQLite: the caller holds the write lock). A head row someone deleted is made
    again from the chain's last entry."""
    row = conn.execute(
        select(H.c.position, H.c.entry_hash).where(H.c.id == HEAD_ID).with_for_update()
    ).first()
    if row is not None:
        return int(row[0]), str(row[1])
    last = conn.execute(
        select(CH.c.position, CH.c.entry_hash).order_by(CH.c.position.desc()).limit(1)
    ).first()
    position, head = (0, GENESIS) if last is None else (int(last[0]), str(last[1]))
    conn.execute(insert(H).values(id=HEAD_ID, position=position, entry_hash=head))
    return position, head


def entry_row(entry: ChainEntry) -> dict[str, Any]:
    return {
        "position": entry.position,
        "kind": entry.kind,
        "record_id": uuid.UUID(entry.record_id),
        "session_id": entry.session_id,
        "seq": entry.seq,
        "record_hash": entry.record_hash,
        "prev_hash": entry.prev_hash,
        "entry_hash": entry.entry_hash,
        "recorded_at": entry.recorded_at,
        "chained_at_upgrade": entry.chained_at_upgrade,
    }


ENTRY_FIELDS = (
    "position", "kind", "record_id", "session_id", "seq", "record_hash", "prev_hash",
    "entry_hash", "recorded_at", "chained_at_upgrade",
)  # fmt: skip


def astuple_entry(e: ChainEntry) -> tuple[Any, ...]:
    """``entry_row`` as a COPY row (``ENTRY_FIELDS``; the server parses the id's text)."""
    return (e.position, e.kind, e.record_id, e.session_id, e.seq, e.record_hash,
            e.prev_hash, e.entry_hash, e.recorded_at, e.chained_at_upgrade)  # fmt: skip


def entry_of(row: Sequence[Any]) -> ChainEntry:
    """A chain row read with ``text()`` (raw driver values) as a ``ChainEntry``."""
    record_id = row[2]
    if not isinstance(record_id, uuid.UUID):
        try:
            record_id = uuid.UUID(str(record_id))
        except ValueError:
            record_id = str(record_id)
    seq = row[4]
    return ChainEntry(
        position=int(row[0]),
        kind=str(row[1]),
        record_id=str(record_id),
        session_id=str(row[3]),
        seq=None if seq is None else int(seq),
        record_hash=str(row[5]),
        prev_hash=str(row[6]),
        entry_hash=str(row[7]),
        recorded_at=str(row[8]),
        chained_at_upgrade=bool(row[9]),
    )


ENTRY_COLUMNS = ", ".join(ENTRY_FIELDS)


def append_entries(
    conn: Connection,
    records: Sequence[tuple[str, str, str, int | None, str]],
    *,
    recorded_at: str | None = None,
) -> int:
    """Chain ``records`` (kind, record id, session, seq, digest) after the head, in
    ``conn``'s transaction; returns how many."""
    if not records:
        return 0
    position, head = lock_head(conn)
    at = recorded_at or time_text(datetime.now(UTC))
    entries = []
    for kind, record_id, session_id, seq, digest in records:
        position += 1
        entry = make_entry(
            position, kind, record_id, session_id, seq, digest, head, at, dumps=fast_json
        )
        head = entry.entry_hash
        entries.append(entry)
    if conn.dialect.name == "postgresql":  # one COPY, not a statement per entry
        copy_tuples(conn, CH.name, ENTRY_FIELDS, (astuple_entry(e) for e in entries))
    else:
        conn.execute(insert(CH), [entry_row(e) for e in entries])
    conn.execute(update(H).where(H.c.id == HEAD_ID).values(position=position, entry_hash=head))
    return len(entries)


def read_checkpoints(conn: Connection) -> list[Checkpoint]:
    rows = conn.execute(select(CP).order_by(CP.c.number)).mappings().all()
    return [_checkpoint_of(r) for r in rows]


def verify_range(
    conn: Connection, verifier: ChainVerifier, low: int, high: int, session_id: str | None = None
) -> None:
    """Feed the entries at ``low..high`` with the stored records (content checked for
    ``session_id``'s entries, or all) to ``verifier``, page by page. On PostgreSQL a
    page's records are hashed on a helper thread while the server reads the next page
    (psycopg waits without the GIL; measured 1.2x); on SQLite the two would only take
    turns at the GIL (measured 0.9x), so one thread does both."""
    from sqlalchemy import text

    pages = [(start, min(high, start + CHUNK - 1)) for start in range(low, high + 1, CHUNK)]
    pool: ThreadPoolExecutor | _InThisThread = (
        ThreadPoolExecutor(max_workers=1, thread_name_prefix="verify-log")
        if conn.dialect.name == "postgresql"
        else _InThisThread()
    )
    with pool:
        pending: tuple[list[Any], Future[dict[int, StoredRecord]]] | None = None
        for start, end in pages:
            entries: list[Any] = conn.execute(  # type: ignore[assignment]
                text(
                    f"SELECT {ENTRY_COLUMNS} FROM audit_chain WHERE position BETWEEN :low "
                    "AND :high ORDER BY position"
                ),
                {"low": start, "high": end},
            ).all()
            page = (
                entries,
                pool.submit(digest_records, fetch_records(conn, start, end, session_id)),
            )
            if pending is not None and not _feed_page(verifier, *pending, session_id):
                return
            pending = page
        if pending is not None:
            _feed_page(verifier, *pending, session_id)


class _InThisThread:
    """``ThreadPoolExecutor``'s ``submit`` run at once, in the caller's thread."""

    def __enter__(self) -> _InThisThread:
        return self

    def __exit__(self, *_: object) -> None:
        return None

    def submit(self, fn: Callable[[Fetched], _T], arg: Fetched) -> Future[_T]:
        done: Future[_T] = Future()
        done.set_result(fn(arg))
        return done


def _feed_page(
    verifier: ChainVerifier,
    entries: list[Any],
    digests: Future[dict[int, StoredRecord]],
    session_id: str | None,
) -> bool:
    """Feed one page's entries; False once the verifier found a problem."""
    stored = digests.result()
    for row in entries:
        try:
            entry = entry_of(row)
        except (TypeError, ValueError):
            verifier.problem = Problem(
                ProblemKind.LINK_BROKEN,
                "its chain entry holds values no writer stores (edited)",
                position=row[0] if isinstance(row[0], int) else None,
            )
            return False
        content = session_id is None or entry.session_id == session_id
        verifier.feed(entry, stored.get(entry.position), content=content)
        if verifier.problem is not None:
            return False
    return True


class AuditChain:
    """Thread-safe; one per audit database per process (the container's). ``signer``:
    the key, or what loads it (called when a checkpoint is first signed or the key asked
    for: a command that only reads the store never loads ``cryptography``)."""

    def __init__(
        self,
        engine: Engine,
        signer: TrailSigner | Callable[[], TrailSigner],
        *,
        every: int = 1000,
        interval_s: float = 60.0,
        witness: Path | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        if every < 1:
            raise ValueError("every must be >= 1")
        self._engine = engine
        self._signer = signer
        self._signer_lock = threading.Lock()
        self._every = every
        self._interval_s = interval_s
        self.interval_s = interval_s
        self._witness = witness
        self._clock = clock
        self._lock = threading.Lock()
        self._checkpoint_lock = threading.Lock()
        self._uncovered = 0
        self._timer: threading.Timer | None = None
        self._closed = False
        self.is_pg = engine.dialect.name == "postgresql"

    @property
    def witness_file(self) -> Path | None:
        """The witness file checkpoints are appended to (None: none, or stdout)."""
        if self._witness is None or str(self._witness) == "-":
            return None
        return self._witness

    @staticmethod
    def key_file(path: Path) -> Callable[[], TrailSigner]:
        """The key at ``path`` (made there when missing), loaded when first needed."""

        def load() -> TrailSigner:
            from lookup_knowledge.adapters.signing import TrailSigner

            return TrailSigner.load_or_create(path)

        return load

    @property
    def signer(self) -> TrailSigner:
        with self._signer_lock:
            if callable(self._signer):
                self._signer = self._signer()
            return self._signer

    # ------------------------------------------------------------------ appends

    def append_invocations(
        self, conn: Connection, rows: Sequence[dict[str, Any]], evidence: Sequence[dict[str, Any]]
    ) -> None:
        """The batch's invocation rows (and their evidence rows), as inserted."""
        by_invocation: dict[Any, list[dict[str, Any]]] = {}
        for e in evidence:
            by_invocation.setdefault(e["invocation_id"], []).append(e)
        records = []
        for row in rows:
            children = sorted(by_invocation.get(row["id"], ()), key=lambda e: e["rank"])
            digest = digest_of(INVOCATION_FORMAT, row, children)
            records.append((INVOCATION, str(row["id"]), row["session_id"], row["seq"], digest))
        append_entries(conn, records)

    def append_check(
        self, conn: Connection, head: dict[str, Any], claims: Sequence[dict[str, Any]]
    ) -> None:
        """An answer check (``answer_check`` row) and its claim rows, as inserted."""
        children = sorted(claims, key=lambda c: c["claim_index"])
        digest = digest_of(ANSWER_CHECK_FORMAT, head, children)
        append_entries(conn, [(ANSWER_CHECK, str(head["id"]), head["session_id"], None, digest)])

    def writing(self) -> Any:
        """A connection for a writer's transaction (SQLite: BEGIN IMMEDIATE)."""
        options = {} if self.is_pg else {SQLITE_BEGIN_OPTION: "IMMEDIATE"}
        return self._engine.connect().execution_options(**options)

    # ------------------------------------------------------------------ checkpoints

    def committed(self, count: int) -> None:
        """``count`` records were committed: a checkpoint when ``every`` are uncovered,
        else one ``interval_s`` after the first."""
        if count <= 0:
            return
        with self._lock:
            self._uncovered += count
            due = self._uncovered >= self._every
            if not due and self._timer is None and not self._closed:
                self._timer = threading.Timer(self._interval_s, self._on_timer)
                self._timer.daemon = True
                self._timer.start()
        if due:
            self.checkpoint("periodic")

    def _on_timer(self) -> None:
        with self._lock:
            self._timer = None
            pending = self._uncovered > 0
        if pending:
            self.checkpoint("periodic")

    def flushed(self) -> None:
        """The recorder's flush: what this process chained is signed now."""
        with self._lock:
            pending = self._uncovered > 0
        if pending:
            self.checkpoint("flush")

    def close(self) -> None:
        with self._lock:
            self._closed = True
            timer, self._timer = self._timer, None
            pending = self._uncovered > 0
        if timer is not None:
            timer.cancel()
        if pending:
            self.checkpoint("close")

    def checkpoint(self, kind: str = "flush") -> Checkpoint | None:
        """Sign the chain's head unless the last checkpoint covers it already (or the tail
        does not verify: then nothing is signed, and the error is logged). Never raises
        for the database: a checkpoint that cannot be written now comes with the next."""
        with self._checkpoint_lock:
            with self._lock:
                covering = self._uncovered
            try:
                made = self._checkpoint(kind)
            except SQLAlchemyError as error:
                logger.warning("audit checkpoint not written: %s", str(error).splitlines()[0])
                return None
            with self._lock:
                self._uncovered = max(0, self._uncovered - covering)
        if made is not None:
            self.witness(made)
        return made

    def _checkpoint(self, kind: str) -> Checkpoint | None:
        with self.writing() as conn, conn.begin():
            position, head = lock_head(conn)
            last = conn.execute(select(CP).order_by(CP.c.number.desc()).limit(1)).mappings().first()
            if last is not None and int(last["position"]) == position:
                return None
            if position == 0:
                return None
            problem = self._tail_problem(conn, last, position, head)
            if problem is not None:
                logger.error(
                    "the audit trail does not verify; no checkpoint signed: %s",
                    problem.describe(),
                )
                return None
            previous = None if last is None else _checkpoint_of(last)
            made = self.sign(
                conn,
                position=position,
                head_hash=head,
                kind=kind,
                previous=previous,
                pruned_through=0 if previous is None else previous.pruned_through,
            )
            return made

    def sign(
        self,
        conn: Connection,
        *,
        position: int,
        head_hash: str,
        kind: str,
        previous: Checkpoint | None,
        pruned_through: int,
    ) -> Checkpoint:
        """Sign and store a checkpoint in ``conn``'s transaction (head locked)."""
        unsigned = Checkpoint(
            number=1 if previous is None else previous.number + 1,
            position=position,
            head_hash=head_hash,
            created_at=time_text(self._clock()),
            prev_checkpoint=GENESIS if previous is None else previous.digest(),
            kind=kind,
            pruned_through=pruned_through,
            key_id=self.signer.key_id,
        )
        signed = Checkpoint(
            **{**_fields(unsigned), "signature": self.signer.sign(unsigned.payload())}
        )
        conn.execute(insert(CP).values(**_fields(signed)))
        conn.execute(
            update(H)
            .where(H.c.id == HEAD_ID)
            .values(signed_number=signed.number, signed_position=signed.position)
        )
        return signed

    def _tail_problem(
        self, conn: Connection, last: Any, position: int, head: str
    ) -> Problem | None:
        """The entries since the last checkpoint, verified (links and records)."""
        if last is None:
            start, prev = 1, GENESIS
            first = conn.execute(
                select(CH.c.position, CH.c.prev_hash).order_by(CH.c.position).limit(1)
            ).first()
            if first is not None and int(first[0]) > 1:  # chained after a prune: its cut
                start, prev = int(first[0]), str(first[1])
        else:
            start, prev = int(last["position"]) + 1, str(last["head_hash"])
        verifier = ChainVerifier(start_prev=prev, start_position=start)
        verify_range(conn, verifier, start, position)
        if verifier.problem is not None:
            return verifier.problem
        if verifier.last_position != position or verifier.last_hash != head:
            return Problem(
                ProblemKind.LINK_BROKEN,
                f"the chain's head row says position {position}, the chain ends at "
                f"{verifier.last_position}",
            )
        return None

    def witness(self, checkpoint: Checkpoint) -> None:
        """Append ``checkpoint`` to the witness (``audit.checkpoint-file``), if any."""
        if self._witness is None:
            return
        line = json.dumps(checkpoint.as_dict(), sort_keys=True) + "\n"
        try:
            if str(self._witness) == "-":
                sys.stdout.write(line)
                sys.stdout.flush()
                return
            with open(self._witness, "a", encoding="utf-8") as handle:
                handle.write(line)
        except OSError as error:
            logger.warning("audit checkpoint not written to %s: %s", self._witness, error)


def _fields(c: Checkpoint) -> dict[str, Any]:
    return {
        "number": c.number,
        "position": c.position,
        "head_hash": c.head_hash,
        "created_at": c.created_at,
        "prev_checkpoint": c.prev_checkpoint,
        "kind": c.kind,
        "pruned_through": c.pruned_through,
        "key_id": c.key_id,
        "signature": c.signature,
    }


def _checkpoint_of(m: Any) -> Checkpoint:
    return Checkpoint(
        number=int(m["number"]),
        position=int(m["position"]),
        head_hash=m["head_hash"],
        created_at=m["created_at"],
        prev_checkpoint=m["prev_checkpoint"],
        kind=m["kind"],
        pruned_through=int(m["pruned_through"]),
        key_id=m["key_id"],
        signature=m["signature"],
    )
