"""The tamper-evident audit trail's port: verify the chain, export a session's evidence
bundle, prune old records behind a signed checkpoint (``domain.trail`` holds the rules)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from lookup_knowledge.domain.trail import Checkpoint, Problem


@dataclass(frozen=True, slots=True)
class TrailReport:
    """``verify-log``: intact, or the first problem (naming the record)."""

    problem: Problem | None
    records: int  # chain entries whose links were checked
    content_checked: int  # ... and whose records were rehashed
    first_position: int | None
    last_position: int | None
    checkpoints: int
    last_checkpoint: Checkpoint | None
    unsigned: int  # records after the last checkpoint (not signed yet)
    pruned_through: int  # records 1..pruned_through were pruned (0: none)
    prune_checkpoint: int | None
    upgrade_chained: int  # records chained by the upgrade (revision 0007)
    key_id: str
    witness: str | None = None  # the witness file cross-checked (None: none)
    witnessed: int = 0  # checkpoints it holds, each found intact in the database

    @property
    def intact(self) -> bool:
        return self.problem is None


@dataclass(frozen=True, slots=True)
class PruneReport:
    removed: int  # chain entries (records) removed
    pruned_through: int
    checkpoint: Checkpoint | None  # the signed checkpoint at the cut (None: nothing pruned)


class AuditTrail(ABC):
    @abstractmethod
    def public_key_pem(self) -> str:
        """The checkpoints' Ed25519 public key (PEM)."""

    @abstractmethod
    def verify_log(
        self,
        since: datetime | None = None,
        session_id: str | None = None,
        public_key: str | None = None,
        witness: str | None = None,
    ) -> TrailReport:
        """Recompute the chain (from the first record at or after ``since``; the records
        of ``session_id`` only, their links always) and check the checkpoints'
        signatures with ``public_key`` (a PEM file; default: the configured key's), and
        against the checkpoints ``witness`` holds (a file of JSON lines as
        ``audit.checkpoint-file`` writes it; default: that file, when configured)."""

    @abstractmethod
    def export_bundle(self, session_id: str) -> dict[str, Any]:
        """A session's evidence bundle (JSON-ready): its records with their content,
        the chain to a signed checkpoint, the checkpoint."""

    @abstractmethod
    def prune(self, before: datetime) -> PruneReport:
        """Remove the records chained before ``before`` behind a signed checkpoint at
        the cut; refuses (``AuditError``) when the trail does not verify."""
