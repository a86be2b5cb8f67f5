"""Ingest ports: where documents come from (``DocumentSource``), how they are split
(``Chunker``), and the write side of the knowledge base (``KnowledgeStore``), with the
values that cross them."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from lookup_knowledge.application.ports.search import EmbedderIdentity
from lookup_knowledge.application.tool import (
    MAX_DOC_ID_CHARS,
    MAX_ID_CHARS,
    MAX_SOURCE_NAME_CHARS,
    unstorable_text,
)
from lookup_knowledge.domain.access import NO_ACL, DocumentAccess, split_storage_key, storage_key
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
    why = unstorable_text(doc_id)
    if why is not None:
        raise InvalidInputError(f"doc_id {doc_id!r} {why}")
    return doc_id


def validate_source_name(name: str) -> str:
    """A usable ingest source name (the namespace of a source's doc_ids) or
    ``InvalidInputError``: 1..128 characters, no ``/``, no control characters, not
    ``.``/``..``, no leading or trailing whitespace."""
    if not isinstance(name, str) or not name.strip():
        raise InvalidInputError("a source name must be a non-empty string")
    if name != name.strip() or name in (".", "..") or "/" in name or "\\" in name:
        raise InvalidInputError(
            f"source name {name!r} must not contain '/' or '\\', be '.' or '..', "
            "or have leading or trailing whitespace"
        )
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in name):
        raise InvalidInputError(f"source name {name!r} contains control characters")
    why = unstorable_text(name, MAX_SOURCE_NAME_CHARS)
    if why is not None:
        raise InvalidInputError(f"source name {name[:80]!r} {why}")
    return name


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
    #: Who may see it (tenant, allowed groups, public); None: the source's default.
    access: DocumentAccess | None = None

    @property
    def doc_key(self) -> str:
        """The document as the store keys it: its doc_id within its tenant."""
        return storage_key(self.access.tenant if self.access else "", self.doc_id)

    def __post_init__(self) -> None:
        validate_doc_id(self.doc_id)
        if self.access is not None and not isinstance(self.access, DocumentAccess):
            raise InvalidInputError("access must be a DocumentAccess")
        # The same limits the audit store keeps (``evidence_problem``): a document whose
        # evidence could not be recorded exactly is refused here, not at lookup time.
        for name, value, limit in (
            ("category", self.category, MAX_ID_CHARS),
            ("source", self.source, None),
        ):
            why = unstorable_text(value, limit)
            if why is not None:
                raise InvalidInputError(f"{name} {why}")
        for name, value in (("title", self.title), ("text", self.text)):
            why = unstorable_text(value.replace("\x00", ""))  # NUL is fine here
            if why is not None:
                raise InvalidInputError(f"{name} {why}")
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

    def __post_init__(self) -> None:
        # One printable line each: a reason or a file name with line breaks or bytes
        # that are not UTF-8 must not break a report, a log line or a terminal.
        object.__setattr__(self, "source", printable(self.source))
        object.__setattr__(self, "reason", printable(self.reason))


def printable(text: str) -> str:
    """``text`` on one line, lone surrogates (undecodable file-name bytes) as ``\\xNN``."""
    flat = " ".join(str(text).split())
    try:
        flat.encode("utf-8")
    except UnicodeEncodeError:
        flat = flat.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
        try:
            flat.encode("utf-8")
        except UnicodeEncodeError:  # surrogates that were not file-name bytes
            flat = flat.encode("utf-8", "backslashreplace").decode("utf-8")
    return flat


LoadedDocument = SourceDocument | DocumentLoadFailure


class DocumentSource(ABC):
    """Where documents come from (files, a folder, a host's own records)."""

    @abstractmethod
    def documents(self) -> Iterator[LoadedDocument]:
        """Yield documents (or per-document failures); raise ``IngestError`` only when
        the source as a whole cannot be read (a missing folder)."""

    @property
    @abstractmethod
    def source_name(self) -> str:
        """The ingest source this is: the owner recorded with every row it writes. A
        run never replaces a document another source owns, and ``sync`` deletes only
        documents this source owns."""

    @property
    def default_access(self) -> DocumentAccess:
        """The access metadata of a document that does not carry its own (the
        source-level default); no ACL unless the source is given one."""
        return NO_ACL

    def bound(self, owners: Mapping[str, str]) -> DocumentSource:
        """The source to read, resolved against what the store holds (doc key -> owning
        source): a source may take its name and namespace from earlier runs (a
        sub-folder of an ingested folder keeps that folder's ids). A new value, or this
        one; the source it was called on never changes."""
        return self

    def doc_ids(self) -> Sequence[str] | None:
        """The doc_ids ``documents`` will yield, when known without reading them: lets
        a run refuse a conflict before writing anything. None: checked per document."""
        return None

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
    source_name: str = ""  # the ingest source that owns the document
    access: DocumentAccess = NO_ACL  # tenant, allowed groups, public

    @property
    def storage_key(self) -> str:
        """The row's primary key: the evidence key within the document's tenant."""
        return storage_key(self.access.tenant, self.evidence_key)

    def __post_init__(self) -> None:
        if self.evidence_key != chunk_key(self.doc_id, self.chunk_index):
            raise InvalidInputError(
                f"evidence_key {self.evidence_key!r} does not match doc_id/chunk_index"
            )


@dataclass(frozen=True, slots=True)
class StoredDocument:
    """What the store holds of one document: its content hash (chunk 0) and owner."""

    content_hash: str
    source_name: str


def doc_key_parts(doc_key: str) -> tuple[str, str]:
    """(tenant, doc_id) of a store's document key (``domain.access.storage_key``)."""
    return split_storage_key(doc_key)


def shown_doc_key(doc_key: str) -> str:
    """A document key for reports: the doc_id, with its tenant when it has one."""
    tenant, doc_id = split_storage_key(doc_key)
    return f"{doc_id} (tenant {tenant!r})" if tenant else doc_id


class KnowledgeStore(ABC):
    """The write side of the knowledge base. Raises ``IngestError`` (or
    ``SchemaMismatch`` from ``ensure_collection``) only.

    Documents are named by their *document key*: the doc_id for a document without a
    tenant, ``storage_key(tenant, doc_id)`` for a tenant's (two tenants may hold the
    same doc_id); evidence keys in ``keep_keys`` are storage keys likewise."""

    @abstractmethod
    def ensure_collection(
        self,
        dimension: int | None,
        embedder: EmbedderIdentity | None = None,
        *,
        create: bool = True,
    ) -> None:
        """Create the collection on first use (unless ``create`` is False: a dry run);
        check an existing one matches.

        ``dimension`` None means no dense vector (a sparse/BM25-only store).
        ``embedder`` is stored with a new collection and compared with the one an
        existing collection was built with (``SchemaMismatch`` when they differ).
        """

    @abstractmethod
    def documents(self, doc_ids: Sequence[str] | None = None) -> dict[str, StoredDocument]:
        """doc key -> hash and owner (read from chunk 0) for the given or all documents."""

    def document_hashes(self, doc_ids: Sequence[str] | None = None) -> dict[str, str]:
        """doc key -> content hash (read from chunk 0) for the given or all documents."""
        return {d: s.content_hash for d, s in self.documents(doc_ids).items()}

    @abstractmethod
    def upsert_chunks(self, records: Sequence[ChunkRecord]) -> int:
        """Insert or replace rows by evidence key; returns rows written."""

    @abstractmethod
    def delete_chunks_except(self, doc_ids: Sequence[str], keep_keys: Sequence[str]) -> int:
        """Delete the rows of the documents (doc keys) whose storage key is not in
        ``keep_keys``."""

    @abstractmethod
    def delete_documents(self, doc_ids: Sequence[str]) -> int:
        """Delete every row of the documents; returns rows deleted (best known)."""

    @abstractmethod
    def count(self) -> int:
        """Rows in the collection (0 when it does not exist yet)."""

    def seal(self) -> None:  # noqa: B027 - optional hook, most stores need nothing
        """Make what a run wrote searchable at full speed (Milvus: flush the growing
        segments). Called once at the end of an ingest run that changed something."""

    def notices(self) -> tuple[str, ...]:
        """Advice for the operator from the last ``seal`` (e.g. the collection has grown
        past what the embedded engine serves well); each said once, then cleared."""
        return ()

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release resources."""
