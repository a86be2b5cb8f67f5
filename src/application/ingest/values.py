"""The values of ingest: what a run is given (``IngestConfig``, a ``StaticDocumentSource``),
what it reports (``IngestProgress``, ``IngestPlan``, ``IngestReport``), and the hashes that
decide "unchanged" (``document_hash``, ``embedding_input``)."""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from lookup_knowledge.application.ports import (
    Chunk,
    DocumentLoadFailure,
    DocumentSource,
    LoadedDocument,
    SourceDocument,
    validate_source_name,
)
from lookup_knowledge.domain.access import NO_ACL, DocumentAccess
from lookup_knowledge.domain.errors import (
    InvalidInputError,
)

logger = logging.getLogger(__name__)


#: Bumped when the way rows are derived from a document changes, so that every
#: document is rewritten once by the next ingest.
ROW_FORMAT_VERSION = 1
#: The content hash a new document's chunk 0 carries until all its chunks are written.
PENDING_HASH = "pending"


class StaticDocumentSource(DocumentSource):
    """Documents a host already holds in memory (and tests)."""

    def __init__(
        self,
        documents: Sequence[LoadedDocument],
        *,
        prefix: str = "",
        source_name: str = "host",
        access: DocumentAccess = NO_ACL,
    ) -> None:
        self._documents = list(documents)
        self._prefix = prefix
        self._name = validate_source_name(source_name)
        self._access = access

    @property
    def source_name(self) -> str:
        return self._name

    @property
    def default_access(self) -> DocumentAccess:
        return self._access

    def doc_ids(self) -> list[str]:
        return [d.doc_id for d in self._documents if isinstance(d, SourceDocument)]

    def documents(self) -> Iterator[LoadedDocument]:
        yield from self._documents

    def estimated_count(self) -> int:
        return len(self._documents)

    def in_scope(self, doc_id: str) -> bool:
        return doc_id.startswith(self._prefix)


# --------------------------------------------------------------------------- progress, report


@dataclass(frozen=True, slots=True)
class IngestProgress:
    """One progress event. ``phase``: scan, write, sync or done."""

    phase: str
    documents_done: int
    documents_total: int | None
    chunks_written: int
    current: str = ""


ProgressCallback = Callable[[IngestProgress], None]


@dataclass(frozen=True, slots=True)
class IngestPlan:
    """What a run does (or, dry-run, would do) by doc_id. ``deleted`` holds the
    documents ``sync`` removes and those that became empty; ``conflicts`` the
    (doc_id, owning source) pairs that refuse the run."""

    added: tuple[str, ...] = ()
    updated: tuple[str, ...] = ()
    deleted: tuple[str, ...] = ()
    conflicts: tuple[tuple[str, str], ...] = ()

    def as_dict(self) -> dict[str, object]:
        return {
            "added": list(self.added),
            "updated": list(self.updated),
            "deleted": list(self.deleted),
            "conflicts": [{"docId": d, "owner": o} for d, o in self.conflicts],
        }


@dataclass(frozen=True, slots=True)
class IngestReport:
    documents_seen: int
    added: int
    updated: int
    unchanged: int
    empty: int
    deleted: int
    chunks_written: int
    chunks_deleted: int
    failures: tuple[DocumentLoadFailure, ...] = ()
    duration_ms: float = 0.0
    source_name: str = ""
    dry_run: bool = False
    #: Set on a dry run: what would be added, updated, deleted (nothing was written).
    plan: IngestPlan | None = None
    #: Advice from the store for the operator (``KnowledgeStore.notices``).
    notices: tuple[str, ...] = ()

    @property
    def wrote_nothing(self) -> bool:
        return self.chunks_written == 0 and self.chunks_deleted == 0

    @property
    def failed(self) -> int:
        """Documents that could not be ingested (each in ``failures`` with its reason)."""
        return len(self.failures)

    def as_dict(self) -> dict[str, object]:
        out: dict[str, object] = {
            "sourceName": self.source_name,
            "dryRun": self.dry_run,
            "documentsSeen": self.documents_seen,
            "added": self.added,
            "updated": self.updated,
            "unchanged": self.unchanged,
            "empty": self.empty,
            "deleted": self.deleted,
            "chunksWritten": self.chunks_written,
            "chunksDeleted": self.chunks_deleted,
            "failures": [
                {"source": f.source, "docId": f.doc_id, "reason": f.reason} for f in self.failures
            ],
            "durationMs": round(self.duration_ms, 3),
        }
        if self.plan is not None:
            out["plan"] = self.plan.as_dict()
        if self.notices:
            out["notices"] = list(self.notices)
        return out


@dataclass(frozen=True, slots=True)
class IngestConfig:
    embed_batch_size: int = 64
    write_batch_size: int = 512
    #: Chunks collected (across documents) before they are embedded shortest first and
    #: written: the wider, the less padding per embed batch. At least a write batch.
    sort_window: int = 1024

    def __post_init__(self) -> None:
        if self.embed_batch_size < 1:
            raise InvalidInputError("embed_batch_size must be >= 1")
        if self.write_batch_size < 1:
            raise InvalidInputError("write_batch_size must be >= 1")
        if self.sort_window < 1:
            raise InvalidInputError("sort_window must be >= 1")

    @property
    def flush_at(self) -> int:
        """Pending chunks that trigger a flush (embed, then write in write batches)."""
        return max(self.write_batch_size, self.sort_window)


# --------------------------------------------------------------------------- use case


def document_hash(document: SourceDocument, fingerprint: str) -> str:
    """The content hash stored on every row of a document (chunk 0 is authoritative)."""
    payload = json.dumps(
        [
            ROW_FORMAT_VERSION,
            fingerprint,
            document.doc_id,
            document.text,
            document.title,
            document.category,
            document.source,
            document.source_type,
            document.format,
            # Only with access metadata, so documents without keep their hash.
            *(
                [
                    document.access.tenant,
                    sorted(document.access.allowed_groups),
                    document.access.public,
                ]
                if document.access is not None and document.access.has_acl
                else []
            ),
        ],
        ensure_ascii=False,
        separators=(",", ":"),
    )
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def embedding_input(chunk: Chunk) -> str:
    """What is embedded for a chunk: its heading path (or title) for context, then text."""
    prefix = chunk.breadcrumb or chunk.title
    return f"{prefix}\n{chunk.text}" if prefix else chunk.text
