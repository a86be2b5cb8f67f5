"""The ``lookup_knowledge`` tool: its name, its limits and its schema as host agents
register it (function-calling formats). Every module that checks or stores one of these
values reads it from here."""

from __future__ import annotations

from typing import Any, Literal

from lookup_knowledge.domain.errors import InvalidInputError

TOOL_NAME = "lookup_knowledge"

#: The longest query the tool accepts (the schema's maxLength says the same).
MAX_QUERY_CHARS = 4000
#: Session, step, tool-call ids, categories and error codes: what the audit store keeps.
MAX_ID_CHARS = 255
#: A document_id (evidence key) or doc_id as the audit store keeps it.
MAX_DOCUMENT_ID_CHARS = 1024
#: A doc_id as ingest accepts it (leaves room for the ``#chunk-N`` suffix).
MAX_DOC_ID_CHARS = 512
#: Counts and ranks: an SQL INTEGER.
MAX_INT = 2**31 - 1
#: An ingest source's name (the namespace of its doc_ids), as the knowledge store keeps it.
MAX_SOURCE_NAME_CHARS = 128


def unstorable_text(value: str, max_chars: int | None = None) -> str | None:
    """Why ``value`` cannot be stored and read back exactly as it is, or None.

    The audit store's limits (``docs/architecture.md``, Audit store): at most
    ``max_chars`` characters, no NUL (PostgreSQL text rejects it, so the store would
    write U+FFFD) and no lone UTF-16 surrogate (no UTF-8 encoder accepts one). Ingest
    and the lookup apply the same rule, so an id the agent receives is the id recorded.
    """
    if not isinstance(value, str):
        return f"is a {type(value).__name__}, not text"
    if max_chars is not None and len(value) > max_chars:
        return f"is {len(value)} characters; the limit is {max_chars}"
    if "\x00" in value:
        return "contains a NUL character"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return "contains a lone surrogate (not valid Unicode text)"
    return None


TOOL_DESCRIPTION = (
    "Search the knowledge base for evidence. Returns evidence blocks, each with a "
    "document_id, an excerpt (content) and where it is from (source, title, breadcrumb; "
    "a block naming none of these is from where the previous block of its document is). "
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
            "maxLength": MAX_QUERY_CHARS,
        }
    },
    "required": ["query"],
    "additionalProperties": False,
}


#: The tool JSON's shape (either payload profile): what an MCP ``outputSchema`` declares.
RESULT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": [
        "found",
        "evidenceBlocks",
        "contextPack",
        "retrievalTrace",
        "rerankTrace",
        "relevanceLevel",
        "completenessHint",
        "retrievedDomainsThisSession",
        "message",
        "invocationId",
    ],
    "properties": {
        "found": {"type": "boolean"},
        "evidenceBlocks": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["document_id", "content", "score"],
                "properties": {
                    "document_id": {"type": "string", "description": "What to cite."},
                    "source": {"type": "string"},
                    "title": {"type": "string"},
                    "breadcrumb": {"type": "string"},
                    "content": {"type": "string"},
                    "score": {"type": "number"},
                    "rank": {"type": "integer", "minimum": 1},
                    "hitReasons": {"type": "array", "items": {"type": "string"}},
                },
            },
        },
        "contextPack": {"type": "object"},
        "retrievalTrace": {"type": "object"},
        "rerankTrace": {"type": "array", "items": {"type": "object"}},
        "relevanceLevel": {"type": "string", "enum": ["none", "low", "medium", "high"]},
        "completenessHint": {"type": "string"},
        "retrievedDomainsThisSession": {"type": "array", "items": {"type": "string"}},
        "message": {"type": "string"},
        "invocationId": {"type": "string"},
    },
}


def openai_tool_schema(api: Literal["chat", "responses"] = "chat") -> dict[str, Any]:
    """The OpenAI ``tools`` entry: Chat Completions (``{"type": "function", "function":
    {...}}``) by default, or the Responses API's flat ``FunctionToolParam``."""
    if api == "responses":
        return {
            "type": "function",
            "name": TOOL_NAME,
            "description": TOOL_DESCRIPTION,
            "parameters": QUERY_SCHEMA,
            "strict": False,
        }
    if api != "chat":
        raise InvalidInputError(f"unknown OpenAI API {api!r}; use 'chat' or 'responses'")
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
