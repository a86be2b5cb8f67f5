"""Provider-native formats of a real lookup (Milvus Lite + SQLite), checked against the
official SDK types offline, and the Claude citations round trip into the Verifier."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from anthropic.types import Message, SearchResultBlockParam, ToolResultBlockParam
from openai.types.chat import ChatCompletionFunctionToolParam, ChatCompletionToolMessageParam
from openai.types.responses import FunctionToolParam
from openai.types.responses.response_input_item_param import FunctionCallOutput
from pydantic import TypeAdapter

from lookup_knowledge import (
    anthropic_search_results,
    anthropic_tool_result_content,
    claude_citations,
    create_app,
    openai_tool_output,
    openai_tool_schema,
)
from lookup_knowledge.adapters.api import LookupApp
from lookup_knowledge.application.lookup import LookupResult
from lookup_knowledge.domain.errors import InvalidInputError


def _validate(kind: Any, value: Mapping[str, Any]) -> None:
    """Valid as the SDK's TypedDict, with no key the type does not declare."""
    TypeAdapter(kind).validate_python(value)
    assert set(value) <= set(kind.__annotations__), set(value) - set(kind.__annotations__)


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LookupApp]:
    root = tmp_path_factory.mktemp("formats")
    kb = root / "kb" / "database"
    kb.mkdir(parents=True)
    (kb / "failover.md").write_text(
        "# Failover\n\n## Promote the replica\n\nRun `pg_ctl promote` on the replica, then "
        "repoint PgBouncer. The whole switch takes about 30 seconds.\n\n## After\n\n"
        "Rebuild the old primary as a replica within 24 hours.\n",
        encoding="utf-8",
    )
    lookup_app = create_app(
        overrides={
            "data-dir": str(root / "data"),
            "embedder.provider": "hashing",
            "rag.min-relevance": 0.0,
        }
    )
    lookup_app.ingest([root / "kb"], root=root / "kb")
    yield lookup_app
    lookup_app.close()


@pytest.fixture(scope="module")
def result(app: LookupApp) -> LookupResult:
    found = app.lookup_result("promote the replica pgbouncer", session_id="formats-claude")
    assert found.evidence_blocks
    return found


def test_search_results_validate_as_anthropic_blocks(result: LookupResult) -> None:
    blocks = anthropic_search_results(result)
    assert [b["source"] for b in blocks] == [b.document_id for b in result.evidence_blocks]
    for block in blocks:
        _validate(SearchResultBlockParam, block)
        assert block["citations"] == {"enabled": True}
    tool_result = {
        "type": "tool_result",
        "tool_use_id": "toolu_01",
        "content": anthropic_tool_result_content(result),
    }
    _validate(ToolResultBlockParam, tool_result)


def test_openai_tool_schemas_validate_for_chat_completions_and_responses() -> None:
    _validate(ChatCompletionFunctionToolParam, openai_tool_schema())
    _validate(FunctionToolParam, openai_tool_schema("responses"))
    with pytest.raises(InvalidInputError):
        openai_tool_schema("assistants")  # type: ignore[arg-type]


def test_openai_tool_outputs_validate(result: LookupResult) -> None:
    _validate(ChatCompletionToolMessageParam, openai_tool_output(result, "call_1"))
    _validate(FunctionCallOutput, openai_tool_output(result, "call_1", api="responses"))
    with pytest.raises(InvalidInputError):
        openai_tool_output(result, "")


def _claude_answer(citations: list[dict[str, Any]]) -> Message:
    """A Claude response as the Messages API returns it, parsed by the SDK."""
    return Message.model_validate(
        {
            "id": "msg_01",
            "type": "message",
            "role": "assistant",
            "model": "claude-test",
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 10},
            "content": [
                {"type": "text", "text": "Promote the replica.", "citations": citations},
                {"type": "text", "text": "That is all.", "citations": None},
            ],
        }
    )


def test_claude_citations_round_trip_into_verify_citations(
    app: LookupApp, result: LookupResult
) -> None:
    block = result.evidence_blocks[0]
    quoted = block.content[:40]
    answer = _claude_answer(
        [
            {
                "type": "search_result_location",
                "source": block.document_id,
                "title": block.title,
                "cited_text": quoted,
                "search_result_index": 0,
                "start_block_index": 0,
                "end_block_index": 0,
            },
            {
                "type": "search_result_location",
                "source": "made-up/doc.md#chunk-9",
                "title": "invented",
                "cited_text": "nothing",
                "search_result_index": 1,
                "start_block_index": 0,
                "end_block_index": 0,
            },
        ]
    )
    passages = claude_citations(answer.content)
    assert [(p.document_id, p.cited_text) for p in passages] == [
        (block.document_id, quoted),
        ("made-up/doc.md#chunk-9", "nothing"),
    ]
    report = app.verify_citations("formats-claude", [p.document_id for p in passages])
    assert report.valid_ids == (block.document_id,)
    assert report.unknown == ("made-up/doc.md#chunk-9",)


def test_claude_citations_read_plain_api_dicts_and_skip_other_citation_kinds() -> None:
    content = [
        {"type": "tool_use", "id": "toolu_1", "name": "lookup_knowledge", "input": {}},
        {
            "type": "text",
            "text": "x",
            "citations": [
                {"type": "web_search_result_location", "url": "https://example.org"},
                {"type": "search_result_location", "source": "a#chunk-0", "cited_text": "q"},
                {"type": "search_result_location", "source": "a#chunk-0", "cited_text": "q"},
            ],
        },
    ]
    assert [p.document_id for p in claude_citations(content)] == ["a#chunk-0"]
    with pytest.raises(InvalidInputError):
        claude_citations([{"type": "text", "citations": [{"type": "search_result_location"}]}])
    with pytest.raises(InvalidInputError):
        claude_citations([Path("not a block")])
