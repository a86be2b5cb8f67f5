"""Audit ports: writing invocations (``ToolInvocationRecorder``), reading them back
(``AuditQueries``), per-session memory (``SessionState``), and the values they carry.

A ``ToolInvocation`` validates itself when it is made, so every recorder (SQL, spool,
fake) receives only records the SQL store can keep. The limits are shared by every
implementation, so the fake and the SQL store accept and reject exactly the same
records and queries.

Records written by a recorder may still sit in its local journal (not moved into the
database yet, or the database was unreachable); readers flush first and report what is
still pending.
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
from typing import Literal

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
MAX_PAGE_SIZE = 1000
MAX_CITED_IDS = 1000
STATUSES = frozenset(s.value for s in InvocationStatus)


class RecordOutcome(StrEnum):
    COMMITTED = "committed"  # in the database
    # Durably in the local journal; the background writer moves it into the database
    # (readers flush first, so they see it).
    JOURNALED = "journaled"
    # Durably in the local journal while the database is unreachable (or refused it),
    # moved once it is back.
    SPOOLED = "spooled"
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
        # Validated once, where it is made: every recorder (SQL, spool, fake) receives
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
ALL_TRAFFIC: Literal["all"] = "all"


def check_traffic(traffic: object) -> None:
    """``None`` (every kind) or a ``Traffic``; ``InvalidInputError`` otherwise."""
    if traffic is not None and not isinstance(traffic, Traffic):
        raise InvalidInputError(
            f"traffic must be one of {sorted(TRAFFIC_KINDS)} (or None for all), not {traffic!r}"
        )


def validate_invocation(invocation: ToolInvocation) -> None:
    """Reject a record that no store could keep; raises ``AuditError``.

    ``ToolInvocation`` calls it on construction, so a malformed record fails where it is
    made instead of sitting in a spool forever.
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


def _require_session(session_id: str) -> str:
    if not isinstance(session_id, str) or not session_id.strip():
        raise InvalidInputError("session_id must be a non-empty string")
    if len(session_id) > MAX_ID_CHARS:
        raise InvalidInputError(f"session_id is longer than {MAX_ID_CHARS} characters")
    require_text("session_id", session_id)
    return session_id


def require_text(name: str, value: str) -> str:
    """``value`` if a store can hold and compare it exactly (no NUL, no lone surrogate),
    else ``InvalidInputError`` naming it: no driver, hash or encoder meets such text."""
    why = unstorable_text(value)
    if why is not None:
        raise InvalidInputError(f"{name} {why}")
    return value


def _require_aware(name: str, value: datetime | None) -> None:
    if value is not None and (value.tzinfo is None or value.utcoffset() is None):
        raise InvalidInputError(f"{name} must be timezone-aware")


@dataclass(frozen=True, slots=True)
class TimeRange:
    """``[started_from, started_to)``; either bound may be open (None)."""

    started_from: datetime | None = None
    started_to: datetime | None = None

    def __post_init__(self) -> None:
        _require_aware("started_from", self.started_from)
        _require_aware("started_to", self.started_to)
        if (
            self.started_from is not None
            and self.started_to is not None
            and self.started_from > self.started_to
        ):
            raise InvalidInputError("started_from must not be after started_to")

    def contains(self, at: datetime) -> bool:
        if self.started_from is not None and at < self.started_from:
            return False
        return self.started_to is None or at < self.started_to


# --------------------------------------------------------------------------- DTOs


@dataclass(frozen=True, slots=True)
class InvocationFilter:
    """Which invocations to list, and which page.

    Results are ordered by ``(started_at, id)`` (oldest first unless ``newest_first``);
    ``offset``/``limit`` page through them. ``traffic``: a kind, ``"all"``, or unset:
    then production only, except with ``session_id`` (a session is read whole, which is
    how eval and replay read their own sessions back).
    """

    session_id: str | None = None
    step_id: str | None = None
    status: str | None = None
    time_range: TimeRange = field(default_factory=TimeRange)
    limit: int = 50
    offset: int = 0
    newest_first: bool = False
    traffic: Traffic | Literal["all"] | None = None
    #: Only invocations made for this principal tenant.
    tenant: str | None = None

    def __post_init__(self) -> None:
        if self.traffic != ALL_TRAFFIC:
            check_traffic(self.traffic)
        check_tenant(self.tenant)
        if self.session_id is not None:
            _require_session(self.session_id)
        if self.step_id is not None and (not self.step_id or len(self.step_id) > MAX_ID_CHARS):
            raise InvalidInputError(f"step_id must have 1..{MAX_ID_CHARS} characters")
        if self.step_id is not None:
            require_text("step_id", self.step_id)
        if self.status is not None and self.status not in STATUSES:
            raise InvalidInputError(f"status must be one of {sorted(STATUSES)}")
        if isinstance(self.limit, bool) or not 1 <= self.limit <= MAX_PAGE_SIZE:
            raise InvalidInputError(f"limit must be between 1 and {MAX_PAGE_SIZE}")
        if isinstance(self.offset, bool) or self.offset < 0:
            raise InvalidInputError("offset must be >= 0")

    def traffic_kind(self) -> Traffic | None:
        """The kind to list, ``None`` for every kind (see the class docstring)."""
        if self.traffic is None:
            return None if self.session_id is not None else Traffic.PRODUCTION
        return None if self.traffic == ALL_TRAFFIC else Traffic(self.traffic)


@dataclass(frozen=True, slots=True)
class InvocationSummary:
    id: str
    session_id: str
    seq: int
    step_id: str | None
    tool_call_id: str | None
    tool_name: str
    query: str
    status: str
    error_code: str | None
    quality_score: float
    relevance_level: str
    retrieval_mode: str
    filter_applied: str | None
    fallback_reason: str | None
    candidate_count: int
    returned_count: int
    started_at: datetime
    duration_ms: float
    traffic: str = Traffic.PRODUCTION.value
    principal_tenant: str | None = None
    principal_user: str | None = None
    principal_groups_hash: str | None = None
    access_mode: str = "off"
    access_filter: str | None = None


EvidenceView = EvidenceRecord
"""One evidence row of an invocation as stored: exactly the fields it was recorded with."""


@dataclass(frozen=True, slots=True)
class InvocationDetail:
    summary: InvocationSummary
    error_message: str | None
    retrieve_k: int
    return_n: int
    trace_id: str | None
    span_id: str | None
    retrieval_details: Mapping[str, object]
    evidence: tuple[EvidenceView, ...]


@dataclass(frozen=True, slots=True)
class InvocationPage:
    items: tuple[InvocationSummary, ...]
    next_offset: int | None  # None when this is the last page


@dataclass(frozen=True, slots=True)
class SessionFilter:
    """Which sessions to list, and which page.

    A session is listed when at least one of its invocations started in ``time_range``
    (and, with ``status``, has that status); its counts cover the invocations in the
    range. ``id_contains`` matches a part of the session id, ignoring ASCII case.
    Sessions are ordered by their last invocation, newest first (ties by id).
    ``query_contains``: only sessions with an invocation whose query holds this text
    (ASCII case ignored); ``document_id``: only sessions that were shown this block.
    ``traffic``: a kind or ``"all"``; unset lists production sessions.
    """

    id_contains: str | None = None
    status: str | None = None
    time_range: TimeRange = field(default_factory=TimeRange)
    limit: int = 50
    offset: int = 0
    query_contains: str | None = None
    document_id: str | None = None
    traffic: Traffic | Literal["all"] | None = None

    def __post_init__(self) -> None:
        if self.traffic is not None and self.traffic != ALL_TRAFFIC:
            check_traffic(self.traffic)
        for name in ("query_contains", "document_id"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or len(value) > MAX_QUERY_TEXT):
                raise InvalidInputError(f"{name} must have at most {MAX_QUERY_TEXT} characters")
            if value is not None:
                require_text(name, value)
        if self.id_contains is not None and (
            not isinstance(self.id_contains, str) or len(self.id_contains) > MAX_ID_CHARS
        ):
            raise InvalidInputError(f"id_contains must have at most {MAX_ID_CHARS} characters")
        if self.id_contains is not None:
            require_text("id_contains", self.id_contains)
        if self.status is not None and self.status not in STATUSES:
            raise InvalidInputError(f"status must be one of {sorted(STATUSES)}")
        if isinstance(self.limit, bool) or not 1 <= self.limit <= MAX_PAGE_SIZE:
            raise InvalidInputError(f"limit must be between 1 and {MAX_PAGE_SIZE}")
        if isinstance(self.offset, bool) or self.offset < 0:
            raise InvalidInputError("offset must be >= 0")

    def traffic_kind(self) -> Traffic | None:
        """The kind to list, ``None`` for every kind."""
        if self.traffic is None:
            return Traffic.PRODUCTION
        return None if self.traffic == ALL_TRAFFIC else Traffic(self.traffic)


MAX_QUERY_TEXT = 1000


@dataclass(frozen=True, slots=True)
class SessionSummary:
    session_id: str
    invocation_count: int
    ok_count: int
    no_evidence_count: int
    error_count: int
    first_started_at: datetime
    last_started_at: datetime


@dataclass(frozen=True, slots=True)
class SessionPage:
    items: tuple[SessionSummary, ...]
    next_offset: int | None  # None when this is the last page


def ascii_lower(text: str) -> str:
    """Lower-case ASCII letters only (what SQL ``lower()`` does on every dialect)."""
    return text.translate(_ASCII_LOWER)


_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


@dataclass(frozen=True, slots=True)
class ShownEvidence:
    """One block a session was shown, with the invocation that showed it."""

    invocation_id: str
    seq: int
    step_id: str | None
    started_at: datetime
    evidence: EvidenceView


@dataclass(frozen=True, slots=True)
class CitationSource:
    """Where a cited document_id came from: its first return in the session."""

    document_id: str
    invocation_id: str
    step_id: str | None
    seq: int
    rank: int


@dataclass(frozen=True, slots=True)
class CitationReport:
    """The verdict on an agent's citations for one session.

    ``valid`` keeps the order of the cited ids; ``unknown`` ids were never returned to
    the session *as far as the database knows*; ``forbidden`` ids (a subset of what
    would otherwise be unknown) exist in the knowledge base only in documents the
    session's principal may not see (access control enforced). When ``pending_in_spool`` > 0 some of
    the session's records are not in the database yet, so ``unknown`` may be too long:
    ``conclusive`` is False then.
    """

    session_id: str
    valid: tuple[CitationSource, ...]
    unknown: tuple[str, ...]
    pending_in_spool: int = 0
    forbidden: tuple[str, ...] = ()

    @property
    def conclusive(self) -> bool:
        return self.pending_in_spool == 0

    @property
    def all_valid(self) -> bool:
        return not self.unknown and not self.forbidden

    @property
    def valid_ids(self) -> tuple[str, ...]:
        return tuple(v.document_id for v in self.valid)


@dataclass(frozen=True, slots=True)
class SessionOwner:
    """Who a session belongs to: the principal its lookups were recorded for, as the
    recorded columns hold it (``None`` everywhere: a lookup without a principal)."""

    tenant: str | None
    user: str | None
    groups_hash: str | None


@dataclass(frozen=True, slots=True)
class SessionPrincipal:
    """A principal a session's lookups were made for, as recorded, with the mode."""

    tenant: str | None
    groups_hash: str | None
    access_mode: str


@dataclass(frozen=True, slots=True)
class DocumentCount:
    document_id: str
    doc_id: str | None
    source: str
    times_returned: int
    sessions: int


@dataclass(frozen=True, slots=True)
class QualitySummary:
    """Quality over a time range. Rates are fractions of ``count``; ``mean_quality``
    averages the non-error invocations; durations are nearest-rank percentiles."""

    time_range: TimeRange
    count: int
    ok_count: int
    no_evidence_count: int
    error_count: int
    fallback_count: int
    mean_quality: float | None
    p50_duration_ms: float | None
    p95_duration_ms: float | None
    top_documents: tuple[DocumentCount, ...]
    # Claims checked by ``CheckAnswer`` in the range (by check time) and how many held.
    claims_checked: int = 0
    claims_supported: int = 0
    claims_contradicted: int = 0  # the aligned span says the opposite
    traffic: Traffic | None = Traffic.PRODUCTION  # what was counted (None: every kind)
    tenant: str | None = None  # the principal tenant counted (None: every one)

    @property
    def supported_claim_share(self) -> float | None:
        """Share of checked claims that were supported; None when none was checked."""
        return self.claims_supported / self.claims_checked if self.claims_checked else None

    @property
    def no_evidence_rate(self) -> float:
        return self.no_evidence_count / self.count if self.count else 0.0

    @property
    def fallback_rate(self) -> float:
        return self.fallback_count / self.count if self.count else 0.0

    @property
    def error_rate(self) -> float:
        return self.error_count / self.count if self.count else 0.0


def nearest_rank(sorted_values: Sequence[float], percentile: float) -> float | None:
    """The nearest-rank percentile (the value at rank ceil(p/100 * n), 1-based)."""
    n = len(sorted_values)
    if n == 0:
        return None
    return sorted_values[nearest_rank_index(n, percentile)]


def nearest_rank_index(n: int, percentile: float) -> int:
    """0-based index of the nearest-rank percentile among ``n`` sorted values."""
    return max(0, min(n - 1, math.ceil(percentile / 100.0 * n) - 1))


def normalise_cited(document_ids: Sequence[str]) -> tuple[str, ...]:
    """Cited ids de-duplicated in first-cited order; rejects what no store could hold."""
    if isinstance(document_ids, str):
        raise InvalidInputError("document_ids must be a sequence of strings, not one string")
    seen: dict[str, None] = {}
    for item in document_ids:
        if not isinstance(item, str) or not item or len(item) > MAX_DOCUMENT_ID_CHARS:
            raise InvalidInputError(
                f"each cited document_id must be a string of 1..{MAX_DOCUMENT_ID_CHARS} characters"
            )
        require_text("a cited document_id", item)
        seen.setdefault(item, None)
    if len(seen) > MAX_CITED_IDS:
        raise InvalidInputError(f"at most {MAX_CITED_IDS} distinct document_ids per call")
    return tuple(seen)


# --------------------------------------------------------------------------- the port


class AuditQueries(ABC):
    """Read side of the audit store. Raises ``AuditUnavailable`` when the store cannot be
    reached, ``AuditError`` for other storage failures, ``InvalidInputError`` for bad
    arguments and ``NotFoundError`` for an unknown invocation id."""

    @abstractmethod
    def list_invocations(self, query: InvocationFilter) -> InvocationPage: ...

    @abstractmethod
    def get_invocation(self, invocation_id: str) -> InvocationDetail: ...

    @abstractmethod
    def list_sessions(self, query: SessionFilter) -> SessionPage:
        """Sessions with their invocation counts (see ``SessionFilter``)."""

    @abstractmethod
    def session_evidence(self, session_id: str) -> tuple[ShownEvidence, ...]:
        """Every block the session was shown, ordered by (seq, rank)."""

    @abstractmethod
    def session_domains(self, session_id: str) -> tuple[str, ...]:
        """Non-empty categories of the session's evidence, in first-returned order."""

    @abstractmethod
    def find_citation_sources(
        self, session_id: str, document_ids: Sequence[str]
    ) -> dict[str, CitationSource]:
        """For each id returned to the session: its first return (lowest seq, then rank).

        ``document_ids`` is already normalised (see ``normalise_cited``); ids never
        returned to the session are absent from the answer.
        """

    @abstractmethod
    def top_documents(
        self,
        time_range: TimeRange,
        limit: int = 10,
        traffic: Traffic | None = Traffic.PRODUCTION,
        tenant: str | None = None,
    ) -> tuple[DocumentCount, ...]:
        """Documents returned most often in the range (ties by document_id), counting
        ``traffic`` only (production by default; ``None``: every kind) and, with
        ``tenant``, that principal tenant's invocations only."""

    @abstractmethod
    def quality_summary(
        self,
        time_range: TimeRange,
        top_n: int = 10,
        traffic: Traffic | None = Traffic.PRODUCTION,
        tenant: str | None = None,
    ) -> QualitySummary:
        """Counts, rates and percentiles of ``traffic`` in the range (production by
        default, so an eval's thousands of calls do not drown the agents' ones); with
        ``tenant``, that principal tenant's invocations only."""

    def session_principals(self, session_id: str) -> tuple[SessionPrincipal, ...]:
        """The distinct (tenant, groups hash, access mode) of the session's invocations."""
        return ()

    def session_owners(self, session_id: str) -> tuple[SessionOwner, ...]:
        """The distinct principals (tenant, user, groups hash) the session's invocations
        were recorded for (``SessionOwner(None, None, None)``: no principal); empty for a
        session with no invocation."""
        return ()

    def verify_citations(self, session_id: str, document_ids: Sequence[str]) -> CitationReport:
        """Valid and unknown citations as the database knows them (no spool view)."""
        _require_session(session_id)
        cited = normalise_cited(document_ids)
        found = self.find_citation_sources(session_id, cited) if cited else {}
        return CitationReport(
            session_id=session_id,
            valid=tuple(found[d] for d in cited if d in found),
            unknown=tuple(d for d in cited if d not in found),
        )


def check_tenant(tenant: object) -> None:
    if tenant is not None and (
        not isinstance(tenant, str) or not tenant or len(tenant) > MAX_ID_CHARS
    ):
        raise InvalidInputError(f"tenant must be a string of 1..{MAX_ID_CHARS} characters")


def check_top_limit(limit: int) -> None:
    if isinstance(limit, bool) or not 1 <= limit <= MAX_PAGE_SIZE:
        raise InvalidInputError(f"limit must be between 1 and {MAX_PAGE_SIZE}")


def check_session_id(session_id: str) -> str:
    return _require_session(session_id)
