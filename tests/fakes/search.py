"""A search engine and an embedder over lists: fakes of the search ports (no mocks)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from lookup_knowledge.application.ports import (
    Embedder,
    KnowledgeSearchHit,
    KnowledgeSearchPort,
    KnowledgeSearchRequest,
    SearchCapabilities,
)
from lookup_knowledge.domain.access import NO_ACL, UNRESTRICTED, AccessScope, DocumentAccess
from lookup_knowledge.domain.errors import SearchError
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
    access: DocumentAccess = NO_ACL


class FakeSearch(KnowledgeSearchPort):
    """Returns configured rows, best score first, honouring top_k and the category filter.

    ``by_category`` rows answer filtered passes; ``rows`` answer unfiltered ones.
    Rows the request's access scope does not allow are left out, as a real engine's
    filter does; ``broken_access`` ignores the scope (a deliberately broken engine,
    for the defence-in-depth check).
    """

    def __init__(
        self,
        rows: Sequence[StoredChunk] = (),
        *,
        score_kind: ScoreKind = ScoreKind.COSINE,
        error: SearchError | None = None,
        filtered_rows: Mapping[str, Sequence[StoredChunk]] | None = None,
        broken_access: bool = False,
    ) -> None:
        self.broken_access = broken_access
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
        if not self.broken_access:
            pool = [r for r in pool if request.access.allows(r.access)]
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
                    access=row.access,
                )
            )
        return hits

    def fetch_content(
        self, evidence_keys: Sequence[str], access: AccessScope = UNRESTRICTED
    ) -> dict[str, str]:
        """By primary key, as the real stores fetch: a row's id (its evidence key when it
        has no id)."""
        self.fetches.append(list(evidence_keys))
        out: dict[str, str] = {}
        for row in self.rows + [r for rs in self.filtered_rows.values() for r in rs]:
            key = (
                row.id
                if row.id is not None
                else extract_identity(row.metadata, None, 1).evidence_key
            )
            allowed = self.broken_access or access.allows(row.access)
            if key in evidence_keys and key not in self.deleted and allowed:
                out[key] = row.content
        return out

    def capabilities(self) -> SearchCapabilities:
        return SearchCapabilities(modes=frozenset(SearchMode), grouping=True)

    def holds_nothing(self) -> bool:
        return not self.rows and not any(self.filtered_rows.values())


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
