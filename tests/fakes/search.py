"""In-memory fakes that subclass the application ports (no mocks)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from lookup_knowledge.application.ports import (
    Clock,
    Embedder,
    KnowledgeSearchHit,
    KnowledgeSearchPort,
    KnowledgeSearchRequest,
    RecordOutcome,
    SearchCapabilities,
    SessionState,
    ToolInvocation,
    ToolInvocationRecorder,
)
from lookup_knowledge.domain.errors import AuditError, SearchError
from lookup_knowledge.domain.identity import extract_identity
from lookup_knowledge.domain.model import SearchMode
from lookup_knowledge.domain.relevance import ScoreKind


@dataclass
class StoredChunk:
    """A row as a search engine would hold it; score is what the engine returns."""

    id: str | None
    content: str
    score: float
    metadata: dict[str, object] = field(default_factory=dict)


class FakeSearch(KnowledgeSearchPort):
    """Returns configured rows, best score first, honouring top_k and the category filter.

    ``by_category`` rows answer filtered passes; ``rows`` answer unfiltered ones.
    """

    def __init__(
        self,
        rows: Sequence[StoredChunk] = (),
        *,
        score_kind: ScoreKind = ScoreKind.COSINE,
        error: SearchError | None = None,
        filtered_rows: Mapping[str, Sequence[StoredChunk]] | None = None,
    ) -> None:
        self.rows = list(rows)
        self.filtered_rows = dict(filtered_rows or {})
        self.score_kind = score_kind
        self.error = error
        self.requests: list[KnowledgeSearchRequest] = []
        self.fetches: list[list[str]] = []
        self.deleted: set[str] = set()

    def search(self, request: KnowledgeSearchRequest) -> list[KnowledgeSearchHit]:
        self.requests.append(request)
        if self.error is not None:
            raise self.error
        if request.category_filter is not None:
            pool = list(self.filtered_rows.get(request.category_filter, ()))
            pool += [
                r
                for r in self.rows
                if r.metadata.get("category") == request.category_filter and r not in pool
            ]
        else:
            pool = list(self.rows)
        pool.sort(key=lambda r: -r.score)
        hits = []
        for rank, row in enumerate(pool[: request.top_k], start=1):
            hits.append(
                KnowledgeSearchHit(
                    id=row.id,
                    score=row.score,
                    score_kind=self.score_kind,
                    identity=extract_identity(row.metadata, row.id, rank),
                    content=row.content if request.include_content else None,
                    metadata=dict(row.metadata),
                )
            )
        return hits

    def fetch_content(self, evidence_keys: Sequence[str]) -> dict[str, str]:
        self.fetches.append(list(evidence_keys))
        out: dict[str, str] = {}
        for row in self.rows + [r for rs in self.filtered_rows.values() for r in rs]:
            ident = extract_identity(row.metadata, row.id, 1)
            if ident.evidence_key in evidence_keys and ident.evidence_key not in self.deleted:
                out[ident.evidence_key] = row.content
        return out

    def capabilities(self) -> SearchCapabilities:
        return SearchCapabilities(modes=frozenset(SearchMode), grouping=True)


class FakeEmbedder(Embedder):
    def __init__(self, dimension: int = 4) -> None:
        self._dimension = dimension
        self.queries: list[str] = []

    @property
    def dimension(self) -> int:
        return self._dimension

    @property
    def name(self) -> str:
        return "fake"

    def embed_query(self, text: str) -> list[float]:
        self.queries.append(text)
        return [1.0] + [0.0] * (self._dimension - 1)

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        return [self.embed_query(t) for t in texts]


class FakeRecorder(ToolInvocationRecorder):
    def __init__(self, fail_with: AuditError | None = None) -> None:
        self.records: list[ToolInvocation] = []
        self.fail_with = fail_with

    def record(self, invocation: ToolInvocation) -> RecordOutcome:
        if self.fail_with is not None:
            raise self.fail_with
        self.records.append(invocation)
        return RecordOutcome.COMMITTED

    def flush(self, session_id: str | None = None, timeout_s: float = 10.0) -> bool:
        return True

    def pending_count(self, session_id: str | None = None) -> int:
        return 0

    def failure_count(self) -> int:
        return 0


class FakeSessionState(SessionState):
    def __init__(self) -> None:
        self.domains: dict[str, list[str]] = {}

    def retrieved_domains(self, session_id: str) -> tuple[str, ...]:
        return tuple(self.domains.get(session_id, ()))

    def add_retrieved_domains(self, session_id: str, domains: Sequence[str]) -> None:
        known = self.domains.setdefault(session_id, [])
        known.extend(d for d in dict.fromkeys(domains) if d not in known)


class FakeClock(Clock):
    """Advances 1 ms on every monotonic read so durations are positive and exact."""

    def __init__(self) -> None:
        self._now = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
        self._mono = 0.0

    def now(self) -> datetime:
        self._now += timedelta(milliseconds=1)
        return self._now

    def monotonic(self) -> float:
        self._mono += 0.001
        return self._mono


def chunk(
    doc_id: str | None,
    index: object,
    score: float,
    content: str = "",
    vector_id: str | None = None,
    **meta: object,
) -> StoredChunk:
    """A row with docId/chunkIndex metadata (None values are left out)."""
    metadata: dict[str, object] = {k: v for k, v in meta.items() if v is not None}
    if doc_id is not None:
        metadata["doc_id"] = doc_id
    if index is not None:
        metadata["chunk_index"] = index
    metadata.setdefault("source", f"{doc_id}.md" if doc_id else "")
    metadata.setdefault("title", f"Title of {doc_id}" if doc_id else "")
    text = content or f"content of {doc_id} chunk {index}"
    return StoredChunk(id=vector_id, content=text, score=score, metadata=metadata)
