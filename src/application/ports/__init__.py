"""Ports: the small interfaces the use cases need, one module per role.

- ``search``: ``KnowledgeSearchPort`` (read side of the knowledge base), ``Embedder``
- ``ingest``: ``DocumentSource``, ``Chunker``, ``KnowledgeStore`` (write side)
- ``audit_records``: ``ToolInvocation`` and its checks, ``ToolInvocationRecorder``,
  ``SessionState`` (the record contract)
- ``audit_queries``: ``AuditQueries`` and its query values (the read side)
- ``answer_check``: what the answer checker reads and stores (``SessionEvidenceReader``,
  ``WordStemmer``, ``ClaimJudge``, ``AnswerCheckStore``, ...)
- ``analysis``: ``TextAnalyzer`` (the text analysis BM25 and the query share)
- ``evaluation``: ``RankingMetrics``
- ``reranking``: ``Reranker`` (an optional cross-encoder over HTTP)
- ``runtime``: ``Clock``, ``Telemetry``

Naming rule: a port is named for the role it plays, with no suffix
(``Embedder``, ``Clock``, ``AuditQueries``); the one exception is
``KnowledgeSearchPort``, the name the seed spec gives the search boundary. Adapters
implement them; tests use fakes that subclass them. Nothing here knows about Milvus,
SQL, HTTP or any framework. Every name is importable from this package; the answer
checker's are imported on first use (PEP 562), since it pulls in the domain's claim and
fact analysis that a lookup never runs (a cold CLI ``lookup`` is measured against the
bare import of its heavy dependencies, benchmarks/bench_cold_cli.py).
"""

from typing import TYPE_CHECKING, Any

from lookup_knowledge.application.ports.analysis import (
    TextAnalyzer,
)
from lookup_knowledge.application.ports.audit_queries import (
    ALL_TRAFFIC,
    MAX_CITED_IDS,
    MAX_PAGE_SIZE,
    AuditQueries,
    CitationReport,
    CitationSource,
    DocumentCount,
    EvidenceView,
    InvocationDetail,
    InvocationFilter,
    InvocationPage,
    InvocationSummary,
    QualitySummary,
    SessionFilter,
    SessionOwner,
    SessionPage,
    SessionPrincipal,
    SessionSummary,
    ShownEvidence,
    TimeRange,
    ascii_lower,
    check_session_id,
    check_tenant,
    check_top_limit,
    check_traffic,
    nearest_rank,
    nearest_rank_index,
    normalise_cited,
)
from lookup_knowledge.application.ports.audit_records import (
    RETRIEVAL_DETAILS_VERSION,
    STATUSES,
    TRAFFIC_KINDS,
    AuditSchema,
    EvidenceRecord,
    RecordOutcome,
    SessionState,
    ToolInvocation,
    ToolInvocationRecorder,
    evidence_problem,
    parse_invocation_id,
    require_text,
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
    StoredDocument,
    doc_key_parts,
    printable,
    shown_doc_key,
    validate_doc_id,
    validate_source_name,
)
from lookup_knowledge.application.ports.judging import JudgeMode
from lookup_knowledge.application.ports.reranking import Reranker
from lookup_knowledge.application.ports.runtime import (
    Clock,
    NoTelemetry,
    Span,
    Telemetry,
)
from lookup_knowledge.application.ports.search import (
    Embedder,
    EmbedderIdentity,
    KnowledgeSearchHit,
    KnowledgeSearchPort,
    KnowledgeSearchRequest,
    RankedList,
    RankedListSource,
    SearchCapabilities,
)

if TYPE_CHECKING:
    from lookup_knowledge.application.ports.answer_check import (
        MAX_OTHER_SESSIONS,
        AnswerCheck,
        AnswerCheckFilter,
        AnswerCheckStore,
        AnswerCheckSummary,
        AnswerFormat,
        CheckedClaim,
        ClaimCounts,
        ClaimJudge,
        CurrentChunkText,
        JudgeOpinion,
        SessionEvidenceReader,
        ShownBlock,
        WordStemmer,
        reread_tenants,
        summary_of,
    )

#: Names imported on first use, by the module that holds them.
_LAZY = {
    "MAX_OTHER_SESSIONS": "answer_check",
    "AnswerCheck": "answer_check",
    "AnswerCheckFilter": "answer_check",
    "AnswerCheckStore": "answer_check",
    "AnswerCheckSummary": "answer_check",
    "AnswerFormat": "answer_check",
    "CheckedClaim": "answer_check",
    "ClaimCounts": "answer_check",
    "ClaimJudge": "answer_check",
    "CurrentChunkText": "answer_check",
    "JudgeOpinion": "answer_check",
    "SessionEvidenceReader": "answer_check",
    "ShownBlock": "answer_check",
    "WordStemmer": "answer_check",
    "reread_tenants": "answer_check",
    "summary_of": "answer_check",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


__all__ = [
    "ALL_TRAFFIC",
    "DOCUMENT_FORMATS",
    "MAX_CITED_IDS",
    "MAX_OTHER_SESSIONS",
    "MAX_PAGE_SIZE",
    "RETRIEVAL_DETAILS_VERSION",
    "STATUSES",
    "TRAFFIC_KINDS",
    "AnswerCheck",
    "AnswerCheckFilter",
    "AnswerCheckStore",
    "AnswerCheckSummary",
    "AnswerFormat",
    "AuditQueries",
    "AuditSchema",
    "CheckedClaim",
    "Chunk",
    "ChunkRecord",
    "Chunker",
    "CitationReport",
    "CitationSource",
    "ClaimCounts",
    "ClaimJudge",
    "Clock",
    "CurrentChunkText",
    "DocumentCount",
    "DocumentLoadFailure",
    "DocumentSource",
    "Embedder",
    "EmbedderIdentity",
    "EvidenceRecord",
    "EvidenceView",
    "InvocationDetail",
    "InvocationFilter",
    "InvocationPage",
    "InvocationSummary",
    "JudgeMode",
    "JudgeOpinion",
    "KnowledgeSearchHit",
    "KnowledgeSearchPort",
    "KnowledgeSearchRequest",
    "KnowledgeStore",
    "LoadedDocument",
    "NoTelemetry",
    "Qrels",
    "QualitySummary",
    "RankedList",
    "RankedListSource",
    "RankingMetrics",
    "RecordOutcome",
    "Reranker",
    "Run",
    "SearchCapabilities",
    "SessionEvidenceReader",
    "SessionFilter",
    "SessionOwner",
    "SessionPage",
    "SessionPrincipal",
    "SessionState",
    "SessionSummary",
    "ShownBlock",
    "ShownEvidence",
    "SourceDocument",
    "Span",
    "StoredDocument",
    "Telemetry",
    "TextAnalyzer",
    "TimeRange",
    "ToolInvocation",
    "ToolInvocationRecorder",
    "WordStemmer",
    "ascii_lower",
    "check_session_id",
    "check_tenant",
    "check_top_limit",
    "check_traffic",
    "doc_key_parts",
    "evidence_problem",
    "nearest_rank",
    "nearest_rank_index",
    "normalise_cited",
    "parse_invocation_id",
    "printable",
    "require_text",
    "reread_tenants",
    "shown_doc_key",
    "summary_of",
    "validate_doc_id",
    "validate_invocation",
    "validate_source_name",
]
