"""Milvus adapters: the search port, the ingest store, the connection they share."""

from __future__ import annotations

from lookup_knowledge.adapters.milvus.connection import (
    MilvusConnection,
    ServerCapabilities,
    parse_capabilities,
)
from lookup_knowledge.adapters.milvus.schema import DEFAULT_COLLECTION
from lookup_knowledge.adapters.milvus.search import MilvusKnowledgeSearch
from lookup_knowledge.adapters.milvus.store import MilvusKnowledgeStore

__all__ = [
    "DEFAULT_COLLECTION",
    "MilvusConnection",
    "MilvusKnowledgeSearch",
    "MilvusKnowledgeStore",
    "ServerCapabilities",
    "parse_capabilities",
]
