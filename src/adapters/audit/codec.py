"""ToolInvocation <-> plain JSON, for the journal file; and value clean-up before storage.

``clean_invocation`` makes a record storable everywhere. In every text it stores (ids,
query, error message, sources, document ids, category, the keys and strings of
``retrieval_details``) a NUL character (PostgreSQL text and JSONB reject it) becomes U+FFFD,
and so does a lone surrogate (no UTF-8 encoder accepts it; a surrogate *pair* becomes the
character it encodes). Other control characters are kept: every store accepts them, and a
query's newlines and tabs are part of what the agent asked. Non-finite floats in
``retrieval_details`` become null, anything that is not JSON becomes its ``str()``, and the
details carry a version. Cleaning never makes a text longer, so a record that passed
``validate_invocation`` still does.
"""

from __future__ import annotations

import codecs
import json
import math
import re
from collections.abc import Mapping
from dataclasses import fields, replace
from datetime import UTC, datetime
from json.encoder import encode_basestring_ascii
from operator import attrgetter
from typing import Any, TypeVar

import orjson

from lookup_knowledge.application.ports import (
    RETRIEVAL_DETAILS_VERSION,
    EvidenceRecord,
    ToolInvocation,
)

_REPLACEMENT = "\ufffd"
_MAX_DEPTH = 64
_SURROGATE = re.compile("[\ud800-\udfff]")
_Record = TypeVar("_Record", ToolInvocation, EvidenceRecord)


def clean_text(value: str) -> str:
    """``value`` with NUL and lone surrogates replaced by U+FFFD (see the module docstring)."""
    if "\x00" in value:
        value = value.replace("\x00", _REPLACEMENT)
    if not value.isascii() and _SURROGATE.search(value):
        # Pairs become the character they encode; a lone half becomes U+FFFD.
        value = value.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return value


def clean_json(value: object, depth: int = 0) -> Any:
    """A JSON-safe copy of ``value`` (see the module docstring).

    Runs on every record's retrieval details (~10 KB of nested trace), so the common
    types are tested by identity first; subclasses take the general path below."""
    if depth > _MAX_DEPTH:
        return clean_text(str(value))
    kind = type(value)
    if kind is str:
        return clean_text(value)  # type: ignore[arg-type]
    if kind is int or kind is bool or value is None:
        return value
    if kind is dict:
        return {
            (k if type(k) is str and k.isascii() and "\x00" not in k else clean_text(str(k))): (
                clean_json(v, depth + 1)
            )
            for k, v in value.items()  # type: ignore[attr-defined]
        }
    if kind is list or kind is tuple:
        return [clean_json(v, depth + 1) for v in value]  # type: ignore[attr-defined]
    if isinstance(value, bool | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, Mapping):
        return {clean_text(str(k)): clean_json(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [clean_json(v, depth + 1) for v in value]
    return clean_text(str(value))


_PLAIN = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS
_PLAIN |= orjson.OPT_PASSTHROUGH_SUBCLASS | orjson.OPT_INDENT_2
# orjson's indented text puts every value of a non-empty container on a line of its own,
# two spaces a level in; a string's newline is escaped, so a newline starts a line only
# there. A value inside more than ``_MAX_DEPTH`` containers starts a line with this.
_TOO_DEEP = b"\n" + b"  " * (_MAX_DEPTH + 1)


def _refuse(value: object) -> object:
    raise TypeError  # not a plain JSON value: ``clean_json`` decides what it becomes


def clean_details(details: dict[str, Any]) -> Any:
    """``clean_json(details)``, by an orjson round trip (C speed) when that gives the
    same copy: a document of plain JSON values (str keys; str, int, float, bool, None,
    dict, list) with no NUL, no lone surrogate, no non-finite float and no value deeper
    than ``_MAX_DEPTH``. Anything else (a tuple, a subclass, a UUID, an enum, a value
    orjson refuses or writes otherwise) makes the copy differ or the dump fail: then
    ``clean_json`` walks it."""
    try:
        out = orjson.dumps(details, option=_PLAIN, default=_refuse)
    except (orjson.JSONEncodeError, TypeError):
        return clean_json(details)
    if b"\\u0000" in out or too_deep(out):
        return clean_json(details)
    copy = orjson.loads(out)
    if copy != details:  # an enum (orjson writes its value, the rules its str()) ...
        return clean_json(details)
    return copy


def too_deep(out: bytes) -> bool:
    """Whether orjson's indented text ``out`` (``OPT_INDENT_2``) holds a value more than
    ``_MAX_DEPTH`` containers down (which ``clean_json`` turns into text): one substring
    search, where counting the brackets outside the strings took a split at every quote."""
    return _TOO_DEEP in out


def _utc(at: datetime) -> datetime:
    return at.replace(tzinfo=UTC) if at.tzinfo is None else at.astimezone(UTC)


_INVOCATION_FIELDS = tuple(f.name for f in fields(ToolInvocation))
_EVIDENCE_FIELDS = tuple(f.name for f in fields(EvidenceRecord))
_INVOCATION_TEXT = tuple(
    name for name in _INVOCATION_FIELDS if name not in {"id", "retrieval_details", "evidence"}
)
_invocation_text = attrgetter(*_INVOCATION_TEXT)
_evidence_values = attrgetter(*_EVIDENCE_FIELDS)


def _clean_fields(record: Any, names: tuple[str, ...], values: tuple[Any, ...]) -> dict[str, Any]:
    """The cleaned value of every text field of ``record`` that cleaning changes
    (``values``: the fields ``names`` of ``record``). One look at all its texts at once
    first: most records have nothing to clean."""
    texts = [v for v in values if isinstance(v, str)]
    if not _needs_cleaning("".join(texts)):
        return {}
    changes: dict[str, Any] = {}
    for name, value in zip(names, values, strict=True):
        if isinstance(value, str):
            cleaned = clean_text(value)
            if cleaned != value:
                changes[name] = cleaned
    return changes


def _needs_cleaning(text: str) -> bool:
    return "\x00" in text or (not text.isascii() and _SURROGATE.search(text) is not None)


def _unchecked_copy(record: _Record, names: tuple[str, ...], changes: dict[str, Any]) -> _Record:
    """``dataclasses.replace(record, **changes)`` without running ``__post_init__``: the
    record passed ``validate_invocation`` when it was made, and cleaning keeps it valid
    (see the module docstring), so it is not validated a second time."""
    copy = object.__new__(type(record))
    for name in names:
        object.__setattr__(copy, name, changes[name] if name in changes else getattr(record, name))
    return copy


def clean_invocation(invocation: ToolInvocation) -> ToolInvocation:
    """A storable copy of a (validated) record: every text field cleaned, times in UTC."""
    details = clean_details(dict(invocation.retrieval_details))
    details.setdefault("version", RETRIEVAL_DETAILS_VERSION)
    changes = _clean_fields(invocation, _INVOCATION_TEXT, _invocation_text(invocation))
    evidence = tuple(
        _unchecked_copy(e, _EVIDENCE_FIELDS, changes_of_e)
        if (changes_of_e := _clean_fields(e, _EVIDENCE_FIELDS, _evidence_values(e)))
        else e  # frozen: shared as it is
        for e in invocation.evidence
    )
    changes.update(
        id=invocation.id.lower(),
        started_at=_utc(invocation.started_at),
        retrieval_details=details,
        evidence=evidence,
    )
    return _unchecked_copy(invocation, _INVOCATION_FIELDS, changes)


def json_bytes(value: object) -> bytes:
    """``value`` as compact UTF-8 JSON, for values that hold JSON types only (a cleaned
    record's). orjson (~10x the standard library's speed; installed with pymilvus), or the
    standard library for what orjson refuses (an integer beyond 64 bits, a subclass)."""
    try:
        return orjson.dumps(value)
    except orjson.JSONEncodeError:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


def ascii_json(value: object) -> str:
    """``value`` as compact JSON with every non-ASCII character escaped (a journal line's
    body). ``value`` holds JSON values only, as a cleaned record does (no non-finite
    float: orjson would write null, the standard library raises ``ValueError``).

    orjson writes UTF-8; non-ASCII characters can only stand inside its strings, so each
    run of them is escaped in place (``\\uXXXX``, a surrogate pair above U+FFFF, as the
    standard library writes them) rather than the whole value encoded a second time."""
    try:
        raw = orjson.dumps(value)
    except orjson.JSONEncodeError:  # a lone surrogate, an integer beyond 64 bits ...
        return json.dumps(value, ensure_ascii=True, separators=(",", ":"), allow_nan=False)
    if raw.isascii():
        return raw.decode("ascii")
    return raw.decode("utf-8").encode("ascii", _JSON_ESCAPE).decode("ascii")


def _json_escapes(error: UnicodeError) -> tuple[str, int]:
    """The ASCII encoder's error handler for ``ascii_json``: the run of characters it
    cannot encode, as the standard library's JSON writer escapes them (3-4x the speed of
    a regex substitution over the text: the encoder finds the runs in C)."""
    if not isinstance(error, UnicodeEncodeError):  # pragma: no cover - only encoding
        raise error
    run = error.object[error.start : error.end]
    return encode_basestring_ascii(run)[1:-1], error.end  # without its quotes


_JSON_ESCAPE = "lookup_knowledge.json-escape"
codecs.register_error(_JSON_ESCAPE, _json_escapes)


def to_json(invocation: ToolInvocation, *, cleaned: bool = False) -> dict[str, Any]:
    """The record as plain JSON values; ``cleaned``: it comes from ``clean_invocation``,
    whose retrieval details are JSON-safe already (not walked a second time)."""
    out = dict(zip(_INVOCATION_FIELDS, _invocation_values(invocation), strict=True))
    out["started_at"] = _utc(invocation.started_at).isoformat()
    details = dict(invocation.retrieval_details)
    out["retrieval_details"] = details if cleaned else clean_json(details)
    out["evidence"] = [
        dict(zip(_EVIDENCE_FIELDS, _evidence_values(e), strict=True)) for e in invocation.evidence
    ]
    return out


def from_json(data: Mapping[str, Any]) -> ToolInvocation:
    """The inverse of ``to_json``; raises ``KeyError``/``TypeError``/``ValueError`` on junk."""
    kwargs = {k: v for k, v in data.items() if k in _INVOCATION_NAMES}
    kwargs["started_at"] = _utc(datetime.fromisoformat(str(data["started_at"])))
    kwargs["evidence"] = tuple(
        EvidenceRecord(**{k: v for k, v in item.items() if k in _EVIDENCE_NAMES})
        for item in data.get("evidence", ())
    )
    invocation = ToolInvocation(**kwargs)
    if not isinstance(invocation.id, str) or not isinstance(invocation.session_id, str):
        raise TypeError("id and session_id must be strings")
    return invocation


_invocation_values = attrgetter(*_INVOCATION_FIELDS)
_INVOCATION_NAMES = frozenset(_INVOCATION_FIELDS)
_EVIDENCE_NAMES = frozenset(_EVIDENCE_FIELDS)


def without_shown_text(invocation: ToolInvocation) -> ToolInvocation:
    """The record with only the hash of each shown block (``audit.keep-shown-text`` false)."""
    if all(e.shown_text is None for e in invocation.evidence):
        return invocation
    return replace(
        invocation, evidence=tuple(replace(e, shown_text=None) for e in invocation.evidence)
    )
