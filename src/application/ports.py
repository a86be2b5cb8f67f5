"""Ports: the small interfaces the use cases need, named for their role.

Adapters implement them; tests use fakes that subclass them. Nothing here knows about
Milvus, SQL, HTTP or any framework.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from types import MappingProxyType

from lookup_knowledge.domain.errors import InvalidInputError
from lookup_knowledge.domain.identity import EvidenceIdentity
from lookup_knowledge.domain.model import SearchMode
from lookup_knowledge.domain.relevance import ScoreKind

# --------------------------------------------------------------------------- search


@dataclass(frozen=True, slots=True)
class KnowledgeSearchRequest:
    """One search pass.

    ``group_size`` asks the engine to group by doc_id and return at most that many
    chunks per document (engine-side grouping); None means plain top-k.
    ``include_content`` False asks for ids, scores and light metadata only (late
    materialisation: content is fetched afterwards for the survivors).
    """

    query_text: str
    top_k: int
    mode: SearchMode = SearchMode.DENSE
    query_vector: tuple[float, ...] | None = None
    category_filter: str | None = None
    group_size: int | None = None
    include_content: bool = True

    def __post_init__(self) -> None:
        if self.top_k < 1:
            raise InvalidInputError("top_k must be >= 1")
        if self.mode.needs_query_vector and self.query_vector is None:
            raise InvalidInputError(f"{self.mode.value} search needs a query vector")
        if self.group_size is not None and self.group_size < 1:
            raise InvalidInputError("group_size must be >= 1")


_NO_METADATA: Mapping[str, object] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class KnowledgeSearchHit:
    """One hit as the engine returned it, with identity already extracted (D6).

    ``metadata`` carries at least what the adapter knows of: doc_id, chunk_index,
    category, source, title, breadcrumb, source_type. ``content`` is None when the
    request did not include content.
    """

    id: str | None
    score: float
    score_kind: ScoreKind
    identity: EvidenceIdentity
    content: str | None = None
    metadata: Mapping[str, object] = field(default_factory=lambda: _NO_METADATA)
    reasons: tuple[str, ...] = ()
    # The per-list scores behind a fused score (hybrid): each list's own raw score and
    # kind, for the lists that found the hit. They say how strong the evidence is on an
    # absolute scale; the fused score only says how it ranked.
    component_scores: tuple[tuple[ScoreKind, float], ...] = ()


@dataclass(frozen=True, slots=True)
class SearchCapabilities:
    modes: frozenset[SearchMode]
    grouping: bool
    server_version: str = ""

    def supports(self, mode: SearchMode) -> bool:
        return mode in self.modes


class KnowledgeSearchPort(ABC):
    """Fetches candidates for a query. Raises ``SearchError`` subclasses only."""

    @abstractmethod
    def search(self, request: KnowledgeSearchRequest) -> list[KnowledgeSearchHit]: ...

    @abstractmethod
    def fetch_content(self, evidence_keys: Sequence[str]) -> dict[str, str]:
        """Content by evidence key for late materialisation; missing keys are absent."""

    @abstractmethod
    def capabilities(self) -> SearchCapabilities: ...


# --------------------------------------------------------------------------- embedding


class Embedder(ABC):
    """Turns text into dense vectors. Raises ``EmbeddingError`` only."""

    @property
    @abstractmethod
    def dimension(self) -> int: ...

    @property
    @abstractmethod
    def name(self) -> str: ...

    @abstractmethod
    def embed_query(self, text: str) -> list[float]: ...

    @abstractmethod
    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]: ...


# --------------------------------------------------------------------------- audit


class RecordOutcome(StrEnum):
    COMMITTED = "committed"  # in the database
    SPOOLED = "spooled"  # durably in the local spool, replayed later
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
    tool_name: str = "lookup_knowledge"
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


class ToolInvocationRecorder(ABC):
    """Persists invocations. ``record`` returns once the record is durable.

    It must not raise for a storage failure: it spools the record instead and counts
    the failure. It may raise ``AuditError`` only when even the spool is unwritable.
    """

    @abstractmethod
    def record(self, invocation: ToolInvocation) -> RecordOutcome: ...

    @abstractmethod
    def flush(self, session_id: str | None = None, timeout_s: float = 10.0) -> bool:
        """Replay spooled records; True when none (of that session) remain pending."""

    @abstractmethod
    def pending_count(self, session_id: str | None = None) -> int: ...

    @abstractmethod
    def failure_count(self) -> int: ...

    def close(self) -> None:  # noqa: B027 - optional hook, most fakes hold nothing
        """Release resources."""


class SessionStatePort(ABC):
    """Remembers which domains (categories) a session has retrieved evidence from."""

    @abstractmethod
    def retrieved_domains(self, session_id: str) -> tuple[str, ...]: ...

    @abstractmethod
    def add_retrieved_domains(self, session_id: str, domains: Sequence[str]) -> None: ...


# --------------------------------------------------------------------------- time, telemetry


class Clock(ABC):
    @abstractmethod
    def now(self) -> datetime:
        """Timezone-aware wall-clock time."""

    @abstractmethod
    def monotonic(self) -> float:
        """Seconds from an arbitrary origin, for durations."""


class Span(ABC):
    @abstractmethod
    def set_attribute(self, key: str, value: str | int | float | bool) -> None: ...

    @abstractmethod
    def record_error(self, error: BaseException) -> None: ...

    @property
    @abstractmethod
    def trace_id(self) -> str | None: ...

    @property
    @abstractmethod
    def span_id(self) -> str | None: ...


class Telemetry(ABC):
    """Opens spans; the default does nothing so that tracing stays the host's choice."""

    @abstractmethod
    def span(
        self, name: str, attributes: Mapping[str, str | int | float | bool] | None = None
    ) -> AbstractContextManager[Span]: ...


class _NullSpan(Span):
    def set_attribute(self, key: str, value: str | int | float | bool) -> None:
        return None

    def record_error(self, error: BaseException) -> None:
        return None

    @property
    def trace_id(self) -> str | None:
        return None

    @property
    def span_id(self) -> str | None:
        return None


class NoTelemetry(Telemetry):
    def span(
        self, name: str, attributes: Mapping[str, str | int | float | bool] | None = None
    ) -> AbstractContextManager[Span]:
        from contextlib import contextmanager

        @contextmanager
        def _null() -> Iterator[Span]:
            yield _NullSpan()

        return _null()
