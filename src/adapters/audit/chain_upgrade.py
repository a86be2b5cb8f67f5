"""Revision 0007's upgrade: every record stored before the trail existed is chained, oldest
first, each entry marked ``chained_at_upgrade`` (proven unchanged since the upgrade)."""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import Connection, bindparam, insert, text, update

from lookup_knowledge.adapters.audit.chain import CH, HEAD_ID, H
from lookup_knowledge.adapters.audit.chain_rows import (
    ANSWER_CHECK,
    INVOCATION,
    canon_time,
    stored_records,
)
from lookup_knowledge.domain.trail import GENESIS, make_entry


def chain_existing_records(conn: Connection, *, chunk: int = 2000) -> int:
    """Chain every stored record (revision 0007): invocations by start time and answer
    checks by creation time, merged, oldest first; each entry ``chained_at_upgrade``.
    Returns how many."""
    keys: list[tuple[str, int, str, str, str, int | None]] = []
    for r in conn.execute(text("SELECT id, session_id, seq, started_at FROM tool_invocation")):
        at = str(canon_time(r[3]))
        keys.append((at, 0, _uuid_text(r[0]), INVOCATION, str(r[1]), int(r[2])))
    for r in conn.execute(text("SELECT id, session_id, created_at FROM answer_check")):
        at = str(canon_time(r[2]))
        keys.append((at, 1, _uuid_text(r[0]), ANSWER_CHECK, str(r[1]), None))
    keys.sort()
    placeholder: list[dict[str, Any]] = [
        {
            "position": position,
            "kind": kind,
            "record_id": uuid.UUID(record_id),
            "session_id": session_id,
            "seq": seq,
            "record_hash": "",
            "prev_hash": "",
            "entry_hash": "",
            "recorded_at": at,
            "chained_at_upgrade": True,
        }
        for position, (at, _, record_id, kind, session_id, seq) in enumerate(keys, 1)
    ]
    for start in range(0, len(placeholder), chunk):
        conn.execute(insert(CH), placeholder[start : start + chunk])
    head = GENESIS
    fill = (
        update(CH)
        .where(CH.c.position == bindparam("p"))
        .values(record_hash=bindparam("r"), prev_hash=bindparam("v"), entry_hash=bindparam("e"))
    )
    for start in range(0, len(placeholder), chunk):
        pending = placeholder[start : start + chunk]
        stored = stored_records(conn, pending[0]["position"], pending[-1]["position"])
        changes = []
        for row in pending:
            entry = make_entry(
                row["position"],
                row["kind"],
                str(row["record_id"]),
                row["session_id"],
                row["seq"],
                stored[row["position"]].digest,
                head,
                row["recorded_at"],
                chained_at_upgrade=True,
            )
            head = entry.entry_hash
            changes.append(
                {"p": entry.position, "r": entry.record_hash, "v": entry.prev_hash, "e": head}
            )
        conn.execute(fill, changes)
    conn.execute(insert(H).values(id=HEAD_ID, position=len(placeholder), entry_hash=head))
    return len(placeholder)


def _uuid_text(value: Any) -> str:
    return str(value if isinstance(value, uuid.UUID) else uuid.UUID(str(value)))
