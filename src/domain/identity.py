"""Evidence identity (``docs/architecture.md``, Evidence identity).

``evidenceKey`` is ``docId#chunk-N`` when the hit carries both a document id and a chunk
index, ``vector:{id}`` when it carries only a vector id, ``rank:{n}`` otherwise. The
key is the only thing dedup compares, and it is what the agent sees as ``document_id``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

DOC_ID_ALIASES = ("docId", "doc_id")
CHUNK_INDEX_ALIASES = ("chunkIndex", "chunk_index")


@dataclass(frozen=True, slots=True)
class EvidenceIdentity:
    evidence_key: str
    doc_id: str | None
    chunk_index: int | None

    def __post_init__(self) -> None:
        if not self.evidence_key:
            raise ValueError("evidence_key must not be empty")
        if self.chunk_index is not None and self.chunk_index < 0:
            raise ValueError("chunk_index must be non-negative")


def chunk_key(doc_id: str, chunk_index: int) -> str:
    return f"{doc_id}#chunk-{chunk_index}"


def split_chunk_key(key: str) -> tuple[str, int] | None:
    """``(doc_id, chunk_index)`` of a ``chunk_key``; None for a ``vector:``/``rank:`` key
    or anything else that is not one."""
    doc_id, mark, index = key.rpartition("#chunk-")
    if not mark or not doc_id or not index.isascii() or not index.isdigit():
        return None
    return doc_id, int(index)


def _first_present(metadata: Mapping[str, object], aliases: tuple[str, ...]) -> object:
    for alias in aliases:
        value = metadata.get(alias)
        if value is not None:
            return value
    return None


def parse_doc_id(value: object) -> str | None:
    """A usable document id, or None. Blank strings do not identify a document."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, str):
        text = value.strip()
        return text or None
    if isinstance(value, int):
        return str(value)
    return None


def parse_chunk_index(value: object) -> int | None:
    """A whole non-negative chunk index, or None for anything else.

    Accepts ints, integral floats (``3.0``) and decimal strings (``"3"``); rejects
    booleans, negatives, fractions, NaN/inf and junk instead of raising, because an
    older row with odd metadata must degrade to the ``vector:`` fallback, not crash.
    """
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value >= 0 else None
    if isinstance(value, float):
        if not math.isfinite(value) or not value.is_integer() or value < 0:
            return None
        return int(value)
    if isinstance(value, str):
        text = value.strip()
        if text.isascii() and text.isdigit():
            return int(text)
        return None
    return None


def parse_vector_id(value: object) -> str | None:
    if value is None or isinstance(value, bool):
        return None
    text = str(value).strip()
    return text or None


def extract_identity(
    metadata: Mapping[str, object], vector_id: object, original_rank: int
) -> EvidenceIdentity:
    """Apply the identity rules to one hit. ``original_rank`` is 1-based within the search response."""
    doc_id = parse_doc_id(_first_present(metadata, DOC_ID_ALIASES))
    chunk_index = parse_chunk_index(_first_present(metadata, CHUNK_INDEX_ALIASES))
    vid = parse_vector_id(vector_id)
    if doc_id is not None and chunk_index is not None:
        key = chunk_key(doc_id, chunk_index)
    elif vid is not None:
        key = f"vector:{vid}"
    else:
        key = f"rank:{original_rank}"
    return EvidenceIdentity(evidence_key=key, doc_id=doc_id, chunk_index=chunk_index)
