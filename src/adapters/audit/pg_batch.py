"""One batch of invocations as the PostgreSQL writer sends them (``COPY``) and as the
chain hashes them, built once per record.

The columns go in the record format's digest order (``INVOCATION_FORMAT``), so that a
record's canonical values are its COPY row with two values replaced (the id as 32 hex
digits, the time as UTC text); an evidence row is its COPY row less the parent key, the
booleans sent as 0/1 (PostgreSQL reads ``1``/``0`` as true/false). ``retrieval_details``
is serialised once, as its canonical text (``document_text``): that text is what COPY
sends to the JSONB column and what the digest hashes, so there is no second encoder
whose output could drift from the first. What PostgreSQL stores is the same value as
before (JSONB keeps no key order; the numbers are the same numerics).

The COPY rows are tuples (no dict per row), written by psycopg's C formatter.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from operator import itemgetter
from typing import Any

import orjson
from sqlalchemy import Connection
from sqlalchemy.exc import DBAPIError

from lookup_knowledge.adapters.audit.chain_rows import INVOCATION, fast_json, odd_numbers, time_text
from lookup_knowledge.application.ports import EvidenceRecord, ToolInvocation
from lookup_knowledge.domain.trail import INVOCATION_FORMAT, canonical_document, record_digest

INVOCATION_COLUMNS = INVOCATION_FORMAT.fields
EVIDENCE_COLUMNS = ("invocation_id", *INVOCATION_FORMAT.child_fields)
_STARTED_AT = INVOCATION_COLUMNS.index("started_at")
_by_rank = itemgetter(0)

ChainRecord = tuple[str, str, str, int | None, str]  # kind, id, session, seq, digest


def document_text(value: object) -> str:
    """``canonical_document(value)`` (keys sorted, compact, numbers as JSONB keeps
    them), by orjson where its text is the same (~10x faster); the standard library's
    for a number orjson writes otherwise (``odd_numbers``) or a value it refuses (an
    integer beyond 64 bits, a lone surrogate). A non-finite float (which a cleaned
    record never holds) is written ``null`` by orjson: stored and hashed alike."""
    try:
        out = orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    except orjson.JSONEncodeError:
        return canonical_document(value)
    if odd_numbers(out):
        return canonical_document(value)
    return out.decode("utf-8")


class PgBatch:
    """The COPY rows of a batch's invocations and evidence rows, and the chain's
    records (kind, id, session, seq, digest) in batch order."""

    __slots__ = ("chained", "digests", "evidence", "invocations")

    def __init__(self, *, digests: bool = True) -> None:
        """``digests`` False: no chain to append to, no digest computed."""
        self.digests = digests
        self.invocations: list[tuple[Any, ...]] = []
        self.evidence: list[tuple[Any, ...]] = []
        self.chained: list[ChainRecord] = []

    def __len__(self) -> int:
        return len(self.invocations)

    def add(self, invocation: ToolInvocation, invocation_id: uuid.UUID, seq: int) -> None:
        """One invocation stored at ``seq`` (its rows, and its digest)."""
        i = invocation
        row_id = str(invocation_id)
        session = i.session_id
        row = (
            row_id, session, seq, i.step_id, i.tool_call_id, i.tool_name, i.query, i.status,
            i.error_code, i.error_message, float(i.quality_score), i.relevance_level,
            i.retrieval_mode, i.filter_applied, i.fallback_reason, i.retrieve_k, i.return_n,
            i.candidate_count, i.returned_count, i.started_at, float(i.duration_ms),
            i.trace_id, i.span_id, document_text(dict(i.retrieval_details)), i.traffic,
            i.principal_tenant, i.principal_user, i.principal_groups_hash, i.access_mode,
            i.access_filter,
        )  # fmt: skip
        evidence = [_evidence_row(row_id, session, e) for e in i.evidence]
        self.invocations.append(row)
        self.evidence.extend(evidence)
        if not self.digests:
            return
        values: list[Any] = list(row)
        values[0] = invocation_id.hex
        values[_STARTED_AT] = time_text(i.started_at)
        children = sorted((e[1:] for e in evidence), key=_by_rank)
        digest = record_digest(INVOCATION_FORMAT, values, children, fast_json)
        self.chained.append((INVOCATION, row_id, session, seq, digest))


def _evidence_row(row_id: str, session: str, e: EvidenceRecord) -> tuple[Any, ...]:
    return (
        row_id, e.rank, session, e.document_id, e.doc_id, e.chunk_index, e.source,
        e.category, float(e.score_before), float(e.score_after), int(bool(e.projected)),
        int(bool(e.in_context_pack)), e.content_hash, e.shown_text, e.row_tenant,
    )  # fmt: skip


def copy_tuples(
    conn: Connection, table: str, columns: Sequence[str], rows: Iterable[Sequence[Any]]
) -> None:
    """``COPY table (columns) FROM STDIN`` of ``rows`` (values in ``columns`` order, text
    format: the server parses each value as its column's type) through psycopg, in
    ``conn``'s transaction; a driver error is raised as SQLAlchemy's (``IntegrityError``
    ...), like ``execute``."""
    from psycopg import Error as PsycopgError

    statement = f"COPY {table} ({', '.join(columns)}) FROM STDIN"
    raw = conn.connection.driver_connection
    try:
        with raw.cursor() as cursor, cursor.copy(statement) as copy:  # type: ignore[union-attr]
            write = copy.write_row
            for row in rows:
                write(row)
    except PsycopgError as error:
        raise DBAPIError.instance(statement, None, error, PsycopgError) from error
