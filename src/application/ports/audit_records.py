"""The audit record contract: what a recorder is given (``ToolInvocation`` and its
``EvidenceRecord`` rows, validated where they are made), what it answers
(``RecordOutcome``), and the writing ports (``ToolInvocationRecorder``, ``AuditSchema``,
``SessionState``).

A ``ToolInvocation`` validates itself when it is made, so every recorder (SQL, journal,
fake) receives only records the SQL store can keep. The limits are shared by every
implementation, so the fake and the SQL store accept and reject exactly the same
records and queries.
"""

from __future__ import annotations

import math
import uuid
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from types import MappingProxyType

from lookup_knowledge.application.tool import (
    MAX_DOCUMENT_ID_CHARS,
    MAX_ID_CHARS,
    MAX_INT,
    TOOL_NAME,
    unstorable_text,
)
from lookup_knowledge.domain.access import AccessMode, validate_access_name
from lookup_knowledge.domain.errors import AuditError, InvalidInputError
from lookup_knowledge.domain.model import InvocationStatus, SearchMode, Traffic

_NO_METADATA: Mapping[str, object] = MappingProxyType({})

# Limits shared by every implementation, so that the fake and the SQL store accept and
# reject exactly the same records and queries.
STATUSES = frozenset(s.value for s in InvocationStatus)


class RecordOutcome(StrEnum):
    COMMITTED = "committed"  # in the database
    # Durably in the local journal; the background writer moves it into the database
    # (readers flush first, so they see it).
    JOURNALED = "journaled"
    # Durably in the local journal while the database is unreachable (or refused it),
    # moved once it is back. (Called SPOOLED, value "spooled", before "spool" was
    # renamed "journal"; it is a Python value only, never on the wire.)
    JOURNALED_OFFLINE = "journaled_offline"
    DISABLED = "disabled"  # recording is switched off by configuration


@dataclass(frozen=True, slots=True)
class EvidenceRecord:
    """One block the agent was shown (in evidenceBlocks, in the context pack, or both)."""

    rank: int
    document_id: str
    doc_id: str | None
    chunk_index: int | None
    source: str
    category: str
    score_before: float
    score_after: float
    projected: bool
    in_context_pack: bool
    content_hash: str
    # The exact text the agent received for this block (its hash is ``content_hash``);
    # None when the store keeps only the hash (``audit.keep-shown-text`` false).
    shown_text: str | None = None
    #: The tenant of the stored row the block came from (its ``DocumentAccess.tenant``;
    #: the row's key is ``storage_key(row_tenant, document_id)``): ``""`` for a row
    #: without a tenant, None when not recorded (records written before audit revision
    #: 0005): readers then try the invocation's principal tenant and the untenanted rows.
    row_tenant: str | None = None


RETRIEVAL_DETAILS_VERSION = 1


@dataclass(frozen=True, slots=True)
class ToolInvocation:
    """Everything the audit store keeps about one ``lookup_knowledge`` call."""

    id: str
    session_id: str
    query: str
    status: str
    started_at: datetime
    duration_ms: float
    step_id: str | None = None
    tool_call_id: str | None = None
    tool_name: str = TOOL_NAME
    error_code: str | None = None
    error_message: str | None = None
    quality_score: float = 0.0
    relevance_level: str = "none"
    retrieval_mode: str = SearchMode.DENSE.value
    filter_applied: str | None = None
    fallback_reason: str | None = None
    retrieve_k: int = 0
    return_n: int = 0
    candidate_count: int = 0
    returned_count: int = 0
    trace_id: str | None = None
    span_id: str | None = None
    retrieval_details: Mapping[str, object] = field(default_factory=lambda: _NO_METADATA)
    evidence: tuple[EvidenceRecord, ...] = ()
    #: production (an agent's call), eval or replay; see ``Traffic``.
    traffic: str = Traffic.PRODUCTION.value
    #: Who the lookup was for (``Principal``: tenant, user, sha256 of the groups; None
    #: without a principal), the access mode in force and the filter it applied.
    principal_tenant: str | None = None
    principal_user: str | None = None
    principal_groups_hash: str | None = None
    access_mode: str = "off"
    access_filter: str | None = None

    def __post_init__(self) -> None:
        # Validated once, where it is made: every recorder (SQL, journal, fake) receives
        # only records the SQL store can keep.
        validate_invocation(self)


class ToolInvocationRecorder(ABC):
    """Persists invocations. ``record`` returns once the record is durable (in the
    store, or in a local journal that is moved into it later).

    It must not raise for a storage failure: it keeps the record in its journal and
    counts the failure. It may raise ``AuditError`` only when even the journal is
    unwritable. ``flush`` is the barrier every reader of the store passes first.
    """

    @abstractmethod
    def record(self, invocation: ToolInvocation) -> RecordOutcome: ...

    @abstractmethod
    def flush(self, session_id: str | None = None, timeout_s: float = 10.0) -> bool:
        """Move pending records into the store; True when none (of that session) remain."""

    @abstractmethod
    def pending_count(self, session_id: str | None = None) -> int: ...

    @abstractmethod
    def failure_count(self) -> int: ...

    def stranded_count(self) -> int:
        """Records in the journal directory written for another audit database, left
        there untouched (reported by the health check); 0 where there is no journal."""
        return 0

    def close(self) -> None:  # noqa: B027 - optional hook, most fakes hold nothing
        """Release resources."""


class AuditSchema(ABC):
    """The audit store's schema version: upgrade it, read where it is."""

    @abstractmethod
    def upgrade(self, revision: str = "head") -> str | None:
        """Migrate to ``revision``; returns the revision the store is at afterwards."""

    @abstractmethod
    def current(self) -> str | None:
        """The revision the store is at (None for an empty store)."""

    @abstractmethod
    def head(self) -> str:
        """The newest revision this version of the package knows."""


class SessionState(ABC):
    """Remembers which domains (categories) a session has retrieved evidence from."""

    @abstractmethod
    def retrieved_domains(self, session_id: str) -> tuple[str, ...]: ...

    @abstractmethod
    def add_retrieved_domains(self, session_id: str, domains: Sequence[str]) -> None: ...


# --------------------------------------------------------------------------- validation


def parse_invocation_id(value: str) -> uuid.UUID:
    """The canonical UUID of an invocation id; ``InvalidInputError`` when malformed."""
    if not isinstance(value, str):
        raise InvalidInputError("an invocation id must be a string")
    try:
        return uuid.UUID(value)
    except ValueError:
        raise InvalidInputError(f"not an invocation id (a UUID expected): {value[:80]!r}") from None


TRAFFIC_KINDS = frozenset(t.value for t in Traffic)
ACCESS_MODES = frozenset(m.value for m in AccessMode)


def validate_invocation(invocation: ToolInvocation) -> None:
    """Reject a record that no store could keep; raises ``AuditError``.

    ``ToolInvocation`` calls it on construction, so a malformed record fails where it is
    made instead of sitting in a journal forever.
    """

    def fail(why: str) -> None:
        raise AuditError(f"invalid tool invocation record {invocation.id!r}: {why}")

    try:
        uuid.UUID(invocation.id)
    except (ValueError, TypeError, AttributeError):
        fail("id is not a UUID")
    if not isinstance(invocation.session_id, str) or not invocation.session_id.strip():
        fail("session_id is empty")
    for name in ("session_id", "step_id", "tool_call_id", "tool_name", "error_code"):
        value = getattr(invocation, name)
        if value is not None and (not isinstance(value, str) or len(value) > MAX_ID_CHARS):
            fail(f"{name} must be a string of at most {MAX_ID_CHARS} characters")
    if invocation.status not in STATUSES:
        fail(f"status must be one of {sorted(STATUSES)}, not {invocation.status!r}")
    if invocation.traffic not in TRAFFIC_KINDS:
        fail(f"traffic must be one of {sorted(TRAFFIC_KINDS)}, not {invocation.traffic!r}")
    if invocation.access_mode not in ACCESS_MODES:
        fail(f"access_mode must be one of {sorted(ACCESS_MODES)}, not {invocation.access_mode!r}")
    for name in ("principal_tenant", "principal_user", "principal_groups_hash"):
        value = getattr(invocation, name)
        if value is not None and (not isinstance(value, str) or len(value) > MAX_ID_CHARS):
            fail(f"{name} must be a string of at most {MAX_ID_CHARS} characters")
    if not isinstance(invocation.started_at, datetime):
        fail("started_at must be a datetime")
    if not math.isfinite(invocation.duration_ms) or invocation.duration_ms < 0:
        fail("duration_ms must be a finite number >= 0")
    for name in ("retrieve_k", "return_n", "candidate_count", "returned_count"):
        if not _is_count(getattr(invocation, name)):
            fail(f"{name} must be a whole number in 0..{MAX_INT}")
    if not isinstance(invocation.quality_score, int | float) or not math.isfinite(
        invocation.quality_score
    ):
        fail("quality_score must be a finite number")
    ranks: set[int] = set()
    for item in invocation.evidence:
        if not _is_count(item.rank):
            fail(f"evidence rank must be a whole number in 0..{MAX_INT}")
        if not all(math.isfinite(s) for s in (item.score_before, item.score_after)):
            fail("evidence scores must be finite numbers")
        if item.rank in ranks:
            fail(f"evidence rank {item.rank} appears twice")
        ranks.add(item.rank)
        problem = evidence_problem(
            item.document_id, item.doc_id, item.chunk_index, item.category, item.source
        ) or row_tenant_problem(item.row_tenant)
        if problem is not None:
            fail(problem)


def evidence_problem(
    document_id: str,
    doc_id: str | None,
    chunk_index: int | None,
    category: str,
    source: str,
) -> str | None:
    """Why one evidence row cannot be recorded exactly as the agent is shown it, or None.

    The one set of limits for every evidence field that reaches the audit store:
    ``validate_invocation`` applies it to records, the Retriever to hits (a hit that
    fails it is dropped, never served unrecorded), ingest to documents.
    """
    if not document_id:
        return "evidence document_id is empty"
    checks: tuple[tuple[str, object, int | None], ...] = (
        ("document_id", document_id, MAX_DOCUMENT_ID_CHARS),
        ("doc_id", doc_id, MAX_DOCUMENT_ID_CHARS),
        ("category", category, MAX_ID_CHARS),
        ("source", source, None),
    )
    for name, value, limit in checks:
        if value is None:
            continue
        why = unstorable_text(value, limit) if isinstance(value, str) else "is not text"
        if why is not None:
            return f"evidence {name} {why}"
    if chunk_index is not None and not _is_count(chunk_index):
        return f"evidence chunk_index {chunk_index!r} is not a whole number in 0..{MAX_INT}"
    return None


def row_tenant_problem(row_tenant: object) -> str | None:
    """Why ``row_tenant`` is not an evidence row's tenant, or None: None (not recorded),
    ``""`` (a row without a tenant) or a tenant name as ``DocumentAccess`` accepts it."""
    if row_tenant is None or row_tenant == "":
        return None
    try:
        validate_access_name(row_tenant, "evidence row_tenant")
    except InvalidInputError as error:
        return error.message
    return None


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_INT


def require_text(name: str, value: str) -> str:
    """``value`` if a store can hold and compare it exactly (no NUL, no lone surrogate),
    else ``InvalidInputError`` naming it: no driver, hash or encoder meets such text."""
    why = unstorable_text(value)
    if why is not None:
        raise InvalidInputError(f"{name} {why}")
    return value
