"""The answer checker's side of the SQL audit store.

``SqlSessionEvidence`` reads what a session was shown (``invocation_evidence`` with its
``shown_text``; a range scan of ``ix_invocation_evidence_session_document``) and which
other sessions got an id (``ix_invocation_evidence_document_id``). ``SqlAnswerCheckStore``
writes and reads ``answer_check`` / ``claim_check``: one transaction per check, listed by
session and time through ``ix_answer_check_session_created`` / ``ix_answer_check_created_at``.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

from sqlalchemy import Connection, Engine, and_, func, insert, select
from sqlalchemy.exc import SQLAlchemyError

from lookup_knowledge.adapters.audit.codec import clean_json, clean_text
from lookup_knowledge.adapters.audit.errors import translate, translate_query
from lookup_knowledge.adapters.audit.models import (
    answer_check,
    claim_check,
    invocation_evidence,
    tool_invocation,
)
from lookup_knowledge.application.ports import (
    AnswerCheck,
    AnswerCheckFilter,
    AnswerCheckStore,
    AnswerCheckSummary,
    AnswerFormat,
    CheckedClaim,
    ClaimCounts,
    SessionEvidenceReader,
    ShownBlock,
    TimeRange,
    check_session_id,
    normalise_cited,
    parse_invocation_id,
    summary_of,
)
from lookup_knowledge.domain.answer_check import (
    CitationStatus,
    CitationVerdict,
    SupportSpan,
    Verdict,
)
from lookup_knowledge.domain.errors import NotFoundError

if TYPE_CHECKING:
    from lookup_knowledge.adapters.audit.chain import AuditChain

T = tool_invocation
E = invocation_evidence
A = answer_check
C = claim_check
R = TypeVar("R")


def _run(engine: Engine, doing: str, work: Callable[[Connection], R]) -> R:
    try:
        with engine.connect() as conn:
            return work(conn)
    except (SQLAlchemyError, UnicodeError) as error:
        raise translate_query(error, doing) from error


def _time_conditions(column: Any, time_range: TimeRange) -> list[Any]:
    conditions = []
    if time_range.started_from is not None:
        conditions.append(column >= time_range.started_from)
    if time_range.started_to is not None:
        conditions.append(column < time_range.started_to)
    return conditions


def claim_counts(conn: Connection, time_range: TimeRange) -> ClaimCounts:
    """Checks, claims, supported and contradicted claims whose check ran in the range."""
    row = conn.execute(
        select(
            func.count(),
            func.coalesce(func.sum(A.c.claim_count), 0),
            func.coalesce(func.sum(A.c.supported_count), 0),
            func.coalesce(func.sum(A.c.contradicted_count), 0),
        ).where(and_(True, *_time_conditions(A.c.created_at, time_range)))
    ).one()
    return ClaimCounts(
        checks=int(row[0]),
        claims=int(row[1]),
        supported=int(row[2]),
        contradicted=int(row[3]),
    )


class SqlSessionEvidence(SessionEvidenceReader):
    """``barrier(session_id or None)``: run before each read (the recorder's ``flush``),
    so records still in the local journal are read too (see ``SqlAuditQueries``)."""

    def __init__(
        self, engine: Engine, barrier: Callable[[str | None], object] | None = None
    ) -> None:
        self._engine = engine
        self._barrier = barrier

    def _pass_barrier(self, session_id: str | None) -> None:
        if self._barrier is not None:
            self._barrier(session_id)

    def shown_blocks(
        self, session_id: str, document_ids: Sequence[str], as_of: datetime
    ) -> dict[str, tuple[ShownBlock, ...]]:
        check_session_id(session_id)
        cited = normalise_cited(document_ids)
        if not cited:
            return {}
        self._pass_barrier(session_id)
        stmt = (
            select(
                E.c.document_id,
                E.c.invocation_id,
                E.c.rank,
                E.c.content_hash,
                E.c.shown_text,
                E.c.row_tenant,
                T.c.seq,
                T.c.step_id,
                T.c.started_at,
                T.c.principal_tenant,
            )
            .join(T, T.c.id == E.c.invocation_id)
            .where(
                E.c.session_id == session_id,
                E.c.document_id.in_(list(cited)),
                T.c.started_at <= as_of,
            )
            .order_by(T.c.seq, E.c.rank)
        )
        rows = _run(self._engine, "reading shown evidence", lambda c: c.execute(stmt).all())
        found: dict[str, list[ShownBlock]] = {}
        for r in rows:
            m = r._mapping
            found.setdefault(m["document_id"], []).append(
                ShownBlock(
                    document_id=m["document_id"],
                    invocation_id=str(m["invocation_id"]),
                    seq=int(m["seq"]),
                    rank=int(m["rank"]),
                    step_id=m["step_id"],
                    started_at=m["started_at"],
                    content_hash=m["content_hash"],
                    shown_text=m["shown_text"],
                    principal_tenant=m["principal_tenant"],
                    row_tenant=m["row_tenant"],
                )
            )
        return {k: tuple(v) for k, v in found.items()}

    def sessions_returning(
        self, document_ids: Sequence[str], exclude_session_id: str, limit: int = 5
    ) -> dict[str, tuple[str, ...]]:
        cited = normalise_cited(document_ids)
        if not cited:
            return {}
        self._pass_barrier(None)  # other sessions' records, too
        stmt = (
            select(E.c.session_id, E.c.document_id)
            .distinct()
            .where(E.c.document_id.in_(list(cited)), E.c.session_id != exclude_session_id)
            .order_by(E.c.document_id, E.c.session_id)
        )
        rows = _run(self._engine, "finding other sessions", lambda c: c.execute(stmt).all())
        return _first_sessions(rows, limit)

    def newest_sessions_returning(
        self, document_ids: Sequence[str], session_prefix: str, limit: int = 50
    ) -> dict[str, tuple[str, ...]]:
        cited = normalise_cited(document_ids)
        if not cited or not session_prefix:
            return super().newest_sessions_returning(cited, session_prefix, limit)
        self._pass_barrier(None)  # records of the calls just made, too
        stmt = (
            select(E.c.session_id, E.c.document_id)
            .distinct()
            .where(
                E.c.document_id.in_(list(cited)),
                E.c.session_id.startswith(session_prefix, autoescape=True),
            )
            .order_by(E.c.document_id, E.c.session_id.desc())
        )
        rows = _run(
            self._engine, "finding the sessions of cited ids", lambda c: c.execute(stmt).all()
        )
        return _first_sessions(rows, limit)


def _first_sessions(rows: Sequence[Any], limit: int) -> dict[str, tuple[str, ...]]:
    """``(session_id, document_id)`` rows in the order asked for: each document's first
    ``limit`` sessions."""
    found: dict[str, list[str]] = {}
    for session, document_id in rows:
        sessions = found.setdefault(document_id, [])
        if len(sessions) < limit:
            sessions.append(session)
    return {k: tuple(v) for k, v in found.items()}


def _claim_row(check_id: uuid.UUID, claim: CheckedClaim) -> dict[str, Any]:
    support = claim.support
    return {
        "check_id": check_id,
        "claim_index": claim.index,
        "claim_text": clean_text(claim.text),
        "span_start": claim.start,
        "span_end": claim.end,
        "cited_ids": [clean_text(c.document_id) for c in claim.citations],
        "citations": clean_json(
            [
                {
                    "document_id": c.document_id,
                    "status": c.status.value,
                    "other_sessions": list(c.other_sessions),
                }
                for c in claim.citations
            ]
        ),
        "verdict": claim.verdict.value,
        "reasons": clean_json(list(claim.reasons)),
        "support_document_id": None if support is None else clean_text(support.document_id),
        "support_start": None if support is None else support.start,
        "support_end": None if support is None else support.end,
        "support_score": None if support is None else float(support.score),
        "signals": clean_json(dict(claim.signals)),
    }


def _claim(m: Any) -> CheckedClaim:
    support = None
    if m["support_document_id"] is not None:
        support = SupportSpan(
            m["support_document_id"],
            int(m["support_start"]),
            int(m["support_end"]),
            float(m["support_score"]),
        )
    return CheckedClaim(
        index=int(m["claim_index"]),
        text=m["claim_text"],
        start=int(m["span_start"]),
        end=int(m["span_end"]),
        citations=tuple(
            CitationVerdict(
                c["document_id"], CitationStatus(c["status"]), tuple(c.get("other_sessions", ()))
            )
            for c in m["citations"] or ()
        ),
        verdict=Verdict(m["verdict"]),
        reasons=tuple(m["reasons"] or ()),
        support=support,
        signals=dict(m["signals"] or {}),
    )


def _summary(m: Any) -> AnswerCheckSummary:
    return AnswerCheckSummary(
        id=str(m["id"]),
        session_id=m["session_id"],
        step_id=m["step_id"],
        verdict=Verdict(m["verdict"]),
        claim_count=int(m["claim_count"]),
        supported_count=int(m["supported_count"]),
        unsupported_count=int(m["unsupported_count"]),
        uncited_count=int(m["uncited_count"]),
        invalid_citation_count=int(m["invalid_citation_count"]),
        checker_version=m["checker_version"],
        created_at=m["created_at"],
        contradicted_count=int(m["contradicted_count"] or 0),
    )


_SUMMARY_COLUMNS = (
    A.c.id,
    A.c.session_id,
    A.c.step_id,
    A.c.verdict,
    A.c.claim_count,
    A.c.supported_count,
    A.c.unsupported_count,
    A.c.uncited_count,
    A.c.invalid_citation_count,
    A.c.contradicted_count,
    A.c.checker_version,
    A.c.created_at,
)


class SqlAnswerCheckStore(AnswerCheckStore):
    """``chain``: the tamper-evident trail each check is appended to (``chain.py``)."""

    def __init__(self, engine: Engine, chain: AuditChain | None = None) -> None:
        self._engine = engine
        self._chain = chain

    def save(self, check: AnswerCheck) -> None:
        check_id = uuid.UUID(check.id)
        summary = summary_of(check)
        head = {
            "id": check_id,
            "session_id": check.session_id,
            "step_id": check.step_id,
            "answer_format": check.answer_format.value,
            "answer_text": clean_text(check.answer_text),
            "answer_hash": check.answer_hash,
            "verdict": check.verdict.value,
            "claim_count": summary.claim_count,
            "supported_count": summary.supported_count,
            "unsupported_count": summary.unsupported_count,
            "uncited_count": summary.uncited_count,
            "invalid_citation_count": summary.invalid_citation_count,
            "contradicted_count": summary.contradicted_count,
            "pending_in_spool": check.pending_in_spool,
            "checker_version": check.checker_version,
            "created_at": check.created_at,
        }
        rows = [_claim_row(check_id, c) for c in check.claims]
        chain = self._chain
        try:
            with chain.writing() if chain else self._engine.connect() as conn, conn.begin():
                conn.execute(insert(A), [head])
                if rows:
                    conn.execute(insert(C), rows)
                if chain is not None:  # the trail: chained in this transaction
                    chain.append_check(conn, head, rows)
        except SQLAlchemyError as error:
            raise translate(error, "recording an answer check") from error
        if chain is not None:
            chain.committed(1)

    def list_checks(self, query: AnswerCheckFilter) -> tuple[AnswerCheckSummary, ...]:
        conditions = _time_conditions(A.c.created_at, query.time_range)
        if query.session_id is not None:
            conditions.append(A.c.session_id == query.session_id)
        order = (
            (A.c.created_at.desc(), A.c.id.desc())
            if query.newest_first
            else (A.c.created_at.asc(), A.c.id.asc())
        )
        stmt = (
            select(*_SUMMARY_COLUMNS)
            .where(and_(True, *conditions))
            .order_by(*order)
            .limit(query.limit)
            .offset(query.offset)
        )
        rows = _run(self._engine, "listing answer checks", lambda c: c.execute(stmt).all())
        return tuple(_summary(r._mapping) for r in rows)

    def get_check(self, check_id: str) -> AnswerCheck:
        uid = parse_invocation_id(check_id)

        def work(conn: Connection) -> tuple[Any, list[Any]]:
            head = conn.execute(select(A).where(A.c.id == uid)).mappings().first()
            if head is None:
                return None, []
            claims = (
                conn.execute(select(C).where(C.c.check_id == uid).order_by(C.c.claim_index))
                .mappings()
                .all()
            )
            return head, list(claims)

        head, claims = _run(self._engine, "reading an answer check", work)
        if head is None:
            raise NotFoundError(f"no answer check with id {uid}")
        return AnswerCheck(
            id=str(head["id"]),
            session_id=head["session_id"],
            step_id=head["step_id"],
            answer_format=AnswerFormat(head["answer_format"]),
            answer_text=head["answer_text"],
            answer_hash=head["answer_hash"],
            verdict=Verdict(head["verdict"]),
            claims=tuple(_claim(m) for m in claims),
            checker_version=head["checker_version"],
            created_at=head["created_at"],
            pending_in_spool=int(head["pending_in_spool"]),
        )

    def claim_counts(self, time_range: TimeRange) -> ClaimCounts:
        return _run(self._engine, "counting checked claims", lambda c: claim_counts(c, time_range))
