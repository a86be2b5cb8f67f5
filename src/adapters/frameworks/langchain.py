"""LangChain: a retriever and a tool over ``lookup_knowledge`` (extra ``frameworks``)."""

# ruff: noqa: E402 - the extra is checked before its packages are imported
from __future__ import annotations

import json
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from lookup_knowledge.adapters.extras import require

require("frameworks", "the LangChain adapter", "langchain_core")

from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    AsyncCallbackManagerForToolRun,
    CallbackManagerForRetrieverRun,
    CallbackManagerForToolRun,
)
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langchain_core.tools import BaseTool
from pydantic import BaseModel, ConfigDict, Field

from lookup_knowledge.adapters.api_requests import LookupRequest
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
        return _documents(app.lookup_result(self._request(query, _step(run_manager))))

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun
    ) -> list[Document]:
        app: LookupApp = self.app
        return _documents(await app.alookup_result(self._request(query, _step(run_manager))))

    def _request(self, query: str, step_id: str | None) -> LookupRequest:
        return LookupRequest(
            query, session_id=self.session_id, step_id=step_id, principal=self.principal
        )


class _Query(BaseModel):
    query: str = Field(
        min_length=1,
        max_length=MAX_QUERY_CHARS,
        description="What to look up: a question or keywords.",
    )


# The id of the model's tool call being run, when the tool was invoked with a ToolCall.
# LangChain hands it to ``run``/``arun`` only; a tool that declared it as an injected
# argument (InjectedToolCallId) could no longer be invoked with plain arguments.
_TOOL_CALL_ID: ContextVar[str | None] = ContextVar("lookup_knowledge_tool_call", default=None)


class LookupKnowledgeTool(BaseTool):
    """``lookup_knowledge(query)`` as a LangChain tool for one conversation. Invoked with
    the model's ToolCall (``tool.invoke(ai_message.tool_calls[0])``, what agents do) it
    returns a ``ToolMessage`` and the call's id is the step id and the tool-call id of
    the audit record; invoked with arguments (``tool.invoke({"query": ...})``) it returns
    the tool JSON as text, recorded with the LangChain run id as the step id."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    name: str = TOOL_NAME
    description: str = TOOL_DESCRIPTION
    args_schema: type[BaseModel] = _Query
    app: Any = Field(description="the LookupApp that answers and records")
    session_id: str
    principal: Any = Field(default=None, description="who the lookups are for (Principal)")

    def run(self, tool_input: Any, *args: Any, **kwargs: Any) -> Any:
        token = _TOOL_CALL_ID.set(kwargs.get("tool_call_id"))
        try:
            return super().run(tool_input, *args, **kwargs)
        finally:
            _TOOL_CALL_ID.reset(token)

    async def arun(self, tool_input: Any, *args: Any, **kwargs: Any) -> Any:
        token = _TOOL_CALL_ID.set(kwargs.get("tool_call_id"))
        try:
            return await super().arun(tool_input, *args, **kwargs)
        finally:
            _TOOL_CALL_ID.reset(token)

    def _request(
        self,
        query: str,
        run_manager: CallbackManagerForToolRun | AsyncCallbackManagerForToolRun | None,
    ) -> LookupRequest:
        """The lookup of this run: step_id and tool_call_id from the tool call, or the
        run's id as the step."""
        call_id = _TOOL_CALL_ID.get()
        step_id = call_id or (str(run_manager.run_id) if run_manager is not None else None)
        return LookupRequest(
            query,
            session_id=self.session_id,
            step_id=step_id,
            tool_call_id=call_id or None,
            principal=self.principal,
        )

    def _run(self, query: str, run_manager: CallbackManagerForToolRun | None = None) -> str:
        app: LookupApp = self.app
        result = app.lookup_result(self._request(query, run_manager))
        return json.dumps(result.to_tool_json(), ensure_ascii=False)

    async def _arun(
        self, query: str, run_manager: AsyncCallbackManagerForToolRun | None = None
    ) -> str:
        app: LookupApp = self.app
        result = await app.alookup_result(self._request(query, run_manager))
        return json.dumps(result.to_tool_json(), ensure_ascii=False)


def lookup_knowledge_tool(
    app: LookupApp, session_id: str, principal: Principal | None = None
) -> BaseTool:
    """``lookup_knowledge(query)`` as a LangChain tool for one conversation (``session_id``
    and ``principal`` from the host, never from the model); see ``LookupKnowledgeTool``."""
    return LookupKnowledgeTool(app=app, session_id=session_id, principal=principal)
