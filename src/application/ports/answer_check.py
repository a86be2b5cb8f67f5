"""Answer-checking ports: what a session was shown (``SessionEvidenceReader``), a block's
current text (``CurrentChunkText``), stems (``WordStemmer``), an optional judge
(``ClaimJudge``) and the check records (``AnswerCheckStore``), with the values they carry.
The use case is ``application.answer_check.CheckAnswer``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from types import MappingProxyType

from lookup_knowledge.application.ports.audit_queries import TimeRange, check_session_id
from lookup_knowledge.domain.answer_check import CitationVerdict, SupportSpan, Verdict
from lookup_knowledge.domain.errors import InvalidInputError

MAX_OTHER_SESSIONS = 5
_NO_SIGNALS: Mapping[str, object] = MappingProxyType({})


class AnswerFormat(StrEnum):
    TEXT = "text"  # prose with bracketed document ids
    ANTHROPIC = "anthropic"  # a Claude response's content blocks with search_result citations


# --------------------------------------------------------------------------- ports


@dataclass(frozen=True, slots=True)
class ShownBlock:
    """One time a session was shown a block."""

    document_id: str
    invocation_id: str
    seq: int
    rank: int
    step_id: str | None
    started_at: datetime
    content_hash: str
    shown_text: str | None  # None: the store kept only the hash
    #: The principal tenant of the invocation that showed it (None: no principal). A
    #: tenant's rows are stored under its own keys, so re-reading the block needs it.
    principal_tenant: str | None = None
    #: The tenant of the stored row it came from (``EvidenceRecord.row_tenant``): ``""``
    #: for a row without a tenant, None when not recorded (before audit revision 0005).
    row_tenant: str | None = None

    def reread_tenants(self) -> tuple[str | None, ...]:
        """Whose rows to re-read this block from (``reread_tenants``)."""
        return reread_tenants(self.row_tenant, self.principal_tenant)


def reread_tenants(row_tenant: str | None, principal_tenant: str | None) -> tuple[str | None, ...]:
    """Whose rows hold a shown block's text now, in the order to try (None: the rows
    without a tenant): the recorded row's tenant, exactly; for a record without it
    (before audit revision 0005) the principal tenant's rows, then the untenanted ones."""
    if row_tenant is not None:
        return (row_tenant or None,)
    return tuple(dict.fromkeys((principal_tenant or None, None)))


class SessionEvidenceReader(ABC):
    """What sessions were shown. Raises ``AuditError`` subclasses only."""

    @abstractmethod
    def shown_blocks(
        self, session_id: str, document_ids: Sequence[str], as_of: datetime
    ) -> dict[str, tuple[ShownBlock, ...]]:
        """Every showing of the ids in the session that started at or before ``as_of``,
        oldest first; ids never shown are absent."""

    @abstractmethod
    def sessions_returning(
        self, document_ids: Sequence[str], exclude_session_id: str, limit: int = MAX_OTHER_SESSIONS
    ) -> dict[str, tuple[str, ...]]:
        """For each id: up to ``limit`` other sessions it was returned to (sorted)."""

    def newest_sessions_returning(
        self, document_ids: Sequence[str], session_prefix: str, limit: int = 50
    ) -> dict[str, tuple[str, ...]]:
        """For each id: up to ``limit`` sessions whose id starts with ``session_prefix``
        that it was returned to, the greatest id first (ids that sort by creation time,
        such as ``<prefix><uuid7>``: the newest first). The default reads every session
        through ``sessions_returning``; a store overrides it with one query."""
        found = self.sessions_returning(document_ids, "", limit=2**31 - 1)
        out: dict[str, tuple[str, ...]] = {}
        for document_id, sessions in found.items():
            mine = sorted((s for s in sessions if s.startswith(session_prefix)), reverse=True)
            if mine:
                out[document_id] = tuple(mine[:limit])
        return out


class CurrentChunkText(ABC):
    """A block's current text in the knowledge store, by document_id."""

    @abstractmethod
    def fetch_content(
        self, document_ids: Sequence[str], tenant: str | None = None
    ) -> dict[str, str]:
        """The current text of ``tenant``'s rows holding these ids (its storage keys,
        ``domain.access.storage_key``), or of the rows without a tenant when ``tenant`` is
        None, keyed by document_id; ids it does not hold are absent."""


class WordStemmer(ABC):
    """Stems words (lower-case, one per item) for lexical coverage."""

    @abstractmethod
    def stem(self, words: Sequence[str]) -> list[str]: ...


@dataclass(frozen=True, slots=True)
class JudgeOpinion:
    label: str  # "entailed" | "contradicted" | "neutral"
    score: float | None = None
    model: str = ""
    reason: str = ""  # the judge's own words, if it gave any


class ClaimJudge(ABC):
    """An optional NLI or LLM judge of a claim against its aligned evidence span(s).
    Raises ``JudgeError`` when it cannot answer."""

    @abstractmethod
    def judge(self, claim: str, evidence: Sequence[str]) -> JudgeOpinion: ...


# --------------------------------------------------------------------------- records


@dataclass(frozen=True, slots=True)
class CheckedClaim:
    """One claim's verdict as recorded (and as read back from the store)."""

    index: int
    text: str
    start: int
    end: int
    citations: tuple[CitationVerdict, ...]
    verdict: Verdict
    reasons: tuple[str, ...] = ()
    support: SupportSpan | None = None
    # Everything else the checker saw: quotes found (offsets), facts missing, coverage,
    # cosine, the judge's opinion. Plain JSON values.
    signals: Mapping[str, object] = field(default_factory=lambda: _NO_SIGNALS)

    @property
    def cited_ids(self) -> tuple[str, ...]:
        return tuple(c.document_id for c in self.citations)


@dataclass(frozen=True, slots=True)
class AnswerCheck:
    id: str
    session_id: str
    step_id: str | None
    answer_format: AnswerFormat
    answer_text: str
    answer_hash: str
    verdict: Verdict
    claims: tuple[CheckedClaim, ...]
    checker_version: str
    created_at: datetime
    pending_in_spool: int = 0

    def count(self, verdict: Verdict) -> int:
        return sum(1 for c in self.claims if c.verdict is verdict)

    @property
    def all_supported(self) -> bool:
        return all(c.verdict is Verdict.SUPPORTED for c in self.claims)

    @property
    def conclusive(self) -> bool:
        """False when some of the session's records were still in the journal: an ``unknown``
        citation may then be one the database has not received yet."""
        return self.pending_in_spool == 0


@dataclass(frozen=True, slots=True)
class AnswerCheckSummary:
    id: str
    session_id: str
    step_id: str | None
    verdict: Verdict
    claim_count: int
    supported_count: int
    unsupported_count: int
    uncited_count: int
    invalid_citation_count: int
    checker_version: str
    created_at: datetime
    contradicted_count: int = 0


@dataclass(frozen=True, slots=True)
class AnswerCheckFilter:
    session_id: str | None = None
    time_range: TimeRange = field(default_factory=TimeRange)
    limit: int = 50
    offset: int = 0
    newest_first: bool = False

    def __post_init__(self) -> None:
        if self.session_id is not None:
            check_session_id(self.session_id)
        if isinstance(self.limit, bool) or not 1 <= self.limit <= 1000:
            raise InvalidInputError("limit must be between 1 and 1000")
        if isinstance(self.offset, bool) or self.offset < 0:
            raise InvalidInputError("offset must be >= 0")


@dataclass(frozen=True, slots=True)
class ClaimCounts:
    """Checked claims in a time range; ``supported_share`` is None when there are none."""

    checks: int = 0
    claims: int = 0
    supported: int = 0
    contradicted: int = 0

    @property
    def supported_share(self) -> float | None:
        return self.supported / self.claims if self.claims else None


class AnswerCheckStore(ABC):
    """The ``answer_check`` / ``claim_check`` records. Raises ``AuditError`` subclasses,
    ``NotFoundError`` for an unknown check id."""

    @abstractmethod
    def save(self, check: AnswerCheck) -> None: ...

    @abstractmethod
    def list_checks(self, query: AnswerCheckFilter) -> tuple[AnswerCheckSummary, ...]: ...

    @abstractmethod
    def get_check(self, check_id: str) -> AnswerCheck: ...

    @abstractmethod
    def claim_counts(self, time_range: TimeRange) -> ClaimCounts: ...


def summary_of(check: AnswerCheck) -> AnswerCheckSummary:
    return AnswerCheckSummary(
        id=check.id,
        session_id=check.session_id,
        step_id=check.step_id,
        verdict=check.verdict,
        claim_count=len(check.claims),
        supported_count=check.count(Verdict.SUPPORTED),
        unsupported_count=check.count(Verdict.UNSUPPORTED),
        uncited_count=check.count(Verdict.UNCITED),
        invalid_citation_count=check.count(Verdict.INVALID_CITATION),
        checker_version=check.checker_version,
        created_at=check.created_at,
        contradicted_count=check.count(Verdict.CONTRADICTED),
    )
