"""Ingest: documents in, identified chunks in the knowledge store.

``use_case`` holds ``IngestDocuments`` (its docstring reads the flow top to bottom);
``values`` what a run is given and what it reports.
"""

from lookup_knowledge.application.ingest.use_case import IngestDocuments
from lookup_knowledge.application.ingest.values import (
    PENDING_HASH,
    ROW_FORMAT_VERSION,
    IngestConfig,
    IngestPlan,
    IngestProgress,
    IngestReport,
    StaticDocumentSource,
    document_hash,
    embedding_input,
)
from lookup_knowledge.application.ports import SourceDocument

__all__ = [
    "PENDING_HASH",
    "ROW_FORMAT_VERSION",
    "IngestConfig",
    "IngestDocuments",
    "IngestPlan",
    "IngestProgress",
    "IngestReport",
    "SourceDocument",
    "StaticDocumentSource",
    "document_hash",
    "embedding_input",
]
