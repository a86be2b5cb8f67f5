"""The audit records as the chain hashes them: which columns (record formats, version 1
as of revision 0007), their canonical values, and reading them back for verification.

A canonical value is the same whichever way the value arrives: from the writer's row
(``uuid.UUID``, an aware ``datetime``, ``bool``, a JSON document as Python objects),
from PostgreSQL (the same types) or straight from SQLite's file (32 hex digits, the
text ``YYYY-MM-DD HH:MM:SS.ffffff`` in UTC, 0/1, the stored JSON text). UUIDs are 32
lower-case hex digits, times that text, booleans 0/1, JSON documents their canonical
text (``canonical_document``; the SQLite store writes exactly that text, see
``engine.py``), everything else as stored. The verifier reads rows without SQLAlchemy's
type processing (``text()``), which is what makes it fast, and sees what a tamperer
wrote rather than what a type decoder makes of it.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, text

from lookup_knowledge.domain.trail import (
    ANSWER_CHECK_FORMAT,
    FORMATS,
    INVOCATION_FORMAT,
    RecordFormat,
    Scalar,
    StoredRecord,
    canonical_document,
    record_digest,
)

INVOCATION = "invocation"
ANSWER_CHECK = "answer_check"

FORMAT_OF_KIND = {INVOCATION: INVOCATION_FORMAT, ANSWER_CHECK: ANSWER_CHECK_FORMAT}
TIME_FORMAT = "%Y-%m-%d %H:%M:%S.%f"


def canon_uuid(value: Any) -> Any:
    if isinstance(value, uuid.UUID):
        return value.hex
    return value


def canon_time(value: Any) -> Any:
    if isinstance(value, datetime):
        at = value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
        return at.strftime(TIME_FORMAT)
    return value


def canon_bool(value: Any) -> Any:
    if isinstance(value, bool):
        return int(value)
    return value


def canon_document(value: Any) -> Any:
    if isinstance(value, str):  # SQLite: the stored text, as it is
        return value
    try:
        return canonical_document(value)
    except (TypeError, ValueError):  # bytes a tamperer stored: hashed as themselves
        return value


def time_text(at: datetime) -> str:
    return str(canon_time(at))


_CONVERT: dict[str, Callable[[Any], Any]] = {
    "id": canon_uuid,
    "started_at": canon_time,
    "created_at": canon_time,
    "retrieval_details": canon_document,
    "projected": canon_bool,
    "in_context_pack": canon_bool,
    "cited_ids": canon_document,
    "citations": canon_document,
    "reasons": canon_document,
    "signals": canon_document,
}


def _converters(fields: Sequence[str]) -> tuple[tuple[int, Callable[[Any], Any]], ...]:
    return tuple((i, _CONVERT[name]) for i, name in enumerate(fields) if name in _CONVERT)


_CONVERTERS = {
    f.name: (_converters(f.fields), _converters(f.child_fields)) for f in FORMATS.values()
}


def canonical_values(
    values: Sequence[Any], converters: Iterable[tuple[int, Callable[[Any], Any]]]
) -> list[Scalar]:
    out = list(values)
    for i, convert in converters:
        out[i] = convert(out[i])
    return out


def canonical_record(
    record_format: RecordFormat,
    row: Mapping[str, Any],
    children: Iterable[Mapping[str, Any]],
) -> tuple[list[Scalar], list[list[Scalar]]]:
    """A record's canonical field values and child rows, from rows as written (dicts)."""
    own, child = _CONVERTERS[record_format.name]
    values = canonical_values([row[f] for f in record_format.fields], own)
    rows = [canonical_values([c[f] for f in record_format.child_fields], child) for c in children]
    return values, rows


def digest_of(
    record_format: RecordFormat, row: Mapping[str, Any], children: Iterable[Mapping[str, Any]]
) -> str:
    values, rows = canonical_record(record_format, row, children)
    return record_digest(record_format, values, rows)


# ------------------------------------------------------------------ reading back

_PARENT = {INVOCATION: ("tool_invocation", "invocation_evidence", "invocation_id", "rank"),
           ANSWER_CHECK: ("answer_check", "claim_check", "check_id", "claim_index")}  # fmt: skip


def _scope(session: bool) -> str:
    return " AND c.session_id = :session" if session else ""


def read_records(
    conn: Connection,
    kind: str,
    low: int,
    high: int,
    session_id: str | None = None,
) -> dict[int, tuple[list[Scalar], list[list[Scalar]]]]:
    """The records of ``kind`` chained at positions ``low..high`` (of ``session_id``),
    as canonical values, by position; a record no longer stored is absent."""
    record_format = FORMAT_OF_KIND[kind]
    table, child_table, parent_key, order = _PARENT[kind]
    own, child = _CONVERTERS[record_format.name]
    params: dict[str, Any] = {"low": low, "high": high, "kind": kind}
    if session_id is not None:
        params["session"] = session_id
    columns = ", ".join(f"t.{name}" for name in record_format.fields)
    parents = conn.execute(
        text(
            f"SELECT c.position, {columns} FROM audit_chain c JOIN {table} t "
            f"ON t.id = c.record_id WHERE c.position BETWEEN :low AND :high "
            f"AND c.kind = :kind{_scope(session_id is not None)}"
        ),
        params,
    ).all()
    found: dict[int, tuple[list[Scalar], list[list[Scalar]]]] = {}
    for row in parents:
        values = list(row)
        position = values.pop(0)
        for i, convert in own:
            values[i] = convert(values[i])
        found[int(position)] = (values, [])
    if not found:
        return found
    child_columns = ", ".join(f"e.{name}" for name in record_format.child_fields)
    rows = conn.execute(
        text(
            f"SELECT c.position, {child_columns} FROM audit_chain c JOIN {child_table} e "
            f"ON e.{parent_key} = c.record_id WHERE c.position BETWEEN :low AND :high "
            f"AND c.kind = :kind{_scope(session_id is not None)} ORDER BY c.position, e.{order}"
        ),
        params,
    ).all()
    for row in rows:
        values = list(row)
        position = int(values.pop(0))
        for i, convert in child:
            values[i] = convert(values[i])
        entry = found.get(position)
        if entry is not None:
            entry[1].append(values)
    return found


def stored_records(
    conn: Connection, low: int, high: int, session_id: str | None = None
) -> dict[int, StoredRecord]:
    """What the store holds now for the entries at ``low..high``: each record's digest
    (recomputed) and seq, by position."""
    out: dict[int, StoredRecord] = {}
    for kind, record_format in FORMAT_OF_KIND.items():
        seq_index = record_format.fields.index("seq") if "seq" in record_format.fields else None
        for position, (values, children) in read_records(conn, kind, low, high, session_id).items():
            seq = values[seq_index] if seq_index is not None else None
            out[position] = StoredRecord(
                record_digest(record_format, values, children),
                seq if isinstance(seq, int) else None,
            )
    return out


def unchained_records(conn: Connection, limit: int = 5) -> list[tuple[str, str, str | None]]:
    """Records (and child rows) the chain does not hold: (kind, id, session) — rows put
    in behind the store's back."""
    found: list[tuple[str, str, str | None]] = []
    for kind, (table, child_table, parent_key, _) in _PARENT.items():
        for row in conn.execute(
            text(
                f"SELECT t.id, t.session_id FROM {table} t WHERE NOT EXISTS "
                f"(SELECT 1 FROM audit_chain c WHERE c.record_id = t.id) LIMIT {int(limit)}"
            )
        ):
            found.append((kind, _id_text(row[0]), row[1]))
        for row in conn.execute(
            text(
                f"SELECT e.{parent_key} FROM {child_table} e WHERE NOT EXISTS "
                f"(SELECT 1 FROM audit_chain c WHERE c.record_id = e.{parent_key}) "
                f"LIMIT {int(limit)}"
            )
        ):
            found.append((f"{kind} child row", _id_text(row[0]), None))
    return found


def _id_text(value: Any) -> str:
    if isinstance(value, uuid.UUID):
        return str(value)
    try:
        return str(uuid.UUID(str(value)))
    except ValueError:
        return str(value)
