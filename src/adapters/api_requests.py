"""What a host asks ``LookupApp`` for, as values: one lookup, one ingest.

Every entry point (CLI, REST, MCP, the framework adapters, the local operator) builds
a ``LookupRequest`` or an ``IngestRequest``; the keyword form
``app.lookup(query, session_id=...)`` builds the same value, so a new field is added
here once (and where an entry point reads it), not to every method of the facade.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TypedDict

from lookup_knowledge.application.ingest import IngestProgress
from lookup_knowledge.application.lookup import LookupOptions
from lookup_knowledge.domain.access import DocumentAccess, Principal
from lookup_knowledge.domain.errors import InvalidInputError
from lookup_knowledge.domain.model import SearchMode

#: What ``ingest`` reads files and folders from.
IngestPaths = Sequence[str | Path] | str | Path


@dataclass(frozen=True, slots=True)
class LookupRequest:
    """One ``lookup_knowledge(query)`` call as a host makes it.

    ``principal`` is who the lookup is for (tenant, user, groups), from the host's own
    authentication, never from the agent; under ``access.mode=enforced`` a lookup
    without one sees only documents marked public. ``owned_session``: the session must
    be ``principal``'s own (a new one becomes its own); another principal's session
    raises ``AccessDenied`` before anything is searched (the servers ask this for agent
    callers). ``input_error``: the caller found the call's input bad; the call is
    recorded as that ``invalid_input`` result without searching."""

    query: str
    session_id: str
    step_id: str | None = None
    mode: SearchMode | str | None = None
    category: str | None = None
    tool_call_id: str | None = None
    principal: Principal | None = None
    owned_session: bool = False
    input_error: str | None = None

    def options(self) -> LookupOptions:
        return LookupOptions(
            mode=search_mode(self.mode),
            category=self.category,
            tool_call_id=self.tool_call_id,
            principal=self.principal,
            input_error=self.input_error,
        )


class LookupFields(TypedDict, total=False):
    """``LookupRequest``'s fields after the query, as keywords (``session_id`` is
    required unless a whole request is passed)."""

    session_id: str
    step_id: str | None
    mode: SearchMode | str | None
    category: str | None
    tool_call_id: str | None
    principal: Principal | None
    owned_session: bool
    input_error: str | None


def lookup_request(query: str | LookupRequest, fields: LookupFields) -> LookupRequest:
    """The request a facade call names: the one passed (with ``fields`` replaced), or
    one made of the query and ``fields``."""
    if isinstance(query, LookupRequest):
        return replace(query, **fields) if fields else query
    if "session_id" not in fields:
        raise TypeError("a lookup needs session_id")
    return LookupRequest(query, **fields)


@dataclass(frozen=True, slots=True)
class IngestRequest:
    """One ingest of Markdown / text / HTML files and folders; idempotent per content
    hash.

    Every document belongs to one source (``source_name``, default: the ingest root's
    folder name; a folder inside an ingested source joins it), whose name prefixes its
    doc_ids. ``sync`` deletes only that source's documents that are gone; a document
    another source owns is never replaced (``IngestConflict``). ``dry_run`` writes
    nothing and returns the plan (``report.plan``). ``tenant``, ``allowed_groups`` and
    ``public`` are the access metadata of every document that does not set its own in
    front matter (see ``access.mode``)."""

    paths: IngestPaths
    category: str | None = None
    doc_id: str | None = None
    root: str | Path | None = None
    sync: bool = False
    progress: Callable[[IngestProgress], None] | None = None
    source_name: str | None = None
    dry_run: bool = False
    tenant: str | None = None
    allowed_groups: Sequence[str] = ()
    public: bool = False

    def access(self) -> DocumentAccess:
        return document_access(self.tenant, self.allowed_groups, self.public)


class IngestFields(TypedDict, total=False):
    """``IngestRequest``'s fields after the paths, as keywords."""

    category: str | None
    doc_id: str | None
    root: str | Path | None
    sync: bool
    progress: Callable[[IngestProgress], None] | None
    source_name: str | None
    dry_run: bool
    tenant: str | None
    allowed_groups: Sequence[str]
    public: bool


def ingest_request(paths: IngestPaths | IngestRequest, fields: IngestFields) -> IngestRequest:
    if isinstance(paths, IngestRequest):
        return replace(paths, **fields) if fields else paths
    return IngestRequest(paths, **fields)


def document_access(
    tenant: str | None, allowed_groups: Sequence[str] = (), public: bool = False
) -> DocumentAccess:
    """The access metadata of ingest arguments (validated: ``InvalidInputError``)."""
    if isinstance(allowed_groups, str):
        raise InvalidInputError("allowed_groups must be a list of group names, not one string")
    if not isinstance(public, bool):
        raise InvalidInputError(f"public must be True or False, not {public!r}")
    return DocumentAccess(tenant or "", frozenset(allowed_groups), public)


def search_mode(mode: SearchMode | str | None) -> SearchMode | None:
    if mode is None or isinstance(mode, SearchMode):
        return mode
    if not isinstance(mode, str):
        raise InvalidInputError(
            f"mode must be one of {', '.join(m.value for m in SearchMode)}; got {mode!r}"
        )
    try:
        return SearchMode(mode.lower())
    except ValueError:
        raise InvalidInputError(
            f"unknown search mode {mode!r}; use one of: " + ", ".join(m.value for m in SearchMode)
        ) from None
