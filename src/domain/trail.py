"""The tamper-evident audit trail: canonical record digests, the hash chain, signed
checkpoints and their verification. Stdlib only (``hashlib``, ``json``).

Every audit record (an invocation with its evidence rows, an answer check with its claim
rows) is one chain entry, in the store's commit order:

- ``record_digest``: SHA-256 of the record's canonical serialisation, a JSON array
  ``[format, field names, field values, child field names, child rows]`` written with
  ``canonical_json`` (no spaces, UTF-8, no NaN). Values are canonical scalars: text,
  whole numbers, floats, None (the storage adapter maps UUIDs, times, booleans and JSON
  documents to these, the same way on every database).
- ``leaf_hash``: SHA-256 of the entry's own fields (position, kind, record id, session,
  seq, record digest, time, whether it was chained at an upgrade).
- ``link_hash``: SHA-256 of ``[prev entry hash, leaf hash]``; the first entry links to
  ``GENESIS``. An entry's ``entry_hash`` is its link hash, so changing, removing,
  inserting or reordering any entry breaks every link after it.
- ``checkpoint_payload``: what a checkpoint signs (number, record count = head position,
  head hash, time, the previous checkpoint's digest, kind, pruned-through position, key
  id); checkpoints chain too, so a removed one in the middle shows.

``ChainVerifier`` walks entries oldest first and names the first broken one and what is
wrong with it (``Problem``); ``trail_checks`` checks checkpoints, a witness's copy of
them and evidence bundles.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

GENESIS = "0" * 64
ENTRY_FORMAT = "lookup-knowledge/chain-entry/1"
CHECKPOINT_FORMAT = "lookup-knowledge/checkpoint/1"
BUNDLE_FORMAT = "lookup-knowledge/evidence-bundle/1"

Scalar = str | int | float | None
SignatureCheck = Callable[[bytes, str], bool]
"""``(payload, signature hex) -> valid?``: the adapter's Ed25519 public-key check."""


def _odd(value: object) -> object:
    """A value no canonical scalar is (bytes a tamperer stored, say): serialised as a
    tagged object, so it never equals a scalar and never raises."""
    if isinstance(value, bytes | bytearray | memoryview):
        return {"$bytes": bytes(value).hex()}
    return {"$repr": f"{type(value).__name__}:{value!r}"}


def canonical_json(value: object) -> bytes:
    """The one serialisation every digest hashes: compact JSON, keys sorted, UTF-8 (a
    lone surrogate kept as its code unit). Never raises: a value the writers never
    produce (NaN, infinity, bytes a tamperer stored) is serialised as itself, so it
    hashes differently from anything the record held."""
    return _CANONICAL.encode(value).encode("utf-8", "surrogatepass")


# One encoder for every call (``json.dumps`` with options builds one per call).
_CANONICAL = json.JSONEncoder(
    ensure_ascii=False, separators=(",", ":"), sort_keys=True, allow_nan=True, default=_odd
)


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# ------------------------------------------------------------------ JSON documents


def _normalise_numbers(value: Any) -> Any:
    """Numbers as PostgreSQL's JSONB gives them back: a float of magnitude >= 1e16 is a
    whole number (JSONB writes its digits), and -0.0 is 0.0."""
    if isinstance(value, dict):
        return {k: _normalise_numbers(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_normalise_numbers(v) for v in value]
    if isinstance(value, float) and not isinstance(value, bool):
        if value == 0.0:
            return 0.0
        if math.isfinite(value) and abs(value) >= 1e16:
            return int(value)
    return value


def canonical_document(value: object) -> str:
    """A JSON document (a record's details, a claim's signals) as canonical text: keys
    sorted, compact, numbers as JSONB keeps them. The SQLite store writes exactly this
    text, so its verifier hashes the stored text without parsing it."""
    text = json.dumps(
        value, ensure_ascii=False, separators=(",", ":"), sort_keys=True, allow_nan=True
    )
    if "e+" in text or "-0.0" in text:  # rare: only then walk the document
        text = json.dumps(
            _normalise_numbers(value),
            ensure_ascii=False,
            separators=(",", ":"),
            sort_keys=True,
            allow_nan=True,
        )
    return text


# ------------------------------------------------------------------ digests


@dataclass(frozen=True, slots=True)
class RecordFormat:
    """The fields of one kind of record, in digest order, and of its child rows.
    ``documents`` / ``child_documents``: the fields holding JSON documents (canonical
    text), which enter the digest as the SHA-256 of their text."""

    name: str
    fields: tuple[str, ...]
    child_fields: tuple[str, ...]
    documents: tuple[str, ...] = ()
    child_documents: tuple[str, ...] = ()
    _doc_index: tuple[int, ...] = field(default=(), init=False, repr=False, compare=False)
    _child_doc_index: tuple[int, ...] = field(default=(), init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_doc_index", tuple(self.fields.index(f) for f in self.documents))
        object.__setattr__(
            self,
            "_child_doc_index",
            tuple(self.child_fields.index(f) for f in self.child_documents),
        )


def _document_digest(value: Scalar) -> Scalar:
    if isinstance(value, str):
        return "sha256:" + hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()
    return value


def _with_document_digests(values: Sequence[Scalar], indices: tuple[int, ...]) -> list[Scalar]:
    out = list(values)
    for i in indices:
        out[i] = _document_digest(out[i])
    return out


def record_digest(
    record_format: RecordFormat,
    values: Sequence[Scalar],
    children: Iterable[Sequence[Scalar]],
    dumps: Callable[[object], bytes] = canonical_json,
) -> str:
    """SHA-256 of a record (its field values in ``record_format.fields`` order, its child
    rows in their order, each in ``child_fields`` order; a JSON document field as the
    SHA-256 of its text). ``dumps``: ``canonical_json`` or a faster function that
    returns the same bytes (the verifier's, in the storage adapter)."""
    child_docs = record_format._child_doc_index
    rows = [_with_document_digests(c, child_docs) if child_docs else c for c in children]
    # canonical_json([name, fields, values, child_fields, rows]), its constant parts
    # serialised once per format.
    head, middle = _format_parts(record_format)
    digest = hashlib.sha256(head)
    digest.update(dumps(_with_document_digests(values, record_format._doc_index)))
    digest.update(middle)
    digest.update(dumps(rows))
    digest.update(b"]")
    return digest.hexdigest()


_PARTS: dict[RecordFormat, tuple[bytes, bytes]] = {}


def _format_parts(record_format: RecordFormat) -> tuple[bytes, bytes]:
    parts = _PARTS.get(record_format)
    if parts is None:
        name = canonical_json(record_format.name)
        fields = canonical_json(record_format.fields)
        children = canonical_json(record_format.child_fields)
        parts = (b"[" + name + b"," + fields + b",", b"," + children + b",")
        _PARTS[record_format] = parts
    return parts


# Version 1 of each record's fields (the audit store's columns as of revision 0007, less
# the parent key of a child row and the server-set ``recorded_at``).
INVOCATION_FORMAT = RecordFormat(
    "invocation/1",
    (
        "id", "session_id", "seq", "step_id", "tool_call_id", "tool_name", "query", "status",
        "error_code", "error_message", "quality_score", "relevance_level", "retrieval_mode",
        "filter_applied", "fallback_reason", "retrieve_k", "return_n", "candidate_count",
        "returned_count", "started_at", "duration_ms", "trace_id", "span_id",
        "retrieval_details", "traffic", "principal_tenant", "principal_user",
        "principal_groups_hash", "access_mode", "access_filter",
    ),
    (
        "rank", "session_id", "document_id", "doc_id", "chunk_index", "source", "category",
        "score_before", "score_after", "projected", "in_context_pack", "content_hash",
        "shown_text", "row_tenant",
    ),
    documents=("retrieval_details",),
)  # fmt: skip
ANSWER_CHECK_FORMAT = RecordFormat(
    "answer_check/1",
    (
        "id", "session_id", "step_id", "answer_format", "answer_text", "answer_hash",
        "verdict", "claim_count", "supported_count", "unsupported_count", "uncited_count",
        "invalid_citation_count", "contradicted_count", "pending_in_spool",
        "checker_version", "created_at",
    ),
    (
        "claim_index", "claim_text", "span_start", "span_end", "cited_ids", "citations",
        "verdict", "reasons", "support_document_id", "support_start", "support_end",
        "support_score", "signals",
    ),
    child_documents=("cited_ids", "citations", "reasons", "signals"),
)  # fmt: skip
FORMATS = {f.name: f for f in (INVOCATION_FORMAT, ANSWER_CHECK_FORMAT)}


@dataclass(frozen=True, slots=True)
class ChainEntry:
    """One link of the chain as stored (``audit_chain``)."""

    position: int
    kind: str
    record_id: str
    session_id: str
    seq: int | None
    record_hash: str
    prev_hash: str
    entry_hash: str
    recorded_at: str
    chained_at_upgrade: bool = False

    def leaf(self) -> str:
        return leaf_hash(
            self.position,
            self.kind,
            self.record_id,
            self.session_id,
            self.seq,
            self.record_hash,
            self.recorded_at,
            self.chained_at_upgrade,
        )


def leaf_hash(
    position: int,
    kind: str,
    record_id: str,
    session_id: str,
    seq: int | None,
    record_hash: str,
    recorded_at: str,
    chained_at_upgrade: bool,
    dumps: Callable[[object], bytes] = canonical_json,
) -> str:
    """``dumps``: ``canonical_json`` or a faster function that returns the same bytes."""
    return sha256_hex(
        dumps(
            [
                ENTRY_FORMAT,
                position,
                kind,
                record_id,
                session_id,
                seq,
                record_hash,
                recorded_at,
                bool(chained_at_upgrade),
            ]
        )
    )


def link_hash(prev_hash: str, leaf: str) -> str:
    return sha256_hex(f"{prev_hash}:{leaf}".encode("ascii", "replace"))


def make_entry(
    position: int,
    kind: str,
    record_id: str,
    session_id: str,
    seq: int | None,
    record_hash: str,
    prev_hash: str,
    recorded_at: str,
    chained_at_upgrade: bool = False,
    dumps: Callable[[object], bytes] = canonical_json,
) -> ChainEntry:
    """The entry that follows ``prev_hash`` at ``position`` (``dumps``: see ``leaf_hash``)."""
    fields = (position, kind, record_id, session_id, seq, record_hash, recorded_at)
    leaf = leaf_hash(*fields, chained_at_upgrade, dumps)
    return ChainEntry(
        position,
        kind,
        record_id,
        session_id,
        seq,
        record_hash,
        prev_hash,
        link_hash(prev_hash, leaf),
        recorded_at,
        chained_at_upgrade,
    )


# ------------------------------------------------------------------ checkpoints


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """A signed statement: the chain held ``position`` records ending in ``head_hash``
    at ``created_at``. ``kind``: periodic, flush, close, prune (the records up to
    ``pruned_through`` were removed after it was signed)."""

    number: int
    position: int
    head_hash: str
    created_at: str
    prev_checkpoint: str
    kind: str
    pruned_through: int
    key_id: str
    signature: str = ""

    def payload(self) -> bytes:
        return checkpoint_payload(self)

    def digest(self) -> str:
        return sha256_hex(self.payload() + b":" + self.signature.encode("ascii", "replace"))

    def as_dict(self) -> dict[str, object]:
        return {
            "number": self.number,
            "position": self.position,
            "headHash": self.head_hash,
            "createdAt": self.created_at,
            "prevCheckpoint": self.prev_checkpoint,
            "kind": self.kind,
            "prunedThrough": self.pruned_through,
            "keyId": self.key_id,
            "signature": self.signature,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Checkpoint:
        return cls(
            number=int(data["number"]),
            position=int(data["position"]),
            head_hash=str(data["headHash"]),
            created_at=str(data["createdAt"]),
            prev_checkpoint=str(data["prevCheckpoint"]),
            kind=str(data["kind"]),
            pruned_through=int(data["prunedThrough"]),
            key_id=str(data["keyId"]),
            signature=str(data["signature"]),
        )


def checkpoint_payload(c: Checkpoint) -> bytes:
    return canonical_json(
        [
            CHECKPOINT_FORMAT,
            c.number,
            c.position,
            c.head_hash,
            c.created_at,
            c.prev_checkpoint,
            c.kind,
            c.pruned_through,
            c.key_id,
        ]
    )


# ------------------------------------------------------------------ verification


class ProblemKind(StrEnum):
    CONTENT_CHANGED = "content changed"
    ORDER_CHANGED = "order changed"
    LINK_BROKEN = "link broken"
    RECORD_MISSING = "record missing"
    RECORD_NOT_IN_CHAIN = "record not in the chain"
    CHECKPOINT_SIGNATURE_INVALID = "checkpoint signature invalid"
    CHECKPOINT_MISMATCH = "checkpoint does not match the chain"
    CHECKPOINT_MISSING = "checkpoint missing"
    RECORDS_MISSING_AT_END = "records after the last checkpoint's head missing"
    RECORDS_NOT_SIGNED = "records no signed checkpoint covers"
    WITNESS_INVALID = "witness checkpoint invalid"


@dataclass(frozen=True, slots=True)
class Problem:
    """The first thing found wrong: what, and which record (or checkpoint)."""

    kind: ProblemKind
    detail: str
    position: int | None = None
    record_kind: str | None = None
    record_id: str | None = None
    session_id: str | None = None
    seq: int | None = None
    checkpoint: int | None = None

    def describe(self) -> str:
        where = []
        if self.position is not None:
            where.append(f"position {self.position}")
        if self.record_kind is not None:
            where.append(f"{self.record_kind} {self.record_id}")
        if self.session_id is not None:
            where.append(f"session {self.session_id!r}")
        if self.seq is not None:
            where.append(f"seq {self.seq}")
        if self.checkpoint is not None:
            where.append(f"checkpoint #{self.checkpoint}")
        place = f" at {', '.join(where)}" if where else ""
        return f"{self.kind.value}{place}: {self.detail}"


@dataclass(frozen=True, slots=True)
class StoredRecord:
    """What the store holds for an entry's record now: its recomputed digest and seq."""

    digest: str
    seq: int | None = None


@dataclass
class ChainVerifier:
    """Feed entries oldest first (``feed``); the first problem is kept (``problem``).

    ``start_prev``: the hash the first fed entry must link to (``GENESIS``, or the head
    of the checkpoint a prune cut at); ``start_position``: its position."""

    start_prev: str = GENESIS
    start_position: int = 1
    problem: Problem | None = None
    checked: int = 0
    content_checked: int = 0
    upgrade_chained: int = 0
    heads: dict[int, str] = field(default_factory=dict)
    last_position: int = 0
    last_hash: str = GENESIS
    _expected_position: int = 0
    _prev: str = ""
    _watch: frozenset[int] = frozenset()

    def __post_init__(self) -> None:
        self._expected_position = self.start_position
        self._prev = self.start_prev
        self.last_position = self.start_position - 1
        self.last_hash = self.start_prev

    def watch(self, positions: Iterable[int]) -> None:
        """Keep the entry hash at these positions (the checkpoints' heads) in ``heads``."""
        self._watch = frozenset(positions)

    def _fail(self, kind: ProblemKind, detail: str, entry: ChainEntry | None = None) -> None:
        if self.problem is not None:
            return
        if entry is None:
            self.problem = Problem(kind, detail)
            return
        self.problem = Problem(
            kind,
            detail,
            position=entry.position,
            record_kind=entry.kind,
            record_id=entry.record_id,
            session_id=entry.session_id,
            seq=entry.seq,
        )

    def feed(self, entry: ChainEntry, stored: StoredRecord | None, *, content: bool = True) -> None:
        """One entry and what the store holds for its record (None: the record is gone);
        ``content`` False: only the link is checked (an entry outside ``--session``)."""
        if self.problem is not None:
            return
        self.checked += 1
        if entry.position != self._expected_position:
            if entry.position > self._expected_position:
                missing = f"{self._expected_position}..{entry.position - 1}"
                if entry.position - 1 == self._expected_position:
                    missing = str(self._expected_position)
                self._fail(
                    ProblemKind.RECORD_MISSING,
                    f"the chain has no entry at position {missing} (removed); this entry "
                    "follows the gap",
                    entry,
                )
            else:
                self._fail(ProblemKind.ORDER_CHANGED, "position out of order", entry)
            return
        leaf = entry.leaf()
        if entry.prev_hash != self._prev:
            self._fail(
                ProblemKind.LINK_BROKEN,
                "its link to the entry before it does not match (an entry was removed, "
                "inserted or replaced before it)",
                entry,
            )
            return
        if link_hash(entry.prev_hash, leaf) != entry.entry_hash:
            self._fail(
                ProblemKind.LINK_BROKEN,
                "its chain entry was edited (the entry hash does not match its fields)",
                entry,
            )
            return
        if entry.chained_at_upgrade:
            self.upgrade_chained += 1
        if content:
            self.content_checked += 1
            if stored is None:
                self._fail(
                    ProblemKind.RECORD_MISSING,
                    f"the {entry.kind} this entry chains is not in the store (deleted)",
                    entry,
                )
                return
            if stored.digest != entry.record_hash:
                if entry.seq is not None and stored.seq is not None and stored.seq != entry.seq:
                    self._fail(
                        ProblemKind.ORDER_CHANGED,
                        f"recorded as seq {entry.seq} of its session, the store now says seq "
                        f"{stored.seq}",
                        entry,
                    )
                else:
                    self._fail(
                        ProblemKind.CONTENT_CHANGED,
                        f"the {entry.kind} (with its "
                        f"{'evidence' if entry.kind == 'invocation' else 'claim'} rows) no "
                        "longer hashes to the digest chained when it was recorded",
                        entry,
                    )
                return
        self._prev = entry.entry_hash
        self._expected_position += 1
        self.last_position = entry.position
        self.last_hash = entry.entry_hash
        if entry.position in self._watch:
            self.heads[entry.position] = entry.entry_hash
