"""The ``VerifyCitations`` use case (EvidenceGuard): was every ``document_id`` an agent
cited really returned to it in that session?"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import replace

from lookup_knowledge.application.access_check import CitationAccess
from lookup_knowledge.application.ports import (
    AuditQueries,
    CitationReport,
    KnowledgeSearchPort,
    ToolInvocationRecorder,
    check_session_id,
    normalise_cited,
)
from lookup_knowledge.domain.errors import InvalidInputError


class VerifyCitations:
    """EvidenceGuard: check an agent's cited document_ids against what its session saw.

    Flushes the recorder's journal for the session first (bounded by ``flush_timeout_s``),
    then asks the store, then reports how many of the session's records are still
    pending, so an incomplete answer is never presented as a complete one. With a
    knowledge base to ask (``search``), an id not returned to the session that exists
    only in documents the session's principal may not see is ``forbidden``, not
    ``unknown`` (``application/access_check.py``).
    """

    def __init__(
        self,
        queries: AuditQueries,
        recorder: ToolInvocationRecorder,
        *,
        search: KnowledgeSearchPort | None = None,
        flush_timeout_s: float = 5.0,
    ) -> None:
        if not flush_timeout_s >= 0:
            raise InvalidInputError("flush_timeout_s must be >= 0")
        self._queries = queries
        self._recorder = recorder
        self._flush_timeout_s = flush_timeout_s
        self._access = CitationAccess(queries, search)

    def execute(
        self,
        session_id: str,
        document_ids: Sequence[str],
        *,
        groups: Collection[str] | None = None,
        reveal_forbidden: bool = True,
    ) -> CitationReport:
        """``reveal_forbidden`` False (an agent caller): an id the principal may not see
        is ``unknown``, like a made-up one, and the knowledge base is not asked."""
        check_session_id(session_id)
        cited = normalise_cited(document_ids)
        self._recorder.flush(session_id, self._flush_timeout_s)
        report = citations_in_store(self._queries, session_id, cited)
        forbidden = (
            set(self._access.forbidden(session_id, report.unknown, groups))
            if reveal_forbidden
            else set()
        )
        return replace(
            report,
            unknown=tuple(d for d in report.unknown if d not in forbidden),
            forbidden=tuple(d for d in report.unknown if d in forbidden),
            pending_in_spool=self._recorder.pending_count(session_id),
        )


def citations_in_store(
    queries: AuditQueries, session_id: str, document_ids: Sequence[str]
) -> CitationReport:
    """Valid and unknown citations as the database knows them (no journal view: what a
    recorder still holds is counted by ``VerifyCitations``)."""
    check_session_id(session_id)
    cited = normalise_cited(document_ids)
    found = queries.find_citation_sources(session_id, cited) if cited else {}
    return CitationReport(
        session_id=session_id,
        valid=tuple(found[d] for d in cited if d in found),
        unknown=tuple(d for d in cited if d not in found),
    )
