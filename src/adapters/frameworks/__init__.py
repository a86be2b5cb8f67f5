"""lookup_knowledge in agent frameworks (optional extra ``frameworks``).

- ``langchain``: ``LookupKnowledgeRetriever`` (a ``BaseRetriever`` returning
  ``Document``s) and ``lookup_knowledge_tool`` (a ``StructuredTool``);
- ``llamaindex``: ``LookupKnowledgeRetriever`` (a ``BaseRetriever`` returning
  ``NodeWithScore``) and ``lookup_knowledge_tool`` (a ``FunctionTool``);
- ``haystack``: ``LookupKnowledgeRetriever`` (a ``@component``).

Each wraps a ``LookupApp``: every call runs the same ``LookupKnowledge`` use case and is
recorded under the session id the host gives (never one the model chooses), with the
framework's call or run id as the step id unless the host passes its own. Every document
or node carries the block's ``document_id`` (what the agent cites), ``source``, ``title``,
``breadcrumb``, ``score`` (the ranking score: relevance plus rerank bonuses, may exceed
1), ``relevance`` (in [0, 1]), ``rank`` and the ``invocation_id`` in its metadata; the
audit fields (``AUDIT_KEYS``) are for the host, not for the model's prompt.

Importing this package imports no framework; each module imports its own.
"""

from __future__ import annotations

from typing import Any

from lookup_knowledge.domain.projection import ProjectedBlock

# Metadata the host audits with; a prompt or an embedding has no use for it.
AUDIT_KEYS = ("score", "relevance", "rank", "invocation_id")


def block_metadata(block: ProjectedBlock, invocation_id: str) -> dict[str, Any]:
    """What each framework's document or node carries besides its text."""
    return {
        "document_id": block.document_id,
        "source": block.source,
        "title": block.title,
        "breadcrumb": block.breadcrumb,
        "score": block.score,
        "relevance": block.relevance,
        "rank": block.rank,
        "invocation_id": invocation_id,
    }
