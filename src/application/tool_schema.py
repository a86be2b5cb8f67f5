"""The ``lookup_knowledge`` tool as host agents register it (function calling formats)."""

from __future__ import annotations

from typing import Any

TOOL_NAME = "lookup_knowledge"

TOOL_DESCRIPTION = (
    "Search the knowledge base for evidence. Returns evidence blocks, each with a "
    "document_id, source, title, breadcrumb and an excerpt, plus a packed context. "
    "Cite only document_id values returned by this tool in this conversation. "
    "If found is false, say that no evidence was found instead of answering from memory."
)

QUERY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "query": {
            "type": "string",
            "description": (
                "What to look up, in the user's language: a question or keywords. "
                "Include exact error codes, hostnames, versions or ids when known."
            ),
            "minLength": 1,
            "maxLength": 4000,
        }
    },
    "required": ["query"],
    "additionalProperties": False,
}


def openai_tool_schema() -> dict[str, Any]:
    """OpenAI Chat Completions / Responses ``tools`` entry."""
    return {
        "type": "function",
        "function": {
            "name": TOOL_NAME,
            "description": TOOL_DESCRIPTION,
            "parameters": QUERY_SCHEMA,
            "strict": False,
        },
    }


def anthropic_tool_schema() -> dict[str, Any]:
    """Anthropic Messages API ``tools`` entry."""
    return {"name": TOOL_NAME, "description": TOOL_DESCRIPTION, "input_schema": QUERY_SCHEMA}
