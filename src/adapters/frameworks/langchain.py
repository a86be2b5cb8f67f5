"""LangChain: a retriever and a tool over ``lookup_knowledge`` (extra ``frameworks``)."""

# ruff: noqa: E402 - the extra is checked before its packages are imported
from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated, Any

from lookup_knowledge.adapters.extras import require

require("frameworks", "the LangChain adapter", "langchain_core")

from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langchain_core.tools import BaseTool, InjectedToolCallId, StructuredTool
from pydantic import BaseModel, ConfigDict, Field

from lookup_knowledge.adapters.frameworks import block_metadata
from lookup_knowledge.application.lookup import LookupResult
from lookup_knowledge.application.tool import MAX_QUERY_CHARS, TOOL_DESCRIPTION, TOOL_NAME
from lookup_knowledge.domain.access import Principal

if TYPE_CHECKING:
    from lookup_knowledge.adapters.api import LookupApp


def _documents(result: LookupResult) -> list[Document]:
    return [
        Document(
            page_content=block.content,
            id=block.document_id,
            metadata=block_metadata(block, result.invocation_id),
        )
        for block in result.evidence_blocks
    ]


def _step(run_manager: CallbackManagerForRetrieverRun | AsyncCallbackManagerForRetrieverRun) -> str:
    step = (run_manager.metadata or {}).get("step_id")
    return str(step) if step else str(run_manager.run_id)


class LookupKnowledgeRetriever(BaseRetriever):
    """``lookup_knowledge`` as a LangChain retriever. The step id is the run's metadata
    ``step_id`` (``retriever.invoke(q, config={"metadata": {"step_id": "7"}})``), else
    the LangChain run id."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    app: Any = Field(description="the LookupApp that answers and records")
    session_id: str
    principal: Any = Field(default=None, description="who the lookups are for (Principal)")

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        app: LookupApp = self.app
        result = app.lookup_result(
            query,
            session_id=self.session_id,
            step_id=_step(run_manager),
            principal=self.principal,
        )
        return _documents(result)

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun
    ) -> list[Document]:
        app: LookupApp = self.app
        result = await app.alookup_result(
            query,
            session_id=self.session_id,
            step_id=_step(run_manager),
            principal=self.principal,
        )
        return _documents(result)


class _Query(BaseModel):
    query: str = Field(
        min_length=1,
        max_length=MAX_QUERY_CHARS,
        description="What to look up: a question or keywords.",
    )
    tool_call_id: Annotated[str, InjectedToolCallId]


def lookup_knowledge_tool(
    app: LookupApp, session_id: str, principal: Principal | None = None
) -> BaseTool:
    """``lookup_knowledge(query)`` as a LangChain tool for one conversation (``session_id``
    and ``principal`` from the host, never from the model). It returns the tool JSON
    (the agent payload); the model's tool-call id is the step id and the tool-call id of
    the audit record."""

    def run(query: str, tool_call_id: str) -> str:
        result = app.lookup_result(
            query,
            session_id=session_id,
            step_id=tool_call_id,
            tool_call_id=tool_call_id,
            principal=principal,
        )
        return json.dumps(result.to_tool_json(), ensure_ascii=False)

    async def arun(query: str, tool_call_id: str) -> str:
        result = await app.alookup_result(
            query,
            session_id=session_id,
            step_id=tool_call_id,
            tool_call_id=tool_call_id,
            principal=principal,
        )
        return json.dumps(result.to_tool_json(), ensure_ascii=False)

    return StructuredTool.from_function(
        func=run,
        coroutine=arun,
        name=TOOL_NAME,
        description=TOOL_DESCRIPTION,
        args_schema=_Query,
    )
