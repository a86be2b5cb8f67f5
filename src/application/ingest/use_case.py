"""The ``IngestDocuments`` use case: documents in, identified chunks in the knowledge store.

Read top to bottom, ``IngestDocuments.execute`` is the whole flow:

    ensure the collection (embedder identity and dimension) -> read what the store
    holds (doc_id -> content hash, owning source) -> the source resolved against it
    (``bound``: its name and namespace) -> refuse documents another source owns
    (``IngestConflict``, before anything is written) ->
    for each loaded document: unchanged (same hash) -> skip; otherwise chunk -> collect a
    sort window of chunks across documents -> embed them shortest first in embed batches
    -> write in write batches -> (sync) delete documents of this source
    that disappeared from it -> report counts (``dry_run``: the plan, nothing written)

Ownership: every row carries the name of the source that wrote it (``source_name``).
A run never replaces a document another source owns and ``sync`` deletes only
documents the running source owns, so ingesting one folder never touches another's.

Identity: every chunk row carries ``doc_id`` and ``chunk_index`` (contiguous from 0)
and its primary key is the evidence key ``docId#chunk-N`` (``docs/architecture.md``, Evidence identity), so the lookup
pipeline can dedup and cap on ids alone.

Access: every document has access metadata (tenant, allowed groups, public), its own
(front matter, API) or the source's default. Two tenants may hold the same doc_id, so
the run names documents by their *document key* (``SourceDocument.doc_key``: the
doc_id within its tenant) and a tenant's rows are keyed by ``storage_key(tenant,
evidence_key)``; ``sync`` deletes only in the tenants the run covers (the source's
default tenant and the tenants of the documents it yielded).

Crash safety: the content hash that decides "unchanged" is read from chunk 0, and
chunk 0 with the new hash is always written last. A changed document is written as
"chunks 1..n-1, delete its stale rows, chunk 0"; a new one as "chunk 0 marked pending,
chunks 1..n-1, chunk 0". A run that dies half-way therefore leaves chunk 0 with the
old hash or the pending mark, the next run sees a changed document and rewrites it
(deleting leftovers), and no stale chunk survives a completed write. New documents
need no delete, which keeps a first bulk ingest close to raw insert speed.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from lookup_knowledge.application.ingest.values import (
    PENDING_HASH,
    IngestConfig,
    IngestPlan,
    IngestProgress,
    IngestReport,
    ProgressCallback,
    document_hash,
    embedding_input,
)
from lookup_knowledge.application.ports import (
    Chunk,
    Chunker,
    ChunkRecord,
    Clock,
    DocumentLoadFailure,
    DocumentSource,
    Embedder,
    KnowledgeStore,
    SourceDocument,
    StoredDocument,
    doc_key_parts,
    shown_doc_key,
)
from lookup_knowledge.application.tool import MAX_INT
from lookup_knowledge.domain.access import NO_ACL, storage_key
from lookup_knowledge.domain.errors import (
    EmbeddingError,
    IngestConflict,
    IngestError,
    InvalidInputError,
)

logger = logging.getLogger(__name__)


@dataclass
class _Pending:
    document: SourceDocument
    chunks: list[Chunk]
    content_hash: str
    existed: bool


@dataclass(frozen=True, slots=True)
class _RunContext:
    """What one run knows before it reads a document; never changes during the run."""

    total: int | None
    notify: ProgressCallback
    fingerprint: str
    existing: Mapping[str, str]  # doc key -> content hash, as the store held it
    owners: Mapping[str, str]  # doc key -> owning source, as the store held it
    source_name: str
    default_tenant: str = ""
    dry_run: bool = False

    def owner_other_than_me(self, doc_id: str) -> str | None:
        owner = self.owners.get(doc_id)
        return owner if owner is not None and owner != self.source_name else None


@dataclass(slots=True)
class _Tally:
    """The counts a run reports."""

    added: int = 0
    updated: int = 0
    unchanged: int = 0
    empty: int = 0
    deleted: int = 0
    chunks_written: int = 0
    chunks_deleted: int = 0


@dataclass(slots=True)
class _PlanLists:
    """What a dry run would do (document keys as shown), and the conflicts found."""

    added: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    conflicts: list[tuple[str, str]] = field(default_factory=list)


@dataclass(slots=True)
class _Run:
    """One ingest run: its fixed context, its counts and plan, what it has seen, what
    waits to be written."""

    context: _RunContext
    tally: _Tally = field(default_factory=_Tally)
    plan: _PlanLists = field(default_factory=_PlanLists)
    seen: set[str] = field(default_factory=set)
    failed_ids: set[str] = field(default_factory=set)
    failures: list[DocumentLoadFailure] = field(default_factory=list)
    pending: list[_Pending] = field(default_factory=list)
    pending_chunks: int = 0

    def progress(self, phase: str, current: str = "") -> None:
        done = len(self.seen) + len(self.failures)
        self.context.notify(
            IngestProgress(phase, done, self.context.total, self.tally.chunks_written, current)
        )

    def report(self, duration_ms: float) -> IngestReport:
        tally, plan = self.tally, self.plan
        return IngestReport(
            documents_seen=len(self.seen),
            added=tally.added,
            updated=tally.updated,
            unchanged=tally.unchanged,
            empty=tally.empty,
            deleted=tally.deleted,
            chunks_written=tally.chunks_written,
            chunks_deleted=tally.chunks_deleted,
            failures=tuple(self.failures),
            duration_ms=duration_ms,
            source_name=self.context.source_name,
            dry_run=self.context.dry_run,
            plan=IngestPlan(
                added=tuple(plan.added),
                updated=tuple(plan.updated),
                deleted=tuple(plan.deleted),
                conflicts=tuple(plan.conflicts),
            )
            if self.context.dry_run
            else None,
        )


class IngestDocuments:
    """The use case. One instance may run many times; it holds no per-run state."""

    def __init__(
        self,
        *,
        store: KnowledgeStore,
        chunker: Chunker,
        clock: Clock,
        embedder: Embedder | None = None,
        settings: IngestConfig | None = None,
    ) -> None:
        self._store = store
        self._chunker = chunker
        self._clock = clock
        self._embedder = embedder
        self._settings = settings or IngestConfig()

    @property
    def fingerprint(self) -> str:
        """Chunker settings + embedder identity: a change rewrites every document."""
        embedder = f"{self._embedder.name}/{self._embedder.dimension}" if self._embedder else "none"
        return f"{self._chunker.fingerprint}|{embedder}"

    def execute(
        self,
        source: DocumentSource,
        *,
        sync: bool = False,
        progress: ProgressCallback | None = None,
        allow_empty_sync: bool = False,
        dry_run: bool = False,
    ) -> IngestReport:
        """Ingest everything ``source`` yields.

        ``sync`` also deletes documents this source owns (and ``source.in_scope``)
        that the store holds but the source no longer yields. A sync run whose source
        yields no document at all refuses to delete anything unless
        ``allow_empty_sync`` (a wrong path must not empty the knowledge base).
        A document another source owns is never replaced: ``IngestConflict`` before
        anything is written (when the source lists its doc_ids up front). ``dry_run``
        reads and compares but writes nothing; the report carries the plan.
        """
        t0 = self._clock.monotonic()
        dimension = self._embedder.dimension if self._embedder is not None else None
        identity = self._embedder.identity if self._embedder is not None else None
        self._store.ensure_collection(dimension, identity, create=not dry_run)
        stored: dict[str, StoredDocument] = self._store.documents()
        owners = {key: doc.source_name for key, doc in stored.items()}
        source = source.bound(owners)
        run = _Run(
            _RunContext(
                total=source.estimated_count(),
                notify=progress or (lambda _event: None),
                fingerprint=self.fingerprint,
                existing={key: doc.content_hash for key, doc in stored.items()},
                owners=owners,
                source_name=source.source_name,
                default_tenant=source.default_access.tenant,
                dry_run=dry_run,
            )
        )
        self._refuse_conflicts(source, run)
        for loaded in source.documents():
            if isinstance(loaded, DocumentLoadFailure):
                run.failures.append(loaded)
                if loaded.doc_id is not None:
                    run.failed_ids.add(storage_key(run.context.default_tenant, loaded.doc_id))
                run.progress("scan", loaded.source)
                continue
            if loaded.access is None:
                loaded = replace(loaded, access=source.default_access)
            self._take(loaded, run)
            run.progress("scan", loaded.doc_id)
        if run.pending:
            self._flush(run)
            run.progress("write")
        if self._embedder is not None:
            self._embedder.release_documents()  # every chunk is embedded: not held to seal
        if sync:
            self._sync(source, run, allow_empty_sync)
            run.progress("sync")
        if run.tally.chunks_written or run.tally.chunks_deleted:
            self._store.seal()
        result = replace(
            run.report((self._clock.monotonic() - t0) * 1000.0), notices=self._store.notices()
        )
        run.progress("done")
        logger.info("ingest done", extra={"ingest_report": result.as_dict()})
        return result

    @staticmethod
    def _refuse_conflicts(source: DocumentSource, run: _Run) -> None:
        planned = source.doc_ids()
        if planned is None:
            return
        for doc_id in dict.fromkeys(planned):
            key = storage_key(run.context.default_tenant, doc_id)
            owner = run.context.owner_other_than_me(key)
            if owner is not None:
                run.plan.conflicts.append((shown_doc_key(key), owner))
        if run.plan.conflicts and not run.context.dry_run:
            raise _conflict(run.context.source_name, run.plan.conflicts)

    # ------------------------------------------------------------------ steps

    def _take(self, doc: SourceDocument, run: _Run) -> None:
        """One loaded document: skipped when unchanged, else chunked and queued; the
        queue is written whenever it holds a write batch."""
        key = doc.doc_key
        shown = shown_doc_key(key)
        if key in run.seen:
            run.failures.append(
                DocumentLoadFailure(
                    doc.source or doc.doc_id,
                    f"duplicate doc_id {doc.doc_id!r} in this run; the first one was kept",
                    None,
                )
            )
            return
        owner = run.context.owner_other_than_me(key)
        if owner is not None:
            # A source that could not list its doc_ids up front: refused here, before
            # this document is written (earlier ones of this run may be).
            if (shown, owner) not in run.plan.conflicts:
                run.plan.conflicts.append((shown, owner))
            if not run.context.dry_run:
                raise _conflict(run.context.source_name, run.plan.conflicts)
            run.failed_ids.add(key)
            return
        content_hash = document_hash(doc, run.context.fingerprint)
        existed = key in run.context.existing
        if run.context.existing.get(key) == content_hash:
            run.seen.add(key)
            run.tally.unchanged += 1
            return
        try:
            chunks = self._chunk(doc)
        except InvalidInputError as error:
            # One document the store could not keep faithfully (a chunk index beyond
            # what the audit store records): a failure of that document, not the run.
            run.failures.append(DocumentLoadFailure(doc.source or doc.doc_id, str(error), None))
            run.failed_ids.add(key)
            return
        run.seen.add(key)
        if not chunks:
            run.tally.empty += 1
            if existed:
                if run.context.dry_run:
                    run.plan.deleted.append(shown)
                else:
                    run.tally.chunks_deleted += self._store.delete_documents([key])
            return
        if run.context.dry_run:
            (run.plan.updated if existed else run.plan.added).append(shown)
            if existed:
                run.tally.updated += 1
            else:
                run.tally.added += 1
            return
        run.pending.append(_Pending(doc, chunks, content_hash, existed))
        run.pending_chunks += len(chunks)
        if run.pending_chunks >= self._settings.flush_at:
            self._flush(run)
            run.progress("write", doc.doc_id)

    def _chunk(self, doc: SourceDocument) -> list[Chunk]:
        chunks = self._chunker.chunk(doc)
        if len(chunks) - 1 > MAX_INT:
            raise InvalidInputError(
                f"document {doc.doc_id!r} has {len(chunks)} chunks; chunk indexes above "
                f"{MAX_INT} cannot be recorded (raise the chunk size)"
            )
        for expected, chunk in enumerate(chunks):
            if chunk.doc_id != doc.doc_id or chunk.chunk_index != expected:
                raise IngestError(
                    f"chunker returned chunk {chunk.evidence_key!r} for document "
                    f"{doc.doc_id!r} at position {expected}: chunk indexes must be "
                    "contiguous from 0"
                )
        return chunks

    def _embed(self, chunks: Sequence[Chunk]) -> list[tuple[float, ...] | None]:
        """Vectors for ``chunks``, in their order. The chunks of a whole write batch (many
        documents) are embedded shortest first, so each embed batch holds texts of
        similar token counts and pads little; embedding order has no effect on rows."""
        if self._embedder is None:
            return [None] * len(chunks)
        dimension = self._embedder.dimension
        texts = [embedding_input(c) for c in chunks]
        lengths = self._embedder.token_lengths(texts)
        if len(lengths) != len(texts):
            raise EmbeddingError(
                f"embedder {self._embedder.name} returned {len(lengths)} lengths "
                f"for {len(texts)} texts"
            )
        order = sorted(range(len(texts)), key=lambda i: lengths[i])
        vectors: list[tuple[float, ...] | None] = [None] * len(chunks)
        size = self._settings.embed_batch_size
        for start in range(0, len(order), size):
            batch = order[start : start + size]
            embedded = self._embedder.embed_documents([texts[i] for i in batch])
            if len(embedded) != len(batch):
                raise EmbeddingError(
                    f"embedder {self._embedder.name} returned {len(embedded)} vectors "
                    f"for {len(batch)} texts"
                )
            for i, vector in zip(batch, embedded, strict=True):
                if len(vector) != dimension:
                    raise EmbeddingError(
                        f"embedder {self._embedder.name} returned a {len(vector)}-dim "
                        f"vector; it declares {dimension}"
                    )
                vectors[i] = tuple(vector)
        return vectors

    def _flush(self, run: _Run) -> None:
        pending, run.pending, run.pending_chunks = run.pending, [], 0
        all_chunks = [c for p in pending for c in p.chunks]
        vectors = iter(self._embed(all_chunks))
        now = self._clock.now()
        heads: list[ChunkRecord] = []
        rest: list[ChunkRecord] = []
        for item in pending:
            doc = item.document
            for chunk in item.chunks:
                record = ChunkRecord(
                    evidence_key=chunk.evidence_key,
                    doc_id=doc.doc_id,
                    chunk_index=chunk.chunk_index,
                    text=chunk.text,
                    category=doc.category,
                    source=doc.source,
                    title=chunk.title or doc.title,
                    breadcrumb=chunk.breadcrumb,
                    source_type=doc.source_type,
                    content_hash=item.content_hash,
                    ingested_at=now,
                    vector=next(vectors),
                    source_name=run.context.source_name,
                    access=doc.access if doc.access is not None else NO_ACL,
                )
                (heads if chunk.chunk_index == 0 else rest).append(record)
        new_heads = [
            replace(h, content_hash=PENDING_HASH)
            for h, item in zip(heads, pending, strict=True)
            if not item.existed
        ]
        if new_heads:
            # A new document's chunk 0 goes in first, marked pending: should the run die
            # before the final chunk 0 below, the next run sees a changed document (not
            # a new one) and cleans up whatever of it was written.
            self._upsert(new_heads)
        written = 0
        if rest:
            written += self._upsert(rest)
        updated = [p for p in pending if p.existed]
        if updated:
            run.tally.chunks_deleted += self._store.delete_chunks_except(
                [p.document.doc_key for p in updated],
                [
                    storage_key(
                        p.document.access.tenant if p.document.access else "", c.evidence_key
                    )
                    for p in updated
                    for c in p.chunks
                ],
            )
        written += self._upsert(heads)
        run.tally.chunks_written += written
        for item in pending:
            if item.existed:
                run.tally.updated += 1
            else:
                run.tally.added += 1

    def _upsert(self, records: Sequence[ChunkRecord]) -> int:
        """``records`` in write batches, in order."""
        size = self._settings.write_batch_size
        return sum(
            self._store.upsert_chunks(records[start : start + size])
            for start in range(0, len(records), size)
        )

    def _sync(self, source: DocumentSource, run: _Run, allow_empty: bool) -> None:
        tenants = {run.context.default_tenant} | {doc_key_parts(key)[0] for key in run.seen}
        vanished = sorted(
            key
            for key in run.context.existing
            if run.context.owners.get(key) == run.context.source_name
            and key not in run.seen
            and key not in run.failed_ids
            and doc_key_parts(key)[0] in tenants
            and source.in_scope(doc_key_parts(key)[1])
        )
        if not vanished:
            return
        if not run.seen and not allow_empty:
            raise IngestError(
                f"sync found no documents in the source but {len(vanished)} in the store; "
                "refusing to delete them all (check the path, or allow an empty sync)"
            )
        run.tally.deleted += len(vanished)
        if run.context.dry_run:
            run.plan.deleted.extend(shown_doc_key(key) for key in vanished)
            return
        run.tally.chunks_deleted += self._store.delete_documents(vanished)


def _conflict(source_name: str, conflicts: Sequence[tuple[str, str]]) -> IngestConflict:
    doc_id, owner = conflicts[0]
    more = f" (and {len(conflicts) - 1} more)" if len(conflicts) > 1 else ""
    return IngestConflict(
        f"source {source_name!r} would replace {doc_id!r}{more}, which source {owner!r} "
        f"owns; nothing was written: ingest it from {owner!r}, or choose another source "
        "name or doc_id",
        tuple(conflicts),
    )
