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

import math
import re
from collections.abc import Mapping
from dataclasses import fields, replace
from datetime import UTC, datetime
from typing import Any

from lookup_knowledge.application.ports import (
    RETRIEVAL_DETAILS_VERSION,
    EvidenceRecord,
    ToolInvocation,
)

_REPLACEMENT = "\ufffd"
_MAX_DEPTH = 64
_SURROGATE = re.compile("[\ud800-\udfff]")


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


def _utc(at: datetime) -> datetime:
    return at.replace(tzinfo=UTC) if at.tzinfo is None else at.astimezone(UTC)


_INVOCATION_TEXT = tuple(
    f.name for f in fields(ToolInvocation) if f.name not in {"id", "retrieval_details", "evidence"}
)
_EVIDENCE_TEXT = tuple(f.name for f in fields(EvidenceRecord))


def _clean_fields(record: Any, names: tuple[str, ...]) -> dict[str, Any]:
    """The cleaned value of every text field of ``record`` that cleaning changes."""
    changes: dict[str, Any] = {}
    for name in names:
        value = getattr(record, name)
        if isinstance(value, str):
            cleaned = clean_text(value)
            if cleaned != value:
                changes[name] = cleaned
    return changes


def clean_invocation(invocation: ToolInvocation) -> ToolInvocation:
    """A storable copy of a (validated) record: every text field cleaned, times in UTC."""
    details = clean_json(dict(invocation.retrieval_details))
    details.setdefault("version", RETRIEVAL_DETAILS_VERSION)
    changes = _clean_fields(invocation, _INVOCATION_TEXT)
    return replace(
        invocation,
        **changes,
        id=invocation.id.lower(),
        started_at=_utc(invocation.started_at),
        retrieval_details=details,
        evidence=tuple(replace(e, **_clean_fields(e, _EVIDENCE_TEXT)) for e in invocation.evidence),
    )


def to_json(invocation: ToolInvocation, *, cleaned: bool = False) -> dict[str, Any]:
    """The record as plain JSON values; ``cleaned``: it comes from ``clean_invocation``,
    whose retrieval details are JSON-safe already (not walked a second time)."""
    out: dict[str, Any] = {}
    for f in fields(ToolInvocation):
        value = getattr(invocation, f.name)
        if f.name == "started_at":
            value = _utc(value).isoformat()
        elif f.name == "retrieval_details":
            value = dict(value) if cleaned else clean_json(dict(value))
        elif f.name == "evidence":
            value = [{g.name: getattr(e, g.name) for g in fields(EvidenceRecord)} for e in value]
        out[f.name] = value
    return out


def from_json(data: Mapping[str, Any]) -> ToolInvocation:
    """The inverse of ``to_json``; raises ``KeyError``/``TypeError``/``ValueError`` on junk."""
    known = {f.name for f in fields(ToolInvocation)}
    kwargs = {k: v for k, v in data.items() if k in known}
    kwargs["started_at"] = _utc(datetime.fromisoformat(str(data["started_at"])))
    evidence_fields = {f.name for f in fields(EvidenceRecord)}
    kwargs["evidence"] = tuple(
        EvidenceRecord(**{k: v for k, v in item.items() if k in evidence_fields})
        for item in data.get("evidence", ())
    )
    invocation = ToolInvocation(**kwargs)
    if not isinstance(invocation.id, str) or not isinstance(invocation.session_id, str):
        raise TypeError("id and session_id must be strings")
    return invocation


def without_shown_text(invocation: ToolInvocation) -> ToolInvocation:
    """The record with only the hash of each shown block (``audit.keep-shown-text`` false)."""
    if all(e.shown_text is None for e in invocation.evidence):
        return invocation
    return replace(
        invocation, evidence=tuple(replace(e, shown_text=None) for e in invocation.evidence)
    )
