"""The function-calling schemas of the ``lookup_knowledge`` tool."""

from __future__ import annotations

import json

from lookup_knowledge.application.tool import anthropic_tool_schema, openai_tool_schema


def test_function_calling_schemas() -> None:
    openai = openai_tool_schema()
    assert openai["type"] == "function"
    assert openai["function"]["name"] == "lookup_knowledge"
    assert openai["function"]["parameters"]["required"] == ["query"]
    anthropic = anthropic_tool_schema()
    assert anthropic["name"] == "lookup_knowledge"
    assert anthropic["input_schema"]["properties"]["query"]["type"] == "string"
    assert set(anthropic["input_schema"]["properties"]) == {"query"}
    json.dumps([openai, anthropic])
