"""Haystack: a retriever component over ``lookup_knowledge`` (extra ``frameworks``).

Haystack sends anonymous usage telemetry unless ``HAYSTACK_TELEMETRY_ENABLED=False`` is
set in the environment; a host that must not call out sets it before importing Haystack.
"""

# ruff: noqa: E402 - the extra is checked before its packages are imported
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from lookup_knowledge.adapters.extras import require

require("frameworks", "the Haystack adapter", "haystack")

from haystack import Document, component

from lookup_knowledge.adapters.api_requests import LookupRequest
from lookup_knowledge.adapters.frameworks import block_metadata
from lookup_knowledge.application.lookup import LookupResult
from lookup_knowledge.domain.access import Principal

if TYPE_CHECKING:
    from lookup_knowledge.adapters.api import LookupApp


def _documents(result: LookupResult) -> list[Document]:
    # Document.score is a similarity in [0, 1] to Haystack (rankers, joiners, filters):
    # the block's relevance. The ranking score (relevance plus rerank bonuses, which may
    # exceed 1) and the rank that orders the list are in meta.
    return [
        Document(
            id=block.document_id,
            content=block.content,
            meta=block_metadata(block, result.invocation_id),
            score=block.relevance,
        )
        for block in result.evidence_blocks
    ]


@component
class LookupKnowledgeRetriever:
    """``lookup_knowledge`` as a Haystack retriever for one conversation: ``run(query,
    step_id=None)`` returns ``{"documents": [...], "found": bool, "message": str}``."""

    def __init__(self, app: LookupApp, session_id: str, principal: Principal | None = None) -> None:
        self._principal = principal
        self._app = app
        self._session_id = session_id

    def _request(self, query: str, step_id: str | None) -> LookupRequest:
        return LookupRequest(
            query, session_id=self._session_id, step_id=step_id, principal=self._principal
        )

    @component.output_types(documents=list[Document], found=bool, message=str)
    def run(self, query: str, step_id: str | None = None) -> dict[str, Any]:
        result = self._app.lookup_result(self._request(query, step_id))
        return {"documents": _documents(result), "found": result.found, "message": result.message}

    @component.output_types(documents=list[Document], found=bool, message=str)
    async def run_async(self, query: str, step_id: str | None = None) -> dict[str, Any]:
        result = await self._app.alookup_result(self._request(query, step_id))
        return {"documents": _documents(result), "found": result.found, "message": result.message}
