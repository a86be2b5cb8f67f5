"""Search-side ports: the knowledge search (read side of the knowledge base) and the
embedder, with the request and hit values that cross them."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from lookup_knowledge.domain.access import NO_ACL, UNRESTRICTED, AccessScope, DocumentAccess
from lookup_knowledge.domain.errors import InvalidInputError
from lookup_knowledge.domain.identity import EvidenceIdentity
from lookup_knowledge.domain.model import SearchMode
from lookup_knowledge.domain.relevance import HitCalibration, ScoreKind


@dataclass(frozen=True, slots=True)
class EmbedderIdentity:
    """Which embedder made a collection's vectors. Vectors of two embedders with the
    same dimension are not comparable, so a mismatch is a ``SchemaMismatch``."""

    provider: str
    model: str
    dimension: int
    normalised: bool

    def describe(self) -> str:
        norm = "normalised" if self.normalised else "not normalised"
        return f"{self.provider} {self.model!r} ({self.dimension}-dim, {norm})"


@dataclass(frozen=True, slots=True)
class KnowledgeSearchRequest:
    """One search pass.

    ``group_size`` asks the engine to group by doc_id and return at most that many
    chunks per document (engine-side grouping); None means plain top-k.
    ``include_content`` False asks for ids, scores and light metadata only (late
    materialisation: content is fetched afterwards for the survivors).
    ``access`` is who asks under which mode (``domain/access.py``): an engine returns
    only hits whose document ``access.allows``; every pass of a lookup carries it.
    """

    query_text: str
    top_k: int
    mode: SearchMode = SearchMode.DENSE
    query_vector: tuple[float, ...] | None = None
    category_filter: str | None = None
    group_size: int | None = None
    include_content: bool = True
    #: The embedder that made ``query_vector``: a collection built with another one
    #: answers ``SchemaMismatch`` instead of meaningless neighbours.
    embedder: EmbedderIdentity | None = None
    #: Who asks and under which access mode; the engine filters by it (fail closed).
    access: AccessScope = UNRESTRICTED

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
    """One hit as the engine returned it, with identity already extracted.

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
    # The hit's document access metadata as stored (tenant, allowed groups, public).
    # The application re-checks it against the request's scope and drops what the
    # principal may not see; the default (no ACL) is visible to nobody when enforced.
    access: DocumentAccess = NO_ACL
    # What puts this search's raw scores on the evidence scale (the query's BM25
    # reference, the collection's dense background); None: the engine cannot say, and
    # the scores are read by ``normalise_relevance``.
    calibration: HitCalibration | None = None


@dataclass(frozen=True, slots=True)
class SearchCapabilities:
    modes: frozenset[SearchMode]
    grouping: bool
    server_version: str = ""


@dataclass(frozen=True, slots=True)
class RankedList:
    """One mode's hits (DENSE or SPARSE), as the engine ranked them, each with its own
    raw score (``cosine`` or ``bm25``) and the request's calibration."""

    mode: SearchMode
    hits: tuple[KnowledgeSearchHit, ...]


class RankedListSource(ABC):
    """An engine seen as what it does itself: one ranked list per search mode, grouped by
    document where the engine can. Fusion, client-side grouping and the choice between
    them are the application's (``application.hybrid_search.HybridSearch``)."""

    @abstractmethod
    def ranked_lists(
        self, request: KnowledgeSearchRequest, *, limit: int, group_size: int | None
    ) -> tuple[RankedList, ...]:
        """The lists ``request.mode`` is made of (HYBRID: the dense and the sparse one),
        each at most ``limit`` long (``limit`` documents of at most ``group_size`` hits
        each when ``group_size`` is set; only asked of an engine with native grouping).
        The request is checked against what the engine holds (``SearchError``); a list
        nothing can match is empty or absent."""

    @abstractmethod
    def native_grouping(self) -> bool:
        """Whether the engine groups hits by document itself."""

    def list_scores(
        self, request: KnowledgeSearchRequest, mode: SearchMode, keys: Sequence[str]
    ) -> dict[str, float]:
        """The raw score ``mode``'s list of ``request`` gives each row of ``keys`` (hit
        ids), whether or not the row ranked in that list's top: the cosine of its stored
        vector (DENSE), its BM25 score for the query (SPARSE). A key the engine cannot
        score is absent, and so is a row with no query term (its BM25 is nothing).
        Used to complete the evidence of a fused hit one list did not return. Default:
        the engine cannot say (the hit keeps only the evidence of the lists that found it)."""
        return {}


class KnowledgeSearchPort(ABC):
    """Fetches candidates for a query. Raises ``SearchError`` subclasses only."""

    @abstractmethod
    def search(self, request: KnowledgeSearchRequest) -> list[KnowledgeSearchHit]: ...

    @abstractmethod
    def fetch_content(
        self, evidence_keys: Sequence[str], access: AccessScope = UNRESTRICTED
    ) -> dict[str, str]:
        """Content by evidence key for late materialisation; missing keys are absent,
        and so are keys of documents ``access`` does not allow."""

    @abstractmethod
    def capabilities(self) -> SearchCapabilities: ...

    def document_access(self, document_ids: Sequence[str]) -> dict[str, tuple[DocumentAccess, ...]]:
        """For each agent-facing ``document_id`` (``doc_id#chunk-N``) the store holds, the
        access metadata of every row that has it (one per tenant holding that path);
        ids the store does not hold are absent. Unrestricted: for verifiers, which ask
        whether a cited id was visible to a session. Engines without it answer {}."""
        return {}

    def search_parameters(self) -> Mapping[str, object]:
        """Analysis, index and search parameters in force, for the retrieval trace."""
        return {}

    def check(self) -> str:
        """A live round trip to the engine for health checks: a short description of what
        it holds, or ``SearchError`` (``SearchUnavailable`` when it cannot be reached)."""
        capabilities = self.capabilities()
        return ", ".join(sorted(m.value for m in capabilities.modes)) or "no search mode"

    def holds_nothing(self) -> bool:
        """True when nothing has been ingested yet (no collection, no rows): reachable,
        but no lookup can find anything. Engines that cannot tell answer False."""
        return False

    def warm(self) -> None:  # noqa: B027 - an optional hook, a no-op unless there is an index
        """Open now what the first search would open (loaded segments, indexes); raises
        ``SearchError`` like ``search``. A no-op for an engine with nothing to open."""


# --------------------------------------------------------------------------- embedding


class Embedder(ABC):
    """Turns text into dense vectors. Raises ``EmbeddingError`` only."""

    def load(self) -> None:  # noqa: B027 - an optional hook, a no-op unless there is a model
        """Open now what the first embed would open (a model file); thread-safe. A no-op
        for an embedder with nothing to open."""

    @property
    @abstractmethod
    def dimension(self) -> int: ...

    @property
    @abstractmethod
    def name(self) -> str: ...

    @property
    def identity(self) -> EmbedderIdentity:
        """Provider, model, dimension and normalisation: stored with a collection and
        checked whenever it is searched or written."""
        return EmbedderIdentity(
            provider=type(self).__name__,
            model=self.name,
            dimension=self.dimension,
            normalised=True,
        )

    @abstractmethod
    def embed_query(self, text: str) -> list[float]: ...

    @abstractmethod
    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]: ...

    def release_documents(self) -> None:  # noqa: B027 - an optional hook, like load()
        """Let go of what embedding documents holds (a model session and its memory)
        until the next ``embed_documents``, which opens it again. An ingest calls it once
        its last chunk is embedded, so its model is not resident through the store's
        seal. A no-op for an embedder that holds nothing for documents."""

    def reads(self, text: str) -> bool:
        """Whether the model was trained on the language ``text`` is written in. A query
        it cannot read still gets a vector, but its nearest neighbours are chosen by
        script, not by topic (English-only MiniLM puts every Chinese document near any
        Chinese question). Default: every language."""
        return True

    def token_lengths(self, texts: Sequence[str]) -> list[int]:
        """How long each text is for this embedder, to batch similar lengths together
        (less padding). The default counts characters; a tokenizer-backed embedder
        counts its tokens."""
        return [len(text) for text in texts]
