"""Ingest ports: where documents come from (``DocumentSource``), how they are split
(``Chunker``), and the write side of the knowledge base (``KnowledgeStore``), with the
values that cross them."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime

from lookup_knowledge.application.tool import MAX_DOC_ID_CHARS
from lookup_knowledge.domain.errors import InvalidInputError
from lookup_knowledge.domain.identity import chunk_key

DOCUMENT_FORMATS = frozenset({"markdown", "text"})

# --------------------------------------------------------------------------- DTOs


def validate_doc_id(doc_id: str) -> str:
    """A usable, stable document id or ``InvalidInputError``."""
    if not isinstance(doc_id, str) or not doc_id.strip():
        raise InvalidInputError("doc_id must be a non-empty string")
    if doc_id != doc_id.strip():
        raise InvalidInputError(f"doc_id {doc_id!r} has leading or trailing whitespace")
    if len(doc_id) > MAX_DOC_ID_CHARS:
        raise InvalidInputError(
            f"doc_id is {len(doc_id)} characters; the limit is {MAX_DOC_ID_CHARS}"
        )
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in doc_id):
        raise InvalidInputError(f"doc_id {doc_id!r} contains control characters")
    return doc_id


@dataclass(frozen=True, slots=True)
class SourceDocument:
    """One document as a loader read it. ``text`` is the body without front matter."""

    doc_id: str
    text: str
    source: str = ""
    title: str = ""
    category: str = ""
    source_type: str = ""
    format: str = "markdown"  # "markdown" (headings split sections) or "text"

    def __post_init__(self) -> None:
        validate_doc_id(self.doc_id)
        if self.format not in DOCUMENT_FORMATS:
            raise InvalidInputError(
                f"document format {self.format!r} is not one of {sorted(DOCUMENT_FORMATS)}"
            )


@dataclass(frozen=True, slots=True)
class DocumentLoadFailure:
    """A document the source could not read; ingest reports it and goes on.

    ``doc_id`` is set when the source knows which document it was, so that ``sync``
    never deletes a document only because it could not be read this time.
    """

    source: str
    reason: str
    doc_id: str | None = None


LoadedDocument = SourceDocument | DocumentLoadFailure


class DocumentSource(ABC):
    """Where documents come from (files, a folder, a host's own records)."""

    @abstractmethod
    def documents(self) -> Iterator[LoadedDocument]:
        """Yield documents (or per-document failures); raise ``IngestError`` only when
        the source as a whole cannot be read (a missing folder)."""

    def estimated_count(self) -> int | None:
        """How many documents ``documents`` will yield, when cheap to know (progress)."""
        return None

    def in_scope(self, doc_id: str) -> bool:
        """Whether ``sync`` may delete ``doc_id`` when this source no longer yields it.

        The default is the whole collection; a source that covers part of it (one
        sub-folder, some files) narrows it.
        """
        return True


@dataclass(frozen=True, slots=True)
class Chunk:
    doc_id: str
    chunk_index: int
    text: str
    title: str = ""
    breadcrumb: str = ""

    @property
    def evidence_key(self) -> str:
        return chunk_key(self.doc_id, self.chunk_index)


class Chunker(ABC):
    """Splits one document into chunks with contiguous indexes from 0."""

    @property
    @abstractmethod
    def fingerprint(self) -> str:
        """Identifies the chunking settings; a change re-chunks every document."""

    @abstractmethod
    def chunk(self, document: SourceDocument) -> list[Chunk]: ...


@dataclass(frozen=True, slots=True)
class ChunkRecord:
    """One row of the knowledge store. ``vector`` is None for a sparse-only store."""

    evidence_key: str
    doc_id: str
    chunk_index: int
    text: str
    category: str
    source: str
    title: str
    breadcrumb: str
    source_type: str
    content_hash: str
    ingested_at: datetime
    vector: tuple[float, ...] | None = None

    def __post_init__(self) -> None:
        if self.evidence_key != chunk_key(self.doc_id, self.chunk_index):
            raise InvalidInputError(
                f"evidence_key {self.evidence_key!r} does not match doc_id/chunk_index"
            )


class KnowledgeStore(ABC):
    """The write side of the knowledge base. Raises ``IngestError`` (or
    ``SchemaMismatch`` from ``ensure_collection``) only."""

    @abstractmethod
    def ensure_collection(self, dimension: int | None) -> None:
        """Create the collection on first use; check an existing one matches.

        ``dimension`` None means no dense vector (a sparse/BM25-only store).
        """

    @abstractmethod
    def document_hashes(self, doc_ids: Sequence[str] | None = None) -> dict[str, str]:
        """doc_id -> content hash (read from chunk 0) for the given or all documents."""

    @abstractmethod
    def upsert_chunks(self, records: Sequence[ChunkRecord]) -> int:
        """Insert or replace rows by evidence key; returns rows written."""

    @abstractmethod
    def delete_chunks_except(self, doc_ids: Sequence[str], keep_keys: Sequence[str]) -> int:
        """Delete the rows of ``doc_ids`` whose evidence key is not in ``keep_keys``."""

    @abstractmethod
    def delete_documents(self, doc_ids: Sequence[str]) -> int:
        """Delete every row of the documents; returns rows deleted (best known)."""

    @abstractmethod
    def count(self) -> int:
        """Rows in the collection (0 when it does not exist yet)."""

    def seal(self) -> None:  # noqa: B027 - optional hook, most stores need nothing
        """Make what a run wrote searchable at full speed (Milvus: flush the growing
        segments). Called once at the end of an ingest run that changed something."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release resources."""
