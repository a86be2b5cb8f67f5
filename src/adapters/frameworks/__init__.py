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
``breadcrumb``, ``score``, ``rank`` and the ``invocation_id`` in its metadata.

Importing this package imports no framework; each module imports its own.
"""

from __future__ import annotations

from typing import Any

from lookup_knowledge.domain.projection import ProjectedBlock


def block_metadata(block: ProjectedBlock, invocation_id: str) -> dict[str, Any]:
    """What each framework's document or node carries besides its text."""
    return {
        "document_id": block.document_id,
        "source": block.source,
        "title": block.title,
        "breadcrumb": block.breadcrumb,
        "score": block.score,
        "rank": block.rank,
        "invocation_id": invocation_id,
    }
