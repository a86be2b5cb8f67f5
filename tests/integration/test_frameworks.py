"""The framework adapters with the frameworks installed, offline, each driven by a fake
model: every call goes through the lookup use case and is recorded under the host's
session and step ids."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("HAYSTACK_TELEMETRY_ENABLED", "False")  # no call-outs from tests

from lookup_knowledge import create_app
from lookup_knowledge.adapters.api import LookupApp
from lookup_knowledge.application.ports import InvocationFilter, InvocationSummary
from tests.support.payload import assert_names_only_returned_blocks

QUERY = "PG-53300 too many connections"


@pytest.fixture
def app(tmp_path: Path) -> Iterator[LookupApp]:
    kb = tmp_path / "kb" / "database"
    kb.mkdir(parents=True)
    (kb / "pool.md").write_text(
        "# Connection pool\n\n## PG-53300\n\nToo many connections: raise pool_size in "
        "PgBouncer and check max_connections.\n\n## Replication\n\nReplication lag above "
        "16 MB pages the database on-call.\n",
        encoding="utf-8",
    )
    lookup_app = create_app(
        overrides={
            "data-dir": str(tmp_path / "data"),
            "search.backend": "memory",
            "embedder.provider": "hashing",
            "rag.min-relevance": 0.0,
        }
    )
    lookup_app.ingest([tmp_path / "kb"], root=tmp_path / "kb")
    yield lookup_app
    lookup_app.close()


def recorded(app: LookupApp, session_id: str) -> list[InvocationSummary]:
    app.flush(session_id)
    return list(app.audit.list_invocations(InvocationFilter(session_id=session_id)).items)


def shown_ids(app: LookupApp, session_id: str) -> set[str]:
    return {e.evidence.document_id for e in app.audit.session_evidence(session_id)}


# --------------------------------------------------------------------------- LangChain


def test_langchain_retriever_returns_documents_recorded_with_the_hosts_ids(
    app: LookupApp,
) -> None:
    from lookup_knowledge.adapters.frameworks.langchain import LookupKnowledgeRetriever

    retriever = LookupKnowledgeRetriever(app=app, session_id="lc-chat")
    documents = retriever.invoke(QUERY, config={"metadata": {"step_id": "turn-1"}})
    later = asyncio.run(retriever.ainvoke(QUERY))
    assert documents
    assert {d.metadata["document_id"] for d in documents} <= shown_ids(app, "lc-chat")
    assert all(d.id == d.metadata["document_id"] for d in documents)
    assert {"source", "title", "breadcrumb", "score", "rank", "invocation_id"} <= set(
        documents[0].metadata
    )
    first, second = recorded(app, "lc-chat")
    assert first.step_id == "turn-1"
    assert second.step_id  # the LangChain run id
    assert [d.page_content for d in later] == [d.page_content for d in documents]


def test_langchain_tool_runs_the_models_tool_call(app: LookupApp) -> None:
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage, ToolMessage
    from langchain_core.utils.function_calling import convert_to_openai_tool

    from lookup_knowledge.adapters.frameworks.langchain import lookup_knowledge_tool

    tool = lookup_knowledge_tool(app, session_id="lc-tool")
    call = {"name": "lookup_knowledge", "args": {"query": QUERY}, "id": "call_42"}
    model = GenericFakeChatModel(messages=iter([AIMessage(content="", tool_calls=[call])]))
    reply = model.invoke("How do I fix PG-53300?")
    assert isinstance(reply, AIMessage)
    (tool_call,) = reply.tool_calls
    message = tool.invoke({**tool_call, "type": "tool_call"})
    assert isinstance(message, ToolMessage)
    payload = json.loads(str(message.content))
    assert payload["found"] is True
    assert_names_only_returned_blocks(payload)
    (row,) = recorded(app, "lc-tool")
    assert (row.step_id, row.tool_call_id) == ("call_42", "call_42")
    # The model sees the query argument only; the tool-call id is injected by LangChain.
    schema = convert_to_openai_tool(tool)["function"]["parameters"]
    assert set(schema["properties"]) == {"query"}


def test_langchain_tool_takes_plain_arguments_as_well_as_a_tool_call(app: LookupApp) -> None:
    from lookup_knowledge.adapters.frameworks.langchain import lookup_knowledge_tool

    tool = lookup_knowledge_tool(app, session_id="lc-plain")
    # What a LangChain user types first, sync and async, and the bare string form.
    for output in (
        tool.invoke({"query": QUERY}),
        asyncio.run(tool.ainvoke({"query": QUERY})),
        tool.invoke(QUERY),
    ):
        assert isinstance(output, str)
        payload = json.loads(output)
        assert payload["found"] is True
        assert_names_only_returned_blocks(payload)
    rows = recorded(app, "lc-plain")
    assert len(rows) == 3
    # No model tool call: the LangChain run id is the step, and no tool-call id is made up.
    assert all(row.step_id and row.tool_call_id is None for row in rows)
    assert len({row.step_id for row in rows}) == 3


# --------------------------------------------------------------------------- LlamaIndex


def test_llamaindex_nodes_keep_audit_metadata_out_of_the_prompt(app: LookupApp) -> None:
    from llama_index.core.schema import MetadataMode

    from lookup_knowledge.adapters.frameworks.llamaindex import LookupKnowledgeRetriever

    (node, *_) = LookupKnowledgeRetriever(app, session_id="li-prompt").retrieve(QUERY)
    metadata = node.node.metadata
    prompt = node.node.get_content(metadata_mode=MetadataMode.LLM)
    assert metadata["document_id"] in prompt, "the model sees what it may cite"
    assert node.node.get_content() in prompt
    for key in ("invocation_id", "rank", "score", "relevance"):
        assert key in metadata, "the host still has it"
        assert f"{key}:" not in prompt, f"{key} reached the LLM prompt"
    assert metadata["invocation_id"] not in prompt
    embedded = node.node.get_content(metadata_mode=MetadataMode.EMBED)
    assert metadata["invocation_id"] not in embedded
    assert "rank:" not in embedded


def test_llamaindex_retriever_feeds_a_query_engine_with_a_mock_llm(app: LookupApp) -> None:
    from llama_index.core.llms import MockLLM
    from llama_index.core.query_engine import RetrieverQueryEngine

    from lookup_knowledge.adapters.frameworks.llamaindex import LookupKnowledgeRetriever

    retriever = LookupKnowledgeRetriever(app, session_id="li-chat")
    retriever.next_step_id = "turn-7"
    engine = RetrieverQueryEngine.from_args(retriever, llm=MockLLM(max_tokens=8))
    response = engine.query(QUERY)
    nodes = response.source_nodes
    assert nodes
    assert {n.node.node_id for n in nodes} <= shown_ids(app, "li-chat")
    assert nodes[0].score == pytest.approx(nodes[0].node.metadata["score"])
    asyncio.run(retriever.aretrieve(QUERY))
    assert [r.step_id for r in recorded(app, "li-chat")] == ["turn-7", "step-1"]


def test_llamaindex_function_tool(app: LookupApp) -> None:
    from lookup_knowledge.adapters.frameworks.llamaindex import lookup_knowledge_tool

    tool = lookup_knowledge_tool(app, session_id="li-tool")
    assert tool.metadata.name == "lookup_knowledge"
    output = tool.call(query=QUERY)
    payload = json.loads(output.content)
    assert payload["found"] is True
    assert_names_only_returned_blocks(payload)
    assert [r.step_id for r in recorded(app, "li-tool")] == ["tool-1"]


# --------------------------------------------------------------------------- Haystack


def test_haystack_retriever_in_a_pipeline_with_a_fake_generator(app: LookupApp) -> None:
    from haystack import Document, Pipeline, component
    from haystack.components.builders import PromptBuilder

    from lookup_knowledge.adapters.frameworks.haystack import LookupKnowledgeRetriever

    @component
    class EchoGenerator:  # the fake model: answers with the prompt it was given
        @component.output_types(replies=list[str])
        def run(self, prompt: str) -> dict[str, Any]:
            return {"replies": [prompt]}

    pipeline = Pipeline()
    pipeline.add_component("retriever", LookupKnowledgeRetriever(app, session_id="hs-chat"))
    pipeline.add_component(
        "prompt",
        PromptBuilder(
            template="{% for d in documents %}[{{ d.id }}] {{ d.content }}\n{% endfor %}Q: {{ q }}",
            required_variables=["documents", "q"],
        ),
    )
    pipeline.add_component("llm", EchoGenerator())
    pipeline.connect("retriever.documents", "prompt.documents")
    pipeline.connect("prompt.prompt", "llm.prompt")
    out = pipeline.run(
        {"retriever": {"query": QUERY, "step_id": "turn-3"}, "prompt": {"q": QUERY}},
        include_outputs_from={"retriever"},
    )
    documents: list[Document] = out["retriever"]["documents"]
    assert documents
    assert out["retriever"]["found"] is True
    (reply,) = out["llm"]["replies"]
    for document in documents:
        assert f"[{document.id}]" in reply
        assert document.id == document.meta["document_id"]
    assert {d.id for d in documents} <= shown_ids(app, "hs-chat")
    assert [r.step_id for r in recorded(app, "hs-chat")] == ["turn-3"]


def test_haystack_document_scores_are_similarities_in_the_unit_interval(app: LookupApp) -> None:
    from lookup_knowledge.adapters.frameworks.haystack import LookupKnowledgeRetriever

    documents = LookupKnowledgeRetriever(app, session_id="hs-score").run(QUERY)["documents"]
    assert documents
    # The fixture's best block ranks above 1 (relevance plus rerank bonuses).
    assert max(d.meta["score"] for d in documents) > 1
    for document in documents:
        assert document.score is not None
        assert 0.0 <= document.score <= 1.0
        assert document.score == document.meta["relevance"]
    assert [d.meta["rank"] for d in documents] == sorted(d.meta["rank"] for d in documents)


# --------------------------------------------------------------------------- principal


def test_every_adapter_passes_the_hosts_principal(app: LookupApp) -> None:
    from lookup_knowledge import Principal
    from lookup_knowledge.adapters.frameworks import haystack, langchain, llamaindex

    who = Principal("acme", "alice", frozenset({"staff"}))
    langchain.LookupKnowledgeRetriever(app=app, session_id="p-lc", principal=who).invoke(QUERY)
    langchain.lookup_knowledge_tool(app, "p-lct", who).invoke(
        {"name": "lookup_knowledge", "args": {"query": QUERY}, "id": "c1", "type": "tool_call"}
    )
    llamaindex.LookupKnowledgeRetriever(app, "p-li", principal=who).retrieve(QUERY)
    llamaindex.lookup_knowledge_tool(app, "p-lit", who).call(query=QUERY)
    haystack.LookupKnowledgeRetriever(app, "p-hs", principal=who).run(QUERY)
    for session_id in ("p-lc", "p-lct", "p-li", "p-lit", "p-hs"):
        (summary,) = recorded(app, session_id)
        assert (summary.principal_tenant, summary.principal_user) == ("acme", "alice"), session_id
        assert summary.principal_groups_hash == who.groups_hash()
