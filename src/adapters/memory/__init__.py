"""An in-memory knowledge base: the search port and the ingest store in one object."""

from __future__ import annotations

from lookup_knowledge.adapters.memory.knowledge import InMemoryKnowledgeBase

__all__ = ["InMemoryKnowledgeBase"]
