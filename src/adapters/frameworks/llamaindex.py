"""LlamaIndex: a retriever and a tool over ``lookup_knowledge`` (extra ``frameworks``)."""

# ruff: noqa: E402 - the extra is checked before its packages are imported
from __future__ import annotations

import itertools
import json
from typing import TYPE_CHECKING

from lookup_knowledge.adapters.extras import require

require("frameworks", "the LlamaIndex adapter", "llama_index.core")

from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
from llama_index.core.tools import FunctionTool

from lookup_knowledge.adapters.api_requests import LookupRequest
from lookup_knowledge.adapters.frameworks import AUDIT_KEYS, block_metadata
from lookup_knowledge.application.lookup import LookupResult
from lookup_knowledge.application.tool import TOOL_DESCRIPTION, TOOL_NAME
from lookup_knowledge.domain.access import Principal

if TYPE_CHECKING:
    from lookup_knowledge.adapters.api import LookupApp


# The model reads the text with the id to cite and where it comes from; an embedding
# takes the text with its title and breadcrumb.
_NOT_FOR_THE_LLM = list(AUDIT_KEYS)
_NOT_FOR_EMBEDDING = [*AUDIT_KEYS, "document_id", "source"]


def _nodes(result: LookupResult) -> list[NodeWithScore]:
    return [
        NodeWithScore(
            node=TextNode(
                id_=block.document_id,
                text=block.content,
                metadata=block_metadata(block, result.invocation_id),
                excluded_llm_metadata_keys=list(_NOT_FOR_THE_LLM),
                excluded_embed_metadata_keys=list(_NOT_FOR_EMBEDDING),
            ),
            score=block.score,
        )
        for block in result.evidence_blocks
    ]


class LookupKnowledgeRetriever(BaseRetriever):
    """``lookup_knowledge`` as a LlamaIndex retriever for one conversation; each retrieval
    is a step (``step-1``, ``step-2``, ... unless the host sets ``next_step_id``)."""

    def __init__(self, app: LookupApp, session_id: str, principal: Principal | None = None) -> None:
        self._principal = principal
        super().__init__()
        self._app = app
        self._session_id = session_id
        self._steps = itertools.count(1)
        self.next_step_id: str | None = None

    def _step(self) -> str:
        step, self.next_step_id = self.next_step_id, None
        return step or f"step-{next(self._steps)}"

    def _request(self, query_bundle: QueryBundle) -> LookupRequest:
        return LookupRequest(
            query_bundle.query_str,
            session_id=self._session_id,
            step_id=self._step(),
            principal=self._principal,
        )

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return _nodes(self._app.lookup_result(self._request(query_bundle)))

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return _nodes(await self._app.alookup_result(self._request(query_bundle)))


def lookup_knowledge_tool(
    app: LookupApp, session_id: str, principal: Principal | None = None
) -> FunctionTool:
    """``lookup_knowledge(query)`` as a LlamaIndex ``FunctionTool`` returning the tool JSON."""
    steps = itertools.count(1)

    def request(query: str) -> LookupRequest:
        step_id = f"tool-{next(steps)}"
        return LookupRequest(query, session_id=session_id, step_id=step_id, principal=principal)

    def lookup_knowledge(query: str) -> str:
        """Search the knowledge base for evidence."""
        result = app.lookup_result(request(query))
        return json.dumps(result.to_tool_json(), ensure_ascii=False)

    async def alookup_knowledge(query: str) -> str:
        """Search the knowledge base for evidence."""
        result = await app.alookup_result(request(query))
        return json.dumps(result.to_tool_json(), ensure_ascii=False)

    return FunctionTool.from_defaults(
        fn=lookup_knowledge,
        async_fn=alookup_knowledge,
        name=TOOL_NAME,
        description=TOOL_DESCRIPTION,
    )
