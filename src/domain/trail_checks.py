"""Checks against what the chain's checkpoints signed: the checkpoints' own signatures
and chain, a witness's copy of them held outside the database, and an evidence bundle
verified offline. Stdlib only."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lookup_knowledge.domain.trail import (
    BUNDLE_FORMAT,
    GENESIS,
    ChainEntry,
    ChainVerifier,
    Checkpoint,
    Problem,
    ProblemKind,
    RecordFormat,
    SignatureCheck,
    StoredRecord,
    link_hash,
    record_digest,
)


def check_checkpoints(
    checkpoints: Sequence[Checkpoint],
    signature_ok: SignatureCheck,
    key_id: str | None = None,
) -> Problem | None:
    """The checkpoints' signatures and their own chain (each names the digest of the one
    before it; numbers 1, 2, 3 ...). ``key_id``: the only key they may be signed with."""
    prev = GENESIS
    expected = checkpoints[0].number if checkpoints else 1
    for c in checkpoints:
        if c.number != expected:
            return Problem(
                ProblemKind.CHECKPOINT_MISSING,
                f"checkpoint #{expected} is missing (the next one stored is #{c.number})",
                checkpoint=c.number,
            )
        if key_id is not None and c.key_id != key_id:
            return Problem(
                ProblemKind.CHECKPOINT_SIGNATURE_INVALID,
                f"signed with key {c.key_id}, not with the given public key ({key_id})",
                checkpoint=c.number,
            )
        if not signature_ok(c.payload(), c.signature):
            return Problem(
                ProblemKind.CHECKPOINT_SIGNATURE_INVALID,
                "its Ed25519 signature does not verify (the checkpoint was edited or forged)",
                checkpoint=c.number,
            )
        if c.number > 1 and c.prev_checkpoint != prev and prev != GENESIS:
            return Problem(
                ProblemKind.CHECKPOINT_MISSING,
                "it does not name the checkpoint stored before it (one was removed or replaced)",
                checkpoint=c.number,
            )
        prev = c.digest()
        expected = c.number + 1
    return None


def check_witness(
    witnessed: Sequence[Checkpoint],
    stored: Sequence[Checkpoint],
    verifier: ChainVerifier,
    signature_ok: SignatureCheck,
    key_id: str | None = None,
    floor: int = 0,
) -> Problem | None:
    """The checkpoints a witness outside the database holds (``audit.checkpoint-file``)
    against the database's: each must verify, still be stored as it was signed, and the
    chain (as ``verifier`` walked it, watching the witnessed positions) must still reach
    its position and have its head there. This is what catches the newest records
    deleted together with the checkpoints that signed them. ``floor``: the records up to
    it were pruned (their heads are not checked)."""
    by_number = {c.number: c for c in stored}
    for w in witnessed:
        if (key_id is not None and w.key_id != key_id) or not signature_ok(
            w.payload(), w.signature
        ):
            return Problem(
                ProblemKind.WITNESS_INVALID,
                "the witness's copy does not verify with the public key (the witness file "
                "was edited, or written for another key)",
                checkpoint=w.number,
            )
        if w.position > floor and w.position > verifier.last_position:
            return Problem(
                ProblemKind.RECORDS_MISSING_AT_END,
                f"the witness's checkpoint #{w.number} signed {w.position} records, the "
                f"chain ends at position {verifier.last_position}: the newest records were "
                "removed (with the checkpoints that signed them)",
                position=verifier.last_position + 1,
                checkpoint=w.number,
            )
        head = verifier.heads.get(w.position)
        if w.position > floor and head is not None and head != w.head_hash:
            return Problem(
                ProblemKind.CHECKPOINT_MISMATCH,
                f"the chain's hash at position {w.position} is not the head the witness's "
                f"checkpoint #{w.number} signed (the chain was rewritten)",
                position=w.position,
                checkpoint=w.number,
            )
        mine = by_number.get(w.number)
        if mine is None:
            return Problem(
                ProblemKind.CHECKPOINT_MISSING,
                f"the witness holds checkpoint #{w.number} (signing {w.position} records), "
                "the database no longer does (it was deleted)",
                checkpoint=w.number,
            )
        if mine != w:
            return Problem(
                ProblemKind.CHECKPOINT_MISMATCH,
                f"the database's checkpoint #{w.number} is not the one the witness holds "
                "(it was replaced)",
                checkpoint=w.number,
            )
    return None


@dataclass(frozen=True, slots=True)
class BundleReport:
    ok: bool
    records: int
    checkpoint: int | None
    problem: Problem | None = None


def _bundle_problem(detail: str, **where: Any) -> BundleReport:
    return BundleReport(False, 0, None, Problem(ProblemKind.CONTENT_CHANGED, detail, **where))


def verify_bundle(
    bundle: Mapping[str, Any],
    formats: Mapping[str, RecordFormat],
    signature_ok: SignatureCheck,
    key_id: str,
) -> BundleReport:
    """An evidence bundle (``audit export --bundle``) checked offline: each record's
    digest from its content, the chain from the first record through the leaf hashes of
    the entries between to the signed checkpoint's head, and the signature."""
    try:
        if bundle.get("format") != BUNDLE_FORMAT:
            return _bundle_problem(f"not an evidence bundle ({BUNDLE_FORMAT} expected)")
        checkpoint = Checkpoint.from_dict(bundle["checkpoint"])
        records = {int(r["entry"]["position"]): r for r in bundle["records"]}
        leaves = {int(k): str(v) for k, v in bundle["leaves"].items()}
        start = int(bundle["start"])
        prev = str(bundle["startPrev"])
    except (KeyError, TypeError, ValueError, AttributeError) as error:
        return _bundle_problem(f"the bundle is malformed ({type(error).__name__}: {error})")
    problem = check_checkpoints([checkpoint], signature_ok, key_id)
    if problem is not None:
        return BundleReport(False, 0, checkpoint.number, problem)
    if not records:
        return _bundle_problem("the bundle holds no record")
    for position in range(start, checkpoint.position + 1):
        record = records.get(position)
        if record is None:
            leaf = leaves.get(position)
            if leaf is None:
                return BundleReport(
                    False,
                    0,
                    checkpoint.number,
                    Problem(
                        ProblemKind.RECORD_MISSING,
                        "the bundle lacks this chain position",
                        position=position,
                    ),
                )
            prev = link_hash(prev, leaf)
            continue
        try:
            e = record["entry"]
            fmt = formats[str(record["format"])]
            entry = ChainEntry(
                position=position,
                kind=str(e["kind"]),
                record_id=str(e["recordId"]),
                session_id=str(e["sessionId"]),
                seq=None if e["seq"] is None else int(e["seq"]),
                record_hash=str(e["recordHash"]),
                prev_hash=str(e["prevHash"]),
                entry_hash=str(e["entryHash"]),
                recorded_at=str(e["recordedAt"]),
                chained_at_upgrade=bool(e["chainedAtUpgrade"]),
            )
            fields = record["fields"]
            values = [fields[name] for name in fmt.fields]
            children = [[child[name] for name in fmt.child_fields] for child in record["children"]]
        except (KeyError, TypeError, ValueError) as error:
            return _bundle_problem(
                f"a record is malformed ({type(error).__name__}: {error})", position=position
            )
        verifier = ChainVerifier(start_prev=prev, start_position=position)
        verifier.feed(entry, StoredRecord(record_digest(fmt, values, children), entry.seq))
        if verifier.problem is not None:
            return BundleReport(False, 0, checkpoint.number, verifier.problem)
        prev = entry.entry_hash
    if prev != checkpoint.head_hash:
        return BundleReport(
            False,
            0,
            checkpoint.number,
            Problem(
                ProblemKind.CHECKPOINT_MISMATCH,
                "the chain in the bundle does not end at the signed checkpoint's head",
                checkpoint=checkpoint.number,
            ),
        )
    return BundleReport(True, len(records), checkpoint.number)
