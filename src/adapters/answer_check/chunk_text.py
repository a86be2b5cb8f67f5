"""``CurrentChunkText`` from the knowledge search port (Milvus, or the in-memory store):
the block's text as it is stored now, by document_id (the evidence key)."""

from __future__ import annotations

from collections.abc import Sequence

from lookup_knowledge.application.ports import CurrentChunkText, KnowledgeSearchPort


class SearchChunkText(CurrentChunkText):
    def __init__(self, search: KnowledgeSearchPort) -> None:
        self._search = search

    def fetch_content(self, document_ids: Sequence[str]) -> dict[str, str]:
        return self._search.fetch_content(document_ids)
