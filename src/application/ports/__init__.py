"""Ports: the small interfaces the use cases need, one module per role.

- ``search``: ``KnowledgeSearchPort`` (read side of the knowledge base), ``Embedder``
- ``ingest``: ``DocumentSource``, ``Chunker``, ``KnowledgeStore`` (write side)
- ``audit``: ``ToolInvocationRecorder``, ``AuditQueries``, ``SessionState``
- ``evaluation``: ``RankingMetrics``
- ``runtime``: ``Clock``, ``Telemetry``

Naming rule: a port is named for the role it plays, with no suffix
(``Embedder``, ``Clock``, ``AuditQueries``); the one exception is
``KnowledgeSearchPort``, the name the seed spec gives the search boundary. Adapters
implement them; tests use fakes that subclass them. Nothing here knows about Milvus,
SQL, HTTP or any framework. Every name is importable from this package.
"""

from lookup_knowledge.application.ports.audit import (
    MAX_CITED_IDS,
    MAX_PAGE_SIZE,
    RETRIEVAL_DETAILS_VERSION,
    STATUSES,
    AuditQueries,
    AuditSchema,
    CitationReport,
    CitationSource,
    DocumentCount,
    EvidenceRecord,
    EvidenceView,
    InvocationDetail,
    InvocationFilter,
    InvocationPage,
    InvocationSummary,
    QualitySummary,
    RecordOutcome,
    SessionFilter,
    SessionPage,
    SessionState,
    SessionSummary,
    ShownEvidence,
    TimeRange,
    ToolInvocation,
    ToolInvocationRecorder,
    ascii_lower,
    check_session_id,
    check_top_limit,
    nearest_rank,
    nearest_rank_index,
    normalise_cited,
    parse_invocation_id,
    validate_invocation,
)
from lookup_knowledge.application.ports.evaluation import (
    Qrels,
    RankingMetrics,
    Run,
)
from lookup_knowledge.application.ports.ingest import (
    DOCUMENT_FORMATS,
    Chunk,
    Chunker,
    ChunkRecord,
    DocumentLoadFailure,
    DocumentSource,
    KnowledgeStore,
    LoadedDocument,
    SourceDocument,
    validate_doc_id,
)
from lookup_knowledge.application.ports.runtime import (
    Clock,
    NoTelemetry,
    Span,
    Telemetry,
)
from lookup_knowledge.application.ports.search import (
    Embedder,
    KnowledgeSearchHit,
    KnowledgeSearchPort,
    KnowledgeSearchRequest,
    SearchCapabilities,
)

__all__ = [
    "DOCUMENT_FORMATS",
    "MAX_CITED_IDS",
    "MAX_PAGE_SIZE",
    "RETRIEVAL_DETAILS_VERSION",
    "STATUSES",
    "AuditQueries",
    "AuditSchema",
    "Chunk",
    "ChunkRecord",
    "Chunker",
    "CitationReport",
    "CitationSource",
    "Clock",
    "DocumentCount",
    "DocumentLoadFailure",
    "DocumentSource",
    "Embedder",
    "EvidenceRecord",
    "EvidenceView",
    "InvocationDetail",
    "InvocationFilter",
    "InvocationPage",
    "InvocationSummary",
    "KnowledgeSearchHit",
    "KnowledgeSearchPort",
    "KnowledgeSearchRequest",
    "KnowledgeStore",
    "LoadedDocument",
    "NoTelemetry",
    "Qrels",
    "QualitySummary",
    "RankingMetrics",
    "RecordOutcome",
    "Run",
    "SearchCapabilities",
    "SessionFilter",
    "SessionPage",
    "SessionState",
    "SessionSummary",
    "ShownEvidence",
    "SourceDocument",
    "Span",
    "Telemetry",
    "TimeRange",
    "ToolInvocation",
    "ToolInvocationRecorder",
    "ascii_lower",
    "check_session_id",
    "check_top_limit",
    "nearest_rank",
    "nearest_rank_index",
    "normalise_cited",
    "parse_invocation_id",
    "validate_doc_id",
    "validate_invocation",
]
