"""``SqlAuditTrail``: ``verify-log``, evidence bundles and pruning on the SQL store.

Verification streams the chain in position order, chunk by chunk: the entries, and the
records they chain read back without type processing (``chain_rows``), rehashed and fed
to ``domain.trail.ChainVerifier``. Then the checkpoints: their signatures and their own
chain, each one's head against the entry at its position, and that the chain still
reaches the newest one (else the newest records were removed). Last, rows the chain
does not hold (put in behind the store's back).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, Engine, delete, func, select, text
from sqlalchemy.exc import SQLAlchemyError

from lookup_knowledge.adapters.audit.chain import (
    CH,
    ENTRY_COLUMNS,
    AuditChain,
    entry_of,
    lock_head,
    read_checkpoints,
    verify_range,
)
from lookup_knowledge.adapters.audit.chain_rows import (
    FORMAT_OF_KIND,
    read_records,
    time_text,
    unchained_records,
)
from lookup_knowledge.adapters.audit.errors import translate_query
from lookup_knowledge.adapters.audit.models import (
    answer_check,
    claim_check,
    invocation_evidence,
    tool_invocation,
)
from lookup_knowledge.application.ports import check_session_id
from lookup_knowledge.application.ports.trail import AuditTrail, PruneReport, TrailReport
from lookup_knowledge.domain.errors import AuditError, InvalidInputError, NotFoundError
from lookup_knowledge.domain.trail import (
    BUNDLE_FORMAT,
    GENESIS,
    ChainEntry,
    ChainVerifier,
    Checkpoint,
    Problem,
    ProblemKind,
)
from lookup_knowledge.domain.trail_checks import check_checkpoints, check_witness

if TYPE_CHECKING:  # cryptography: imported when a signature is checked
    from lookup_knowledge.adapters.signing import TrailVerifyKey

UNSIGNED_GRACE_S = 60.0


class SqlAuditTrail(AuditTrail):
    """``barrier(session_id or None)``: the recorder's flush, run first (records still in
    the local journal are chained before they are verified or exported)."""

    def __init__(
        self,
        engine: Engine,
        chain: AuditChain,
        barrier: Callable[[str | None], object] | None = None,
    ) -> None:
        self._engine = engine
        self._chain = chain
        self._barrier = barrier

    def public_key_pem(self) -> str:
        return self._chain.signer.verify_key.pem

    def _pass_barrier(self, session_id: str | None) -> None:
        if self._barrier is not None:
            self._barrier(session_id)

    # ------------------------------------------------------------------ verify-log

    def verify_log(
        self,
        since: datetime | None = None,
        session_id: str | None = None,
        public_key: str | None = None,
        witness: str | None = None,
    ) -> TrailReport:
        from lookup_knowledge.adapters.signing import TrailVerifyKey

        key = (
            TrailVerifyKey.from_file(public_key)
            if public_key is not None
            else self._chain.signer.verify_key
        )
        if session_id is not None:
            check_session_id(session_id)
        self._pass_barrier(session_id)
        witness_file = witness if witness is not None else self._chain.witness_file
        witnessed = _read_witness(witness_file, explicit=witness is not None)
        try:
            with self._engine.connect() as conn:
                report = self._verify(conn, key, since, session_id, witnessed)
        except (SQLAlchemyError, UnicodeError) as error:
            raise translate_query(error, "verifying the audit trail") from error
        if witness_file is None:
            return report
        checked = len(witnessed) if isinstance(witnessed, list) else 0
        return replace(report, witness=str(witness_file), witnessed=checked)

    def _verify(
        self,
        conn: Connection,
        key: TrailVerifyKey,
        since: datetime | None,
        session_id: str | None,
        witnessed: list[Checkpoint] | Problem,
    ) -> TrailReport:
        try:
            checkpoints = read_checkpoints(conn)
        except (TypeError, ValueError):
            checkpoints = []
            unreadable: Problem | None = Problem(
                ProblemKind.CHECKPOINT_SIGNATURE_INVALID,
                "a stored checkpoint holds values no writer stores (edited)",
            )
        else:
            unreadable = None
        signature_problem = unreadable or check_checkpoints(checkpoints, key.check, key.key_id)
        cut = _prune_cut(checkpoints)
        start, prev = (1, GENESIS) if cut is None else (cut.pruned_through + 1, cut.head_hash)
        high = conn.execute(select(func.max(CH.c.position))).scalar()
        high = int(high) if high is not None else start - 1
        if since is not None:
            row = conn.execute(
                text(
                    f"SELECT {ENTRY_COLUMNS} FROM audit_chain WHERE recorded_at >= :at "
                    "ORDER BY position LIMIT 1"
                ),
                {"at": time_text(since)},
            ).first()
            if row is None:  # nothing chained since then
                start = high + 1
            elif int(row[0]) > start:
                start, prev = int(row[0]), entry_of(row).prev_hash
        verifier = ChainVerifier(start_prev=prev, start_position=start)
        witness_problem = witnessed if isinstance(witnessed, Problem) else None
        witnessed = witnessed if isinstance(witnessed, list) else []
        verifier.watch([c.position for c in checkpoints] + [c.position for c in witnessed])
        verify_range(conn, verifier, start, high, session_id)
        problem = verifier.problem
        if problem is None:
            problem = _checkpoint_heads(checkpoints, verifier, start, cut)
        if problem is None:
            problem = witness_problem or check_witness(
                witnessed,
                checkpoints,
                verifier,
                key.check,
                key.key_id,
                floor=max(start - 1, 0 if cut is None else cut.pruned_through),
            )
        if problem is None:
            problem = signature_problem
        if problem is None:
            problem = _head_says_signed(conn, checkpoints)
        if problem is None:
            problem = _unchained(conn, session_id)
        signed_to = max((c.position for c in checkpoints), default=0)
        if problem is None and verifier.checked and verifier.last_position > signed_to:
            problem = self._stale_tail(conn, max(signed_to + 1, start))
        return TrailReport(
            problem=problem,
            records=verifier.checked,
            content_checked=verifier.content_checked,
            first_position=start if verifier.checked else None,
            last_position=verifier.last_position if verifier.checked else None,
            checkpoints=len(checkpoints),
            last_checkpoint=checkpoints[-1] if checkpoints else None,
            unsigned=max(0, verifier.last_position - max(signed_to, start - 1))
            if verifier.checked
            else 0,
            pruned_through=0 if cut is None else cut.pruned_through,
            prune_checkpoint=None if cut is None else cut.number,
            upgrade_chained=verifier.upgrade_chained,
            key_id=key.key_id,
        )

    def _stale_tail(self, conn: Connection, first_unsigned: int) -> Problem | None:
        """Records no checkpoint signs are normal for a moment (a writer signs every
        ``checkpoint-interval-s``); older than that plus a grace minute, the checkpoints
        that signed them were removed (or their writer died before it could sign)."""
        row = conn.execute(
            text(f"SELECT {ENTRY_COLUMNS} FROM audit_chain WHERE position = :p"),
            {"p": first_unsigned},
        ).first()
        if row is None:
            return None
        entry = entry_of(row)
        limit = datetime.now(UTC) - timedelta(seconds=self._chain.interval_s + UNSIGNED_GRACE_S)
        if entry.recorded_at >= time_text(limit):
            return None
        return Problem(
            ProblemKind.RECORDS_NOT_SIGNED,
            f"chained at {entry.recorded_at} UTC and covered by no signed checkpoint since: "
            "the checkpoints that signed it were removed, or its writer stopped before "
            "signing (a writer's next flush signs what verifies)",
            position=entry.position,
            record_kind=entry.kind,
            record_id=entry.record_id,
            session_id=entry.session_id,
            seq=entry.seq,
        )

    # ------------------------------------------------------------------ bundles

    def export_bundle(self, session_id: str) -> dict[str, Any]:
        check_session_id(session_id)
        self._pass_barrier(session_id)
        self._chain.checkpoint("export")  # the session's newest records signed too
        try:
            with self._engine.connect() as conn:
                return self._bundle(conn, session_id)
        except (SQLAlchemyError, UnicodeError) as error:
            raise translate_query(error, "exporting an evidence bundle") from error

    def _bundle(self, conn: Connection, session_id: str) -> dict[str, Any]:
        positions = [
            int(p)
            for p in conn.execute(
                select(CH.c.position).where(CH.c.session_id == session_id).order_by(CH.c.position)
            ).scalars()
        ]
        if not positions:
            raise NotFoundError(f"no chained record of session {session_id!r}")
        first, last = positions[0], positions[-1]
        covering = [c for c in read_checkpoints(conn) if c.position >= last]
        if not covering:
            raise AuditError(
                "no signed checkpoint covers this session's newest record (the trail does "
                "not verify: run `lookup-knowledge audit verify-log`)"
            )
        checkpoint = min(covering, key=lambda c: (c.position, c.number))
        entries = {
            int(row[0]): entry_of(row)
            for row in conn.execute(
                text(
                    f"SELECT {ENTRY_COLUMNS} FROM audit_chain WHERE position BETWEEN :low AND "
                    ":high ORDER BY position"
                ),
                {"low": first, "high": checkpoint.position},
            )
        }
        contents: dict[int, tuple[str, list[Any], list[list[Any]]]] = {}
        for kind, record_format in FORMAT_OF_KIND.items():
            for position, (values, children) in read_records(
                conn, kind, first, last, session_id
            ).items():
                contents[position] = (record_format.name, values, children)
        records = []
        leaves: dict[str, str] = {}
        for position in range(first, checkpoint.position + 1):
            entry = entries.get(position)
            if entry is None:
                raise AuditError(
                    f"the chain has no entry at position {position}: the trail does not "
                    "verify (run `lookup-knowledge audit verify-log`)"
                )
            if entry.session_id != session_id or position not in contents:
                leaves[str(position)] = entry.leaf()
                continue
            records.append(_bundle_record(entry, *contents[position]))
        return {
            "format": BUNDLE_FORMAT,
            "sessionId": session_id,
            "exportedAt": time_text(datetime.now(UTC)),
            "keyId": self._chain.signer.key_id,
            "publicKey": self.public_key_pem(),
            "start": first,
            "startPrev": entries[first].prev_hash,
            "records": records,
            "leaves": leaves,
            "checkpoint": checkpoint.as_dict(),
        }

    # ------------------------------------------------------------------ prune

    def prune(self, before: datetime) -> PruneReport:
        report = self.verify_log()
        if report.problem is not None:
            raise AuditError(
                "refusing to prune: the audit trail does not verify: " + report.problem.describe()
            )
        try:
            with self._chain.writing() as conn, conn.begin():
                pruned = self._prune(conn, before)
        except SQLAlchemyError as error:
            raise translate_query(error, "pruning the audit trail") from error
        if pruned.checkpoint is not None:
            self._chain.witness(pruned.checkpoint)
        return pruned

    def _prune(self, conn: Connection, before: datetime) -> PruneReport:
        head_position, _ = lock_head(conn)
        lowest = conn.execute(select(func.min(CH.c.position))).scalar()
        kept = conn.execute(
            select(func.min(CH.c.position)).where(CH.c.recorded_at >= time_text(before))
        ).scalar()
        cut = head_position if kept is None else int(kept) - 1
        if lowest is None or cut < int(lowest):
            return PruneReport(0, _pruned_through(conn), None)
        head_at_cut = conn.execute(select(CH.c.entry_hash).where(CH.c.position == cut)).scalar()
        if head_at_cut is None:
            raise AuditError(f"the chain has no entry at position {cut}: refusing to prune")
        checkpoints = read_checkpoints(conn)
        signed = self._chain.sign(
            conn,
            position=cut,
            head_hash=str(head_at_cut),
            kind="prune",
            previous=checkpoints[-1] if checkpoints else None,
            pruned_through=cut,
        )
        removed = conn.execute(
            select(func.count()).select_from(CH).where(CH.c.position <= cut)
        ).scalar_one()
        doomed = select(CH.c.record_id).where(CH.c.position <= cut)
        conn.execute(
            delete(invocation_evidence).where(invocation_evidence.c.invocation_id.in_(doomed))
        )
        conn.execute(delete(tool_invocation).where(tool_invocation.c.id.in_(doomed)))
        conn.execute(delete(claim_check).where(claim_check.c.check_id.in_(doomed)))
        conn.execute(delete(answer_check).where(answer_check.c.id.in_(doomed)))
        conn.execute(delete(CH).where(CH.c.position <= cut))
        return PruneReport(int(removed), cut, signed)


def _prune_cut(checkpoints: list[Checkpoint]) -> Checkpoint | None:
    cuts = [c for c in checkpoints if c.kind == "prune"]
    return max(cuts, key=lambda c: (c.pruned_through, c.number)) if cuts else None


def _pruned_through(conn: Connection) -> int:
    cut = _prune_cut(read_checkpoints(conn))
    return 0 if cut is None else cut.pruned_through


def _checkpoint_heads(
    checkpoints: list[Checkpoint], verifier: ChainVerifier, start: int, cut: Checkpoint | None
) -> Problem | None:
    """Each checkpoint's head against the chain; the newest records still there."""
    floor = 0 if cut is None else cut.pruned_through
    for c in checkpoints:
        if c.position <= floor or c.position < start:
            continue
        if c.position > verifier.last_position:
            return Problem(
                ProblemKind.RECORDS_MISSING_AT_END,
                f"checkpoint #{c.number} signed {c.position} records, the chain ends at "
                f"position {verifier.last_position}: the newest records were removed",
                position=verifier.last_position + 1,
                checkpoint=c.number,
            )
        head = verifier.heads.get(c.position)
        if head is not None and head != c.head_hash:
            return Problem(
                ProblemKind.CHECKPOINT_MISMATCH,
                f"the chain's hash at position {c.position} is not the head checkpoint "
                f"#{c.number} signed (the chain was rewritten)",
                position=c.position,
                checkpoint=c.number,
            )
    return None


def _head_says_signed(conn: Connection, checkpoints: list[Checkpoint]) -> Problem | None:
    """The head row remembers the newest checkpoint: one deleted since shows here."""
    row = conn.execute(
        text("SELECT signed_number, signed_position FROM audit_chain_head WHERE id = 1")
    ).first()
    if row is None:
        return None
    try:
        number, position = int(row[0]), int(row[1])
    except (TypeError, ValueError):
        return None
    newest = max((c.number for c in checkpoints), default=0)
    if number > newest:
        return Problem(
            ProblemKind.CHECKPOINT_MISSING,
            f"checkpoint #{number} (signing {position} records) was written and is no longer "
            f"stored (the newest stored is #{newest})",
            checkpoint=number,
        )
    return None


def _unchained(conn: Connection, session_id: str | None) -> Problem | None:
    for kind, record_id, session in unchained_records(conn):
        if session_id is not None and session is not None and session != session_id:
            continue
        return Problem(
            ProblemKind.RECORD_NOT_IN_CHAIN,
            "stored without a chain entry: put in behind the store's back",
            record_kind=kind,
            record_id=record_id,
            session_id=session,
        )
    return None


def _read_witness(path: str | Path | None, *, explicit: bool) -> list[Checkpoint] | Problem:
    """The checkpoints a witness file holds (JSON lines, ``AuditChain.witness``), or the
    problem with it. A configured file that does not exist yet holds none (no checkpoint
    was signed with it); a given one must exist (``InvalidInputError``)."""
    if path is None:
        return []
    try:
        text = Path(path).read_text("utf-8")
    except FileNotFoundError:
        if explicit:
            raise InvalidInputError(f"the witness file {path} does not exist") from None
        return []
    except (OSError, UnicodeDecodeError) as error:
        if explicit:
            raise InvalidInputError(f"the witness file {path} cannot be read: {error}") from None
        return Problem(
            ProblemKind.WITNESS_INVALID, f"the witness file {path} cannot be read: {error}"
        )
    found: list[Checkpoint] = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            found.append(Checkpoint.from_dict(json.loads(line)))
        except (ValueError, TypeError, KeyError, AttributeError):
            return Problem(
                ProblemKind.WITNESS_INVALID,
                f"line {number} of the witness file {path} is not a checkpoint (edited)",
            )
    return found


def _bundle_record(
    entry: ChainEntry, name: str, values: list[Any], children: list[list[Any]]
) -> dict[str, Any]:
    """One record of an evidence bundle: its chain entry, its fields and child rows."""
    record_format = FORMAT_OF_KIND[entry.kind]
    return {
        "format": name,
        "entry": {
            "position": entry.position,
            "kind": entry.kind,
            "recordId": entry.record_id,
            "sessionId": entry.session_id,
            "seq": entry.seq,
            "recordHash": entry.record_hash,
            "prevHash": entry.prev_hash,
            "entryHash": entry.entry_hash,
            "recordedAt": entry.recorded_at,
            "chainedAtUpgrade": entry.chained_at_upgrade,
        },
        "fields": dict(zip(record_format.fields, values, strict=True)),
        "children": [
            dict(zip(record_format.child_fields, child, strict=True)) for child in children
        ],
    }
