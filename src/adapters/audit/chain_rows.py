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

import json
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import orjson
from sqlalchemy import Connection, text
from sqlalchemy.exc import DBAPIError

from lookup_knowledge.domain.trail import (
    ANSWER_CHECK_FORMAT,
    FORMATS,
    INVOCATION_FORMAT,
    RecordFormat,
    Scalar,
    StoredRecord,
    canonical_document,
    canonical_json,
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


def _fast(fields: Sequence[str], sqlite: bool) -> tuple[tuple[int, Callable[[Any], Any]], ...]:
    """The fast path's conversions. SQLite's raw values are canonical as stored but for a
    JSON document that is no text (a tamperer's number); PostgreSQL's UUIDs, times and
    booleans are converted, its JSON documents come as text (``canonical_document_text``)."""
    out: list[tuple[int, Callable[[Any], Any]]] = []
    for i, name in enumerate(fields):
        convert = _CONVERT.get(name)
        if convert is canon_document:
            out.append((i, canon_document if sqlite else canonical_document_text))
        elif convert is not None and not sqlite:
            out.append((i, convert))
    return tuple(out)


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
    (recomputed) and seq, by position (``digest_records(fetch_records(...))``)."""
    return digest_records(fetch_records(conn, low, high, session_id))


Fetched = list[tuple[RecordFormat, bool, list[Any], list[Any]]]


def fetch_records(conn: Connection, low: int, high: int, session_id: str | None = None) -> Fetched:
    """The records chained at ``low..high`` (of ``session_id``) and their child rows, as
    the driver returns them: per kind one query for the records and one for their child
    rows (in position order), through the driver's own cursor (tuples, no result
    processing). ``digest_records`` hashes them (it needs no connection: the verifier
    runs it beside the next page's queries). On PostgreSQL a JSON document comes as its
    text (psycopg would parse it), made canonical by ``canonical_document_text``; SQLite's
    raw values are canonical as stored (its JSON documents are hashed as the stored
    text)."""
    sqlite = conn.dialect.name == "sqlite"
    fetched: Fetched = []
    for kind, record_format in FORMAT_OF_KIND.items():
        table, child_table, parent_key, order = _PARENT[kind]
        scope, params = _fast_scope(sqlite, kind, low, high, session_id)
        columns = _select_list("t", record_format.fields, record_format.documents, sqlite)
        parents = _driver_rows(
            conn,
            f"SELECT c.position, {columns} FROM audit_chain c JOIN {table} t "
            f"ON t.id = c.record_id WHERE {scope}",
            params,
        )
        if not parents:
            continue
        child_columns = _select_list(
            "e", record_format.child_fields, record_format.child_documents, sqlite
        )
        children = _driver_rows(
            conn,
            f"SELECT c.position, {child_columns} FROM audit_chain c JOIN {child_table} e "
            f"ON e.{parent_key} = c.record_id WHERE {scope} ORDER BY c.position, e.{order}",
            params,
        )
        fetched.append((record_format, sqlite, parents, children))
    return fetched


def digest_records(fetched: Fetched) -> dict[int, StoredRecord]:
    """Each fetched record's digest (``record_digest``, serialised by ``fast_json``) and
    seq, by position."""
    out: dict[int, StoredRecord] = {}
    for record_format, sqlite, parents, child_rows in fetched:
        own, child = _FAST_CONVERTERS[sqlite][record_format.name]
        seq_index = record_format.fields.index("seq") if "seq" in record_format.fields else -1
        children: dict[int, list[Sequence[Any]]] = {}
        for row in child_rows:
            values: Sequence[Any] = row[1:]
            if child:
                values = canonical_values(values, child)
            rows_of = children.get(row[0])
            if rows_of is None:
                children[row[0]] = [values]
            else:
                rows_of.append(values)
        for row in parents:
            position = row[0]
            values = row[1:]
            if own:
                values = canonical_values(values, own)
            seq = values[seq_index] if seq_index >= 0 else None
            out[int(position)] = StoredRecord(
                record_digest(record_format, values, children.get(position, ()), fast_json),
                seq if isinstance(seq, int) else None,
            )
    return out


def _select_list(alias: str, fields: Sequence[str], documents: Sequence[str], sqlite: bool) -> str:
    """The columns; on PostgreSQL a JSON document as its text (psycopg would parse it)."""
    return ", ".join(
        f"{alias}.{name}::text" if not sqlite and name in documents else f"{alias}.{name}"
        for name in fields
    )


def _fast_scope(
    sqlite: bool, kind: str, low: int, high: int, session_id: str | None
) -> tuple[str, tuple[Any, ...]]:
    mark = "?" if sqlite else "%s"
    scope = f"c.position BETWEEN {mark} AND {mark} AND c.kind = {mark}"
    if session_id is None:
        return scope, (low, high, kind)
    return f"{scope} AND c.session_id = {mark}", (low, high, kind, session_id)


def _driver_rows(conn: Connection, statement: str, params: tuple[Any, ...]) -> list[Any]:
    """Rows as the driver's cursor returns them (tuples), in ``conn``'s transaction; a
    driver error is raised as SQLAlchemy's (``translate_query`` takes it from there)."""
    raw = conn.connection.driver_connection
    assert raw is not None
    cursor = raw.cursor()
    try:
        cursor.execute(statement, params)
        return list(cursor.fetchall())
    except Exception as error:
        dbapi = conn.dialect.loaded_dbapi
        if isinstance(error, dbapi.Error):
            raise DBAPIError.instance(statement, params, error, dbapi.Error) from error
        raise
    finally:
        cursor.close()


def canonical_document_text(value: Any) -> Any:
    """A JSON document PostgreSQL gives back as text (``jsonb::text``) in its canonical
    form: what ``canonical_document`` makes of it parsed, by orjson (~10x faster). The
    standard library where orjson would write otherwise (a number in exponent notation,
    ``-0.0``) or refuses (an integer beyond 64 bits, deep nesting)."""
    if not isinstance(value, str):
        return canon_document(value)
    try:
        out = orjson.dumps(orjson.loads(value), option=orjson.OPT_SORT_KEYS)
    except (orjson.JSONDecodeError, orjson.JSONEncodeError):
        return _slow_document(value)
    if odd_numbers(out):
        return _slow_document(value)
    return out.decode("utf-8")


def odd_numbers(out: bytes) -> bool:
    """Whether orjson's text may hold a number the standard library writes otherwise:
    below 1e-4 (orjson ``0.00001``, ``1e-6``; Python ``1e-05``, ``1e-06``), from 1e16 on
    (``canonical_document`` writes the whole number), ``-0.0`` (written ``0.0``). A
    string holding such characters only takes the slow path."""
    if b"0.0000" in out:
        return True
    for mark in (b"e-", b"e+", b"-0.0"):
        at = out.find(mark)
        while at >= 0:
            if mark == b"-0.0":
                after = out[at + 4 : at + 5]
                if not after.isdigit():
                    return True
            elif at > 0 and out[at - 1 : at].isdigit():
                return True
            at = out.find(mark, at + 2)
    return False


def fast_json(value: object) -> bytes:
    """``canonical_json(value)`` by orjson (~10x faster: the standard library escapes a
    string character by character), for what a record digest serialises: a list of
    scalars, or of lists of scalars. orjson writes two kinds of value otherwise than the
    standard library: a float below 1e-4 in magnitude (``0.00001``, ``1e-7``; Python
    ``1e-05``, ``1e-07``) and NaN or infinity (``null``). Output that may hold one (the
    text ``0.0000``, a digit followed by ``e-``, more ``null`` than the value holds
    None) is made by ``canonical_json`` instead; so is what orjson refuses (a lone
    surrogate, an integer beyond 64 bits, bytes). Text that merely looks like that
    takes the slow path too, which is harmless."""
    try:
        out = orjson.dumps(value)
    except orjson.JSONEncodeError:
        return canonical_json(value)
    if b"0.0000" in out or _small_exponent(out) or out.count(b"null") != _nones(value):
        return canonical_json(value)
    return out


_ROWS = frozenset({list, tuple})


def _small_exponent(out: bytes) -> bool:
    at = out.find(b"e-")
    while at > 0:
        if out[at - 1 : at].isdigit():
            return True
        at = out.find(b"e-", at + 2)
    return False


def _nones(value: object) -> int:
    """The None values in a list, and in the lists it holds (a None deeper counts not:
    more ``null`` in the output than counted only sends it the slow way)."""
    if not isinstance(value, list | tuple):
        return 1 if value is None else 0
    count = value.count(None)
    if _ROWS.isdisjoint(map(type, value)):
        return count
    return count + sum(int(v.count(None)) for v in value if type(v) in _ROWS)


def _slow_document(value: str) -> Any:
    try:
        return canonical_document(json.loads(value))
    except ValueError:  # not JSON at all: hashed as itself
        return value


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


_FAST_CONVERTERS = {
    sqlite: {
        f.name: (_fast(f.fields, sqlite), _fast(f.child_fields, sqlite)) for f in FORMATS.values()
    }
    for sqlite in (True, False)
}
