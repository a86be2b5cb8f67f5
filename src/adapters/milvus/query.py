"""What one search request sends to Milvus (``SearchQuery``), and the error for a mode
the server or the collection cannot answer (``unsupported_mode``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from lookup_knowledge.adapters.milvus.connection import ServerCapabilities
from lookup_knowledge.adapters.milvus.schema import CollectionLayout
from lookup_knowledge.domain.access import UNRESTRICTED, AccessScope
from lookup_knowledge.domain.errors import UnsupportedSearchMode
from lookup_knowledge.domain.model import SearchMode


@dataclass(frozen=True, slots=True)
class SearchQuery:
    """What one search request sends: the query vector, the analysed query terms (the
    BM25 input), the dense search parameters (``ef`` for a graph index), the filter
    expression and the fields to return."""

    vector: list[float] | None
    terms: str
    dense_params: Mapping[str, Any]
    expression: str = ""
    output_fields: Sequence[str] = ()
    #: The filter as field -> exact value (the Lite full-text index applies it).
    where: Mapping[str, str] = field(default_factory=dict)
    with_text: bool = False
    access: AccessScope = UNRESTRICTED


def unsupported_mode(
    mode: SearchMode, server: ServerCapabilities, layout: CollectionLayout, uri: str
) -> UnsupportedSearchMode:
    """Why ``mode`` cannot be searched on this server and collection, and what to do."""
    if mode.needs_query_vector and not layout.has_dense:
        return UnsupportedSearchMode(
            f"{mode.value} search needs a dense vector field; collection "
            f"{layout.name!r} was built without an embedder (sparse only). Use "
            "mode=sparse, or ingest with an embedder into a new collection."
        )
    if not server.bm25 or not server.hybrid:
        return UnsupportedSearchMode(
            f"{mode.value} search needs the BM25 full-text function and hybrid search "
            f"of {server.requirement()}; the server at {uri} is "
            f"{server.version or 'unknown'}. Use mode=dense, or upgrade Milvus."
        )
    return UnsupportedSearchMode(
        f"{mode.value} search needs the BM25 function on the text field, but collection "
        f"{layout.name!r} was created without it (on an older Milvus): create a new "
        "collection on this server and ingest again."
    )
