"""ToolInvocation <-> plain JSON, for the spool file; and value clean-up before storage.

``clean_invocation`` makes a record storable everywhere: NUL characters (PostgreSQL text
and JSONB reject them) become U+FFFD, non-finite floats in ``retrieval_details`` become
null, anything that is not JSON becomes its ``str()``, and the details carry a version.
"""

from __future__ import annotations

import math
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


def _clean_text(value: str) -> str:
    return value.replace("\x00", _REPLACEMENT) if "\x00" in value else value


def clean_json(value: object, depth: int = 0) -> Any:
    """A JSON-safe copy of ``value`` (see the module docstring)."""
    if depth > _MAX_DEPTH:
        return _clean_text(str(value))
    if value is None or isinstance(value, bool | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, str):
        return _clean_text(value)
    if isinstance(value, Mapping):
        return {_clean_text(str(k)): clean_json(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [clean_json(v, depth + 1) for v in value]
    return _clean_text(str(value))


def _utc(at: datetime) -> datetime:
    return at.replace(tzinfo=UTC) if at.tzinfo is None else at.astimezone(UTC)


def clean_invocation(invocation: ToolInvocation) -> ToolInvocation:
    details = clean_json(dict(invocation.retrieval_details))
    details.setdefault("version", RETRIEVAL_DETAILS_VERSION)

    def text(value: str | None) -> str | None:
        return None if value is None else _clean_text(value)

    return replace(
        invocation,
        id=invocation.id.lower(),
        started_at=_utc(invocation.started_at),
        query=_clean_text(invocation.query),
        error_message=text(invocation.error_message),
        filter_applied=text(invocation.filter_applied),
        retrieval_details=details,
        evidence=tuple(
            replace(e, source=_clean_text(e.source), document_id=_clean_text(e.document_id))
            for e in invocation.evidence
        ),
    )


def to_json(invocation: ToolInvocation) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in fields(ToolInvocation):
        value = getattr(invocation, f.name)
        if f.name == "started_at":
            value = _utc(value).isoformat()
        elif f.name == "retrieval_details":
            value = clean_json(dict(value))
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
