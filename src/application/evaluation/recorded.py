"""Reading what the audit store recorded for an eval or replay session."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from lookup_knowledge.application.ports import (
    MAX_PAGE_SIZE,
    AuditQueries,
    EvidenceView,
    InvocationFilter,
    InvocationSummary,
    RecordOutcome,
    ToolInvocationRecorder,
)
from lookup_knowledge.domain.errors import (
    AuditError,
    ConfigurationError,
)

#: The measures an eval reports, in ir-measures notation (RR@10 is MRR@10 once averaged).

# --------------------------------------------------------------------------- reading the audit store


@dataclass(frozen=True, slots=True)
class RecordedInvocation:
    """An invocation as the audit store holds it, with its evidence in rank order."""

    summary: InvocationSummary
    evidence: tuple[EvidenceView, ...]

    @property
    def document_ids(self) -> tuple[str, ...]:
        """Chunk-level evidence keys, best rank first."""
        return tuple(e.document_id for e in self.evidence)

    @property
    def documents(self) -> tuple[str, ...]:
        """Document-level ranking: each document once, at its best chunk's rank."""
        return document_ranking(self.evidence)


def document_ranking(evidence: Sequence[EvidenceView]) -> tuple[str, ...]:
    """Documents in order of their best-ranked chunk; a row without doc_id is its own
    document (its evidence key)."""
    ordered = sorted(evidence, key=lambda e: e.rank)
    return tuple(dict.fromkeys(e.doc_id or e.document_id for e in ordered))


def run_scores(documents: Sequence[str]) -> dict[str, float]:
    """Scores for a document ranking: 1 / (position), so higher is better, no ties."""
    return {doc: 1.0 / position for position, doc in enumerate(documents, 1)}


def list_all_invocations(audit: AuditQueries, query: InvocationFilter) -> list[InvocationSummary]:
    items: list[InvocationSummary] = []
    offset: int | None = 0
    while offset is not None:
        page = audit.list_invocations(
            InvocationFilter(
                session_id=query.session_id,
                step_id=query.step_id,
                status=query.status,
                time_range=query.time_range,
                limit=MAX_PAGE_SIZE,
                offset=offset,
                traffic=query.traffic,
            )
        )
        items.extend(page.items)
        offset = page.next_offset
    return items


def read_session(
    audit: AuditQueries,
    recorder: ToolInvocationRecorder,
    session_id: str,
    *,
    flush_timeout_s: float = 30.0,
) -> list[RecordedInvocation]:
    """Every invocation of a session with its evidence, oldest first.

    Flushes the recorder's journal for the session first; raises ``AuditError`` when
    records are still pending (the store would give an incomplete answer).
    """
    recorder.flush(session_id, flush_timeout_s)
    pending = recorder.pending_count(session_id)
    if pending:
        raise AuditError(
            f"{pending} record(s) of session {session_id!r} are still in the recorder's "
            "journal (the audit database is unreachable); the session cannot be read completely"
        )
    summaries = list_all_invocations(audit, InvocationFilter(session_id=session_id))
    by_invocation: dict[str, list[EvidenceView]] = {}
    for shown in audit.session_evidence(session_id):
        by_invocation.setdefault(shown.invocation_id, []).append(shown.evidence)
    return [
        RecordedInvocation(s, tuple(sorted(by_invocation.get(s.id, ()), key=lambda e: e.rank)))
        for s in summaries
    ]


def check_recorded(outcome: RecordOutcome | None) -> None:
    if outcome is RecordOutcome.DISABLED:
        raise ConfigurationError(
            "audit.enabled",
            False,
            "eval and replay read their results from the audit store; enable recording",
        )
    if outcome is None:
        raise AuditError(
            "a lookup's audit record could neither be written nor journaled; see the log"
        )
