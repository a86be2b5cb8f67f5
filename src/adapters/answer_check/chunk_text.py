"""``CurrentChunkText`` from the knowledge search port (Milvus, or the in-memory store):
the block's text as it is stored now, by document_id (the evidence key). A tenant's rows
are stored under ``storage_key(tenant, document_id)``: the ids are mapped to those keys
and the answer back to the ids."""

from __future__ import annotations

from collections.abc import Sequence

from lookup_knowledge.application.ports import CurrentChunkText, KnowledgeSearchPort
from lookup_knowledge.domain.access import storage_key


class SearchChunkText(CurrentChunkText):
    def __init__(self, search: KnowledgeSearchPort) -> None:
        self._search = search

    def fetch_content(
        self, document_ids: Sequence[str], tenant: str | None = None
    ) -> dict[str, str]:
        keys = {storage_key(tenant or "", d): d for d in dict.fromkeys(document_ids)}
        if not keys:
            return {}
        fetched = self._search.fetch_content(list(keys))
        return {keys[k]: text for k, text in fetched.items() if k in keys}
