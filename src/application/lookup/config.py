"""What shapes a lookup: ``LookupConfig`` (from configuration, validated by its parts) and
``LookupOptions`` (what a host may pass per call; the agent passes only a query)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from lookup_knowledge.domain.access import AccessMode, Principal
from lookup_knowledge.domain.errors import ConfigurationError, InvalidInputError
from lookup_knowledge.domain.model import SearchMode, Traffic
from lookup_knowledge.domain.projection import ProjectionBudgets
from lookup_knowledge.domain.quality import QualityThresholds
from lookup_knowledge.domain.relevance import RelevanceCalibration
from lookup_knowledge.domain.rerank import RerankWeights
from lookup_knowledge.domain.reranking import RerankerSettings
from lookup_knowledge.domain.settings import RetrievalSettings


class PayloadProfile(StrEnum):
    """What the tool JSON carries (``rag.payload.profile``).

    ``agent``: each excerpt once (the context pack refers to blocks by id), compact
    traces, and no evidence id anywhere that is not a returned block's ``document_id``
    (every id is an invitation to cite). ``full``: everything, for debugging. The full
    traces are in the audit store either way.
    """

    AGENT = "agent"
    FULL = "full"


@dataclass(frozen=True, slots=True)
class LookupConfig:
    """Everything that shapes a lookup, validated by its parts."""

    retrieval: RetrievalSettings = field(default_factory=RetrievalSettings)
    mode: SearchMode = SearchMode.DENSE
    engine_grouping: bool = False
    # Off by default: the second round trip costs more than returning the texts with
    # the search (benchmarks/README.md), and rerank bonuses want the text.
    late_materialisation: bool = False
    #: A hybrid lookup whose query the embedder cannot read (``Embedder.reads``) is
    #: answered from BM25 alone (``rag.hybrid.bm25-only-when-unreadable``).
    bm25_only_when_unreadable: bool = True
    rerank: RerankWeights = field(default_factory=RerankWeights)
    #: The optional reranker stage (``rag.rerank.provider`` and its keys); off by default.
    reranker: RerankerSettings = field(default_factory=RerankerSettings)
    calibration: RelevanceCalibration = field(default_factory=RelevanceCalibration)
    context_char_budget: int = 4000
    context_min_excerpt_chars: int = 80
    projection: ProjectionBudgets = field(default_factory=ProjectionBudgets)
    quality: QualityThresholds = field(default_factory=QualityThresholds)
    payload_profile: PayloadProfile = PayloadProfile.AGENT
    #: ``access.mode``: off (everyone sees everything) or enforced (``domain/access.py``).
    access_mode: AccessMode = AccessMode.OFF

    def __post_init__(self) -> None:
        if self.context_char_budget < 1:
            raise ConfigurationError(
                "rag.context.char-budget", self.context_char_budget, "must be >= 1"
            )


@dataclass(frozen=True, slots=True)
class LookupOptions:
    """Per-call overrides a host (or the CLI) may pass; the agent passes only a query."""

    mode: SearchMode | None = None
    category: str | None = None  # an explicit filter: no unfiltered retry
    tool_call_id: str | None = None
    traffic: Traffic = Traffic.PRODUCTION
    #: Who the lookup is for, from the host (never from the agent). Under
    #: ``access.mode=enforced`` None sees only documents marked public.
    principal: Principal | None = None
    #: The host found the call's input bad (e.g. an MCP conversation id): the call is
    #: recorded as this ``invalid_input`` result, nothing is searched.
    input_error: str | None = None

    def __post_init__(self) -> None:
        if self.principal is not None and not isinstance(self.principal, Principal):
            raise InvalidInputError(
                f"principal must be a Principal; got {type(self.principal).__name__}"
            )
        # A host passes these from its own code: a wrong type is its bug, said plainly,
        # and an empty category is refused rather than silently dropped as a filter.
        if self.mode is not None and not isinstance(self.mode, SearchMode):
            raise InvalidInputError(
                f"mode must be one of {', '.join(m.value for m in SearchMode)}; got {self.mode!r}"
            )
        if self.category is not None:
            if not isinstance(self.category, str):
                raise InvalidInputError(
                    f"category must be a string; got {type(self.category).__name__}"
                )
            if not self.category.strip():
                raise InvalidInputError(
                    "category must not be empty or blank (omit it for no category filter)"
                )
        if not isinstance(self.traffic, Traffic):
            raise InvalidInputError(f"traffic must be a Traffic; got {self.traffic!r}")
