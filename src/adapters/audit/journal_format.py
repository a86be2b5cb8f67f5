"""The audit journal's line format and its in-memory entries.

Each line is ``<crc32 hex> <json>``; the checksum catches a line damaged on disk and a
line cut short by a crash mid-write. The document names the database the record is for
(``db``: ``database_key``; absent in lines written before journals were bound).
"""

from __future__ import annotations

import json
import zlib
from dataclasses import dataclass
from enum import StrEnum

from lookup_knowledge.adapters.audit.codec import ascii_json, from_json, to_json
from lookup_knowledge.application.ports import ToolInvocation
from lookup_knowledge.domain.errors import AuditError

FORMAT_VERSION = 1


class EntryState(StrEnum):
    PENDING = "pending"
    STORED = "stored"  # in the database (written now, or found there already)
    REJECTED = "rejected"  # set aside in rejected.jsonl


@dataclass(slots=True, eq=False)
class JournalEntry:
    line: str
    invocation: ToolInvocation
    state: EntryState = EntryState.PENDING
    at: float = 0.0  # when it was journaled here (the journal's clock)

    @property
    def session_id(self) -> str:
        return self.invocation.session_id


class JournalClosed(AuditError):
    """An append to a journal that was closed meanwhile (the recorder is shutting down)."""


def encode(
    invocation: ToolInvocation, *, cleaned: bool = False, database: str | None = None
) -> str:
    """One journal line; ``cleaned``: the record comes from ``clean_invocation``;
    ``database``: the key of the database it is for (``database_key``)."""
    document: dict[str, object] = {"v": FORMAT_VERSION}
    if database is not None:
        document["db"] = database
    document["invocation"] = to_json(invocation, cleaned=cleaned)
    body = ascii_json(document)
    return f"{checksum(body.encode('ascii')):08x} {body}\n"


#: ``zlib.crc32`` releases the GIL for more than 5 KiB, and a thread waiting for it (the
#: journal's mover, busy in Python) then keeps it for up to the switch interval (5 ms)
#: before the lookup thread gets it back; in pieces below that size it is not released.
_PIECE = 4096


def checksum(raw: bytes) -> int:
    """``zlib.crc32(raw)``, computed without releasing the GIL (see ``_PIECE``)."""
    if len(raw) <= _PIECE:
        return zlib.crc32(raw)
    view = memoryview(raw)
    crc = 0
    for start in range(0, len(raw), _PIECE):
        crc = zlib.crc32(view[start : start + _PIECE], crc)
    return crc


def decode(line: str) -> ToolInvocation:
    """Raises ``ValueError`` with the reason when the line is not a sound record."""
    return decode_bound(line)[0]


def decode_bound(line: str) -> tuple[ToolInvocation, str | None]:
    """The record and the key of the database it is for (None: written before the
    binding); ``ValueError`` with the reason when the line is not a sound record."""
    text = line.rstrip("\n")
    if not line.endswith("\n"):
        raise ValueError("truncated line (no line end)")
    crc, sep, body = text.partition(" ")
    if not sep or len(crc) != 8:
        raise ValueError("no checksum")
    try:
        expected = int(crc, 16)
        raw = body.encode("ascii")
    except (ValueError, UnicodeEncodeError):
        raise ValueError("malformed checksum or non-ASCII body") from None
    if checksum(raw) != expected:
        raise ValueError("checksum mismatch")
    try:
        data = json.loads(body)
        if not isinstance(data, dict) or data.get("v") != FORMAT_VERSION:
            raise ValueError(
                f"unknown journal format {data.get('v') if isinstance(data, dict) else data!r}"
            )
        invocation = from_json(data["invocation"])  # validates on construction
        database = data.get("db")
        if database is not None and not isinstance(database, str):
            raise ValueError(f"malformed database key {database!r}")
    except (KeyError, TypeError, ValueError, AuditError) as error:
        raise ValueError(f"undecodable record: {error}") from None
    return invocation, database


def session_needle(session_id: str) -> str:
    """How ``encode`` writes the session id: a cheap filter before decoding a line."""
    return '"session_id":' + json.dumps(session_id, ensure_ascii=True)
