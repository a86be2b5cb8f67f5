"""The audit read side: the query values (filters, pages, summaries, citation
reports), their checks, the percentile maths, and the ``AuditQueries`` port.

Records written by a recorder may still sit in its local journal (not moved into the
database yet, or the database was unreachable); readers flush first and report what is
still pending.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from lookup_knowledge.application.ports.audit_records import (
    STATUSES,
    TRAFFIC_KINDS,
    EvidenceRecord,
    require_text,
)
from lookup_knowledge.application.tool import (
    MAX_DOCUMENT_ID_CHARS,
    MAX_ID_CHARS,
)
from lookup_knowledge.domain.errors import InvalidInputError
from lookup_knowledge.domain.model import Traffic

# Limits shared by every implementation, so that the fake and the SQL store accept and
# reject exactly the same records and queries.
MAX_PAGE_SIZE = 1000
MAX_CITED_IDS = 1000

ALL_TRAFFIC: Literal["all"] = "all"


def check_traffic(traffic: object) -> None:
    """``None`` (every kind) or a ``Traffic``; ``InvalidInputError`` otherwise."""
    if traffic is not None and not isinstance(traffic, Traffic):
        raise InvalidInputError(
            f"traffic must be one of {sorted(TRAFFIC_KINDS)} (or None for all), not {traffic!r}"
        )


def _require_session(session_id: str) -> str:
    if not isinstance(session_id, str) or not session_id.strip():
        raise InvalidInputError("session_id must be a non-empty string")
    if len(session_id) > MAX_ID_CHARS:
        raise InvalidInputError(f"session_id is longer than {MAX_ID_CHARS} characters")
    require_text("session_id", session_id)
    return session_id


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
