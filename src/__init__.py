"""lookup-knowledge: one evidence tool for LLM agents, ``lookup_knowledge(query)``.

The public surface is loaded lazily so that importing the package builds nothing and
pulls in no driver: ``from lookup_knowledge import create_app`` imports the composition
root only when it is first used.
"""

from __future__ import annotations

from typing import Any

#: Every error a host may catch (``except lookup_knowledge.SearchUnavailable``); each has a
#: stable ``code``. docs/operations.md lists them ("Errors and their codes").
ERROR_TYPES = (
    "LookupKnowledgeError",
    "ConfigurationError",
    "ExtraNotInstalled",
    "InvalidInputError",
    "AccessDenied",
    "SearchError",
    "SearchUnavailable",
    "SearchStoreInUse",
    "SearchTimeout",
    "SearchBadRequest",
    "UnsupportedSearchMode",
    "SchemaMismatch",
    "EmbeddingError",
    "IngestError",
    "IngestConflict",
    "AuditError",
    "AuditUnavailable",
    "AuditNotRecorded",
    "JudgeError",
    "RerankerError",
    "NotFoundError",
    "InternalError",
)

__all__ = [
    "AccessMode",
    "CitedPassage",
    "DocumentAccess",
    "LookupApp",
    "Principal",
    "Settings",
    "anthropic_search_results",
    "anthropic_tool_result_content",
    "anthropic_tool_schema",
    "claude_citations",
    "create_app",
    "openai_tool_output",
    "openai_tool_schema",
    *ERROR_TYPES,
]

_FORMATS = "lookup_knowledge.application.agent_formats"
_ACCESS = "lookup_knowledge.domain.access"
_LAZY = {
    "AccessMode": (_ACCESS, "AccessMode"),
    "DocumentAccess": (_ACCESS, "DocumentAccess"),
    "Principal": (_ACCESS, "Principal"),
    "CitedPassage": (_FORMATS, "CitedPassage"),
    "anthropic_search_results": (_FORMATS, "anthropic_search_results"),
    "anthropic_tool_result_content": (_FORMATS, "anthropic_tool_result_content"),
    "claude_citations": (_FORMATS, "claude_citations"),
    "openai_tool_output": (_FORMATS, "openai_tool_output"),
    "create_app": ("lookup_knowledge.adapters.api", "create_app"),
    "LookupApp": ("lookup_knowledge.adapters.api", "LookupApp"),
    "Settings": ("lookup_knowledge.adapters.config", "Settings"),
    "openai_tool_schema": ("lookup_knowledge.application.tool", "openai_tool_schema"),
    "anthropic_tool_schema": ("lookup_knowledge.application.tool", "anthropic_tool_schema"),
    **{name: ("lookup_knowledge.domain.errors", name) for name in ERROR_TYPES},
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        module_name, attribute = _LAZY[name]
        return getattr(importlib.import_module(module_name), attribute)
    raise AttributeError(f"module 'lookup_knowledge' has no attribute {name!r}")
