"""``SqlBatchWriter``: journal entries into the SQL store, one transaction per batch.

Stateless beyond its engine: whoever calls it (the mover) owns the order, the retries
after a failure and the backoff. One batch, oldest first:

1. PostgreSQL: ``pg_advisory_xact_lock`` on each session of the batch, in key order
   (writers of one session queue up, whatever process they run in); SQLite:
   ``BEGIN IMMEDIATE`` (the database write lock, taken before reading).
2. The ids already stored are skipped: a replayed entry is a no-op.
3. Each session's next ``seq`` = max(seq of the session) + 1, read through the
   (session_id, seq) index, then assigned in journal order.
4. The invocations and their evidence rows in one go (``COPY`` on PostgreSQL, a
   multi-row INSERT on SQLite); commit.

A unique violation on (session_id, seq) (a writer that does not take the lock), or on an
id another writer stored first, is retried.
"""

from __future__ import annotations

import hashlib
import random
import time
import uuid
from collections.abc import Callable, Collection, Sequence
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, Engine, func, insert, select, text
from sqlalchemy.exc import IntegrityError, SQLAlchemyError

from lookup_knowledge.adapters.audit.chain import append_entries
from lookup_knowledge.adapters.audit.engine import SQLITE_BEGIN_OPTION
from lookup_knowledge.adapters.audit.errors import is_seq_conflict
from lookup_knowledge.adapters.audit.models import invocation_evidence, tool_invocation
from lookup_knowledge.adapters.audit.pg_batch import (
    EVIDENCE_COLUMNS,
    INVOCATION_COLUMNS,
    PgBatch,
    copy_tuples,
)
from lookup_knowledge.application.ports import ToolInvocation

if TYPE_CHECKING:
    from lookup_knowledge.adapters.audit.chain import AuditChain


T = tool_invocation
E = invocation_evidence

_ID_CHUNK = 500
# Journal entries moved into the database per transaction (256 measured ~1.5x slower
# into PostgreSQL: the per-batch round trips).
BATCH_SIZE = 1024
_PG_LOCK_SESSIONS = text(
    "SELECT pg_advisory_xact_lock(k) FROM unnest(CAST(:keys AS bigint[])) AS k"
)


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


class SqlBatchWriter:
    """Thread-safe (holds no state but its engine). ``sleep``: the pause between the
    retries of a batch that met another writer's seq. ``chain``: the tamper-evident
    trail each batch is appended to, in its transaction (``chain.py``)."""

    def __init__(
        self,
        engine: Engine,
        *,
        max_seq_retries: int = 20,
        sleep: Callable[[float], None] = time.sleep,
        chain: AuditChain | None = None,
    ) -> None:
        if max_seq_retries < 1:
            raise ValueError("max_seq_retries must be >= 1")
        self._engine = engine
        self._max_seq_retries = max_seq_retries
        self._sleep = sleep
        self.is_pg = engine.dialect.name == "postgresql"
        self.is_sqlite = engine.dialect.name == "sqlite"
        self.chain = chain

    def write(self, invocations: list[ToolInvocation]) -> None:
        """Insert those not stored yet, in one transaction, seq in journal order."""
        for attempt in range(1, self._max_seq_retries + 1):
            try:
                stored = self._insert_batch(invocations)
                if self.chain is not None:  # the trail: a checkpoint when one is due
                    self.chain.committed(stored)
                return
            except IntegrityError as error:
                if attempt == self._max_seq_retries or not (
                    is_seq_conflict(error) or self._any_stored(invocations)
                ):
                    raise
                # Another writer took a seq, or stored one of these ids, first: again.
                self._sleep(random.uniform(0.0, 0.002 * attempt))
        raise AssertionError("unreachable")  # pragma: no cover

    def stored_ids(self, ids: Collection[str]) -> set[str]:
        """Which of ``ids`` (invocation ids) the database holds; raises what the driver
        raises (``SQLAlchemyError``) or ``ValueError`` for an id that is no UUID."""
        with self._engine.connect() as conn:
            found = _present(conn, [uuid.UUID(i) for i in ids], pg=self.is_pg)
        return {str(i).lower() for i in found}

    def _insert_batch(self, invocations: list[ToolInvocation]) -> int:
        options = {SQLITE_BEGIN_OPTION: "IMMEDIATE"} if self.is_sqlite else {}
        with self._engine.connect().execution_options(**options) as conn, conn.begin():
            sessions = sorted({i.session_id for i in invocations})
            if self.is_pg:
                keys = sorted({session_lock_key(s) for s in sessions})
                conn.execute(_PG_LOCK_SESSIONS, {"keys": keys})
            ids = [uuid.UUID(i.id) for i in invocations]
            seen = _present(conn, ids, pg=self.is_pg)
            next_seq = self._next_seqs(conn, sessions)
            batch = PgBatch(digests=self.chain is not None) if self.is_pg else None
            rows: list[dict[str, Any]] = []
            evidence: list[dict[str, Any]] = []
            for invocation, invocation_id in zip(invocations, ids, strict=True):
                if invocation_id in seen:
                    continue  # stored already (a replay, or the same record twice)
                seen.add(invocation_id)
                seq = next_seq.get(invocation.session_id, 0) + 1
                next_seq[invocation.session_id] = seq
                if batch is not None:
                    batch.add(invocation, invocation_id, seq)
                    continue
                rows.append(invocation_row(invocation, seq))
                evidence.extend(evidence_rows(invocation))
            if batch is not None:  # PostgreSQL: COPY rows, digested as they were built
                self._insert_rows(conn, batch.invocations, batch.evidence)
                if batch and self.chain is not None:  # the trail: in this transaction
                    append_entries(conn, batch.chained)
                return len(batch)
            if rows:
                self._insert_rows(conn, rows, evidence)
                if self.chain is not None:  # the trail: chained in this transaction
                    self.chain.append_invocations(conn, rows, evidence)
            return len(rows)

    def _insert_rows(self, conn: Connection, rows: Sequence[Any], evidence: Sequence[Any]) -> None:
        """The batch's rows, inside its transaction: ``COPY`` of ``PgBatch`` tuples on
        PostgreSQL (a pipelined executemany is one statement per row: ~10x slower),
        executemany of row dicts on SQLite."""
        if self.is_pg:
            if rows:
                copy_tuples(conn, T.name, INVOCATION_COLUMNS, rows)
                copy_tuples(conn, E.name, EVIDENCE_COLUMNS, evidence)
            return
        if rows:
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

    def _any_stored(self, invocations: list[ToolInvocation]) -> bool:
        try:
            return bool(self.stored_ids([i.id for i in invocations]))
        except SQLAlchemyError:
            return False


def _present(conn: Connection, ids: Collection[uuid.UUID], *, pg: bool = False) -> set[uuid.UUID]:
    """Which of ``ids`` are stored (PostgreSQL: one ``= ANY`` of a uuid array)."""
    wanted = list(set(ids))
    if pg:
        statement = f"SELECT id FROM {T.name} WHERE id = ANY(%s)"
        return {row[0] for row in conn.exec_driver_sql(statement, (wanted,))}
    found: set[uuid.UUID] = set()
    for start in range(0, len(wanted), _ID_CHUNK):
        chunk = wanted[start : start + _ID_CHUNK]
        found.update(conn.execute(select(T.c.id).where(T.c.id.in_(chunk))).scalars())
    return found
