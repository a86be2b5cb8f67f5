"""One lookup result in the shapes the model providers' APIs take, and back.

- Anthropic: ``search_result`` content blocks, one per evidence block, with
  ``source`` = the block's ``document_id`` and citations enabled, so that a Claude
  ``tool_result`` made of them yields ``search_result_location`` citations that point at
  our ids; ``claude_citations`` reads those citations back out of a Claude response as
  (document_id, cited_text) pairs for the Verifier.
- OpenAI: the tool output as a Chat Completions ``tool`` message or a Responses API
  ``function_call_output`` item (the function schemas are in ``tool``).

Plain dicts and duck-typed reading: no provider SDK is imported here (the tests check
the shapes against the official SDK types).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from lookup_knowledge.application.lookup import LookupResult
from lookup_knowledge.domain.errors import InvalidInputError


@dataclass(frozen=True, slots=True)
class CitedPassage:
    """One citation of a model's answer: which block it points at, what it quotes."""

    document_id: str
    cited_text: str


def anthropic_search_results(result: LookupResult) -> list[dict[str, Any]]:
    """The evidence blocks as Anthropic ``search_result`` content blocks (rank order)."""
    return [
        {
            "type": "search_result",
            "source": block.document_id,
            "title": block.title or block.source or block.document_id,
            "content": [{"type": "text", "text": block.content}],
            "citations": {"enabled": True},
        }
        for block in result.evidence_blocks
    ]


def anthropic_tool_result_content(result: LookupResult) -> list[dict[str, Any]]:
    """The content of a Claude ``tool_result`` for this lookup: the search results, then
    a text block with the tool's message (what to do when nothing was found, or that the
    lookup failed)."""
    return [*anthropic_search_results(result), {"type": "text", "text": result.message}]


def claude_citations(content: Iterable[object]) -> list[CitedPassage]:
    """The ``search_result_location`` citations of a Claude response's content blocks
    (dicts as the API returns them, or SDK objects), in order, without repeats.

    ``source`` is the ``document_id`` our search results carried. Other citation types
    (web search, documents) are not ours and are skipped."""
    passages: dict[tuple[str, str], None] = {}
    for block in content:
        data = _as_mapping(block)
        if data.get("type") != "text":
            continue
        for citation in data.get("citations") or ():
            cited = _as_mapping(citation)
            if cited.get("type") != "search_result_location":
                continue
            source, text = cited.get("source"), cited.get("cited_text")
            if not isinstance(source, str) or not isinstance(text, str):
                raise InvalidInputError("a search_result_location citation needs source and text")
            passages.setdefault((source, text), None)
    return [CitedPassage(document_id=s, cited_text=t) for s, t in passages]


def openai_tool_output(
    result: LookupResult, call_id: str, *, api: Literal["chat", "responses"] = "chat"
) -> dict[str, Any]:
    """The tool's output for OpenAI: a Chat Completions ``tool`` message, or a Responses
    API ``function_call_output`` input item; the output is the tool JSON, compact."""
    if not isinstance(call_id, str) or not call_id:
        raise InvalidInputError("call_id must be the id of the model's tool call")
    output = json.dumps(result.to_tool_json(), ensure_ascii=False, separators=(",", ":"))
    if api == "responses":
        return {"type": "function_call_output", "call_id": call_id, "output": output}
    if api == "chat":
        return {"role": "tool", "tool_call_id": call_id, "content": output}
    raise InvalidInputError(f"unknown OpenAI API {api!r}; use 'chat' or 'responses'")


def _as_mapping(value: object) -> Mapping[str, Any]:
    if isinstance(value, Mapping):
        return value
    dump = getattr(value, "model_dump", None)  # an SDK (pydantic) object
    if callable(dump):
        data = dump()
        if isinstance(data, Mapping):
            return data
    raise InvalidInputError(f"not a content block: {type(value).__name__}")
