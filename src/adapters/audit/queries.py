"""``SqlAuditQueries``: the audit read side over SQLAlchemy Core, bound parameters only.

Citation verification is one statement (``citation_sources_statement``): an index range
scan of ``ix_invocation_evidence_session_document`` for (session_id, document_id IN ...)
joined to ``tool_invocation`` by primary key. The benchmark explains exactly this
statement.

Every query but ``session_domains`` first passes the ``barrier`` (the recorder's
``flush``): records still in the local journal are moved into the database before they
are read, so a query right after a lookup sees it. ``session_domains`` is read by the
lookup itself, once per session and process, and must not wait for the journal.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any, TypeVar

from sqlalchemy import (
    ColumnElement,
    Connection,
    Engine,
    RowMapping,
    Select,
    and_,
    case,
    distinct,
    func,
    select,
)
from sqlalchemy.exc import SQLAlchemyError

from lookup_knowledge.adapters.audit.errors import translate_query
from lookup_knowledge.adapters.audit.models import invocation_evidence, tool_invocation
from lookup_knowledge.application.ports import (
    AuditQueries,
    CitationSource,
    DocumentCount,
    EvidenceView,
    InvocationDetail,
    InvocationFilter,
    InvocationPage,
    InvocationSummary,
    QualitySummary,
    SessionFilter,
    SessionOwner,
    SessionPage,
    SessionPrincipal,
    SessionSummary,
    ShownEvidence,
    TimeRange,
    ascii_lower,
    check_session_id,
    check_tenant,
    check_top_limit,
    check_traffic,
    nearest_rank_index,
    normalise_cited,
    parse_invocation_id,
)
from lookup_knowledge.domain.errors import NotFoundError
from lookup_knowledge.domain.model import Traffic

T = tool_invocation
E = invocation_evidence

R = TypeVar("R")

_SUMMARY_COLUMNS = (
    T.c.id,
    T.c.session_id,
    T.c.seq,
    T.c.step_id,
    T.c.tool_call_id,
    T.c.tool_name,
    T.c.query,
    T.c.status,
    T.c.error_code,
    T.c.quality_score,
    T.c.relevance_level,
    T.c.retrieval_mode,
    T.c.filter_applied,
    T.c.fallback_reason,
    T.c.candidate_count,
    T.c.returned_count,
    T.c.started_at,
    T.c.duration_ms,
    T.c.traffic,
    T.c.principal_tenant,
    T.c.principal_user,
    T.c.principal_groups_hash,
    T.c.access_mode,
    T.c.access_filter,
)
_EVIDENCE_COLUMNS = (
    E.c.rank,
    E.c.document_id,
    E.c.doc_id,
    E.c.chunk_index,
    E.c.source,
    E.c.category,
    E.c.score_before,
    E.c.score_after,
    E.c.projected,
    E.c.in_context_pack,
    E.c.content_hash,
    E.c.shown_text,
    E.c.row_tenant,
)


def citation_sources_statement(session_id: str, document_ids: Sequence[str]) -> Select[Any]:
    """Every return of the cited ids in the session, first returns first."""
    return (
        select(E.c.document_id, E.c.invocation_id, E.c.rank, T.c.seq, T.c.step_id)
        .join(T, T.c.id == E.c.invocation_id)
        .where(E.c.session_id == session_id, E.c.document_id.in_(list(document_ids)))
        .order_by(T.c.seq, E.c.rank)
    )


def _time_conditions(
    time_range: TimeRange,
    traffic: Traffic | None = Traffic.PRODUCTION,
    tenant: str | None = None,
) -> list[ColumnElement[bool]]:
    """The range, the traffic kind (``None``: every kind) and the principal tenant."""
    check_traffic(traffic)
    check_tenant(tenant)
    conditions: list[ColumnElement[bool]] = []
    if traffic is not None:
        conditions.append(T.c.traffic == traffic.value)
    if tenant is not None:
        conditions.append(T.c.principal_tenant == tenant)
    if time_range.started_from is not None:
        conditions.append(T.c.started_at >= time_range.started_from)
    if time_range.started_to is not None:
        conditions.append(T.c.started_at < time_range.started_to)
    return conditions


def _utc(value: Any) -> datetime:
    at = value if isinstance(value, datetime) else datetime.fromisoformat(str(value))
    return at.replace(tzinfo=UTC) if at.tzinfo is None else at.astimezone(UTC)


def _summary(m: RowMapping) -> InvocationSummary:
    return InvocationSummary(
        id=str(m["id"]),
        session_id=m["session_id"],
        seq=int(m["seq"]),
        step_id=m["step_id"],
        tool_call_id=m["tool_call_id"],
        tool_name=m["tool_name"],
        query=m["query"],
        status=m["status"],
        error_code=m["error_code"],
        quality_score=float(m["quality_score"]),
        relevance_level=m["relevance_level"],
        retrieval_mode=m["retrieval_mode"],
        filter_applied=m["filter_applied"],
        fallback_reason=m["fallback_reason"],
        candidate_count=int(m["candidate_count"]),
        returned_count=int(m["returned_count"]),
        started_at=m["started_at"],
        duration_ms=float(m["duration_ms"]),
        traffic=m["traffic"],
        principal_tenant=m["principal_tenant"],
        principal_user=m["principal_user"],
        principal_groups_hash=m["principal_groups_hash"],
        access_mode=m["access_mode"],
        access_filter=m["access_filter"],
    )


def _evidence(m: RowMapping) -> EvidenceView:
    return EvidenceView(
        rank=int(m["rank"]),
        document_id=m["document_id"],
        doc_id=m["doc_id"],
        chunk_index=m["chunk_index"],
        source=m["source"],
        category=m["category"],
        score_before=float(m["score_before"]),
        score_after=float(m["score_after"]),
        projected=bool(m["projected"]),
        in_context_pack=bool(m["in_context_pack"]),
        content_hash=m["content_hash"],
        shown_text=m["shown_text"],
        row_tenant=m["row_tenant"],
    )


Barrier = Callable[[str | None], object]


class SqlAuditQueries(AuditQueries):
    """Thread-safe (one pooled connection per call). ``barrier(session_id or None)``:
    what must run before a read (the recorder's ``flush``); None: nothing."""

    def __init__(self, engine: Engine, barrier: Barrier | None = None) -> None:
        self._engine = engine
        self._is_pg = engine.dialect.name == "postgresql"
        self._barrier = barrier

    def _pass_barrier(self, session_id: str | None) -> None:
        if self._barrier is not None:
            self._barrier(session_id)

    def _run(self, doing: str, work: Callable[[Connection], R]) -> R:
        try:
            with self._engine.connect() as conn:
                return work(conn)
        except (SQLAlchemyError, UnicodeError) as error:
            raise translate_query(error, doing) from error

    # ------------------------------------------------------------------ invocations

    def list_invocations(self, query: InvocationFilter) -> InvocationPage:
        self._pass_barrier(query.session_id)
        conditions = _time_conditions(query.time_range, query.traffic_kind(), query.tenant)
        if query.session_id is not None:
            conditions.append(T.c.session_id == query.session_id)
        if query.step_id is not None:
            conditions.append(T.c.step_id == query.step_id)
        if query.status is not None:
            conditions.append(T.c.status == query.status)
        order = (
            (T.c.started_at.desc(), T.c.id.desc())
            if query.newest_first
            else (T.c.started_at.asc(), T.c.id.asc())
        )
        stmt = (
            select(*_SUMMARY_COLUMNS)
            .where(and_(True, *conditions))
            .order_by(*order)
            .limit(query.limit + 1)
            .offset(query.offset)
        )
        rows = self._run("listing invocations", lambda c: c.execute(stmt).mappings().all())
        items = tuple(_summary(r) for r in rows[: query.limit])
        more = len(rows) > query.limit
        return InvocationPage(items, query.offset + query.limit if more else None)

    def get_invocation(self, invocation_id: str) -> InvocationDetail:
        uid = parse_invocation_id(invocation_id)
        self._pass_barrier(None)

        def work(conn: Connection) -> tuple[RowMapping | None, list[RowMapping]]:
            head = (
                conn.execute(
                    select(
                        *_SUMMARY_COLUMNS,
                        T.c.error_message,
                        T.c.retrieve_k,
                        T.c.return_n,
                        T.c.trace_id,
                        T.c.span_id,
                        T.c.retrieval_details,
                    ).where(T.c.id == uid)
                )
                .mappings()
                .first()
            )
            if head is None:
                return None, []
            rows = (
                conn.execute(
                    select(*_EVIDENCE_COLUMNS).where(E.c.invocation_id == uid).order_by(E.c.rank)
                )
                .mappings()
                .all()
            )
            return head, list(rows)

        head, rows = self._run("reading an invocation", work)
        if head is None:
            raise NotFoundError(f"no tool invocation with id {uid}")
        m = head
        return InvocationDetail(
            summary=_summary(head),
            error_message=m["error_message"],
            retrieve_k=int(m["retrieve_k"]),
            return_n=int(m["return_n"]),
            trace_id=m["trace_id"],
            span_id=m["span_id"],
            retrieval_details=dict(m["retrieval_details"] or {}),
            evidence=tuple(_evidence(r) for r in rows),
        )

    # ------------------------------------------------------------------ sessions

    def list_sessions(self, query: SessionFilter) -> SessionPage:
        self._pass_barrier(None)
        conditions = _time_conditions(query.time_range, query.traffic_kind())
        if query.id_contains:
            conditions.append(
                func.lower(T.c.session_id).contains(ascii_lower(query.id_contains), autoescape=True)
            )
        if query.query_contains:
            asked = select(T.c.session_id).where(
                func.lower(T.c.query).contains(ascii_lower(query.query_contains), autoescape=True)
            )
            conditions.append(T.c.session_id.in_(asked))
        if query.document_id:
            shown = select(E.c.session_id).where(E.c.document_id == query.document_id)
            conditions.append(T.c.session_id.in_(shown))

        def count_if(status: str) -> Any:
            return func.coalesce(func.sum(case((T.c.status == status, 1), else_=0)), 0)

        last = func.max(T.c.started_at).label("last")
        stmt = (
            select(
                T.c.session_id,
                func.count().label("n"),
                count_if("ok").label("ok"),
                count_if("no_evidence").label("no_evidence"),
                count_if("error").label("error"),
                func.min(T.c.started_at).label("first"),
                last,
            )
            .where(and_(True, *conditions))
            .group_by(T.c.session_id)
            .order_by(last.desc(), T.c.session_id)
            .limit(query.limit + 1)
            .offset(query.offset)
        )
        if query.status is not None:
            stmt = stmt.having(count_if(query.status) > 0)
        rows = self._run("listing sessions", lambda c: c.execute(stmt).mappings().all())
        items = tuple(
            SessionSummary(
                session_id=r["session_id"],
                invocation_count=int(r["n"]),
                ok_count=int(r["ok"]),
                no_evidence_count=int(r["no_evidence"]),
                error_count=int(r["error"]),
                # min/max lose the column type on SQLite: read them back as UTC.
                first_started_at=_utc(r["first"]),
                last_started_at=_utc(r["last"]),
            )
            for r in rows[: query.limit]
        )
        more = len(rows) > query.limit
        return SessionPage(items, query.offset + query.limit if more else None)

    def session_evidence(self, session_id: str) -> tuple[ShownEvidence, ...]:
        check_session_id(session_id)
        self._pass_barrier(session_id)
        stmt = (
            select(*_EVIDENCE_COLUMNS, E.c.invocation_id, T.c.seq, T.c.step_id, T.c.started_at)
            .join(T, T.c.id == E.c.invocation_id)
            .where(E.c.session_id == session_id)
            .order_by(T.c.seq, E.c.rank)
        )
        rows = self._run("reading a session's evidence", lambda c: c.execute(stmt).mappings().all())
        return tuple(
            ShownEvidence(
                invocation_id=str(r["invocation_id"]),
                seq=int(r["seq"]),
                step_id=r["step_id"],
                started_at=r["started_at"],
                evidence=_evidence(r),
            )
            for r in rows
        )

    def session_domains(self, session_id: str) -> tuple[str, ...]:
        check_session_id(session_id)
        stmt = (
            select(E.c.category)
            .join(T, T.c.id == E.c.invocation_id)
            .where(E.c.session_id == session_id, E.c.category != "")
            .order_by(T.c.seq, E.c.rank)
        )
        rows = self._run("reading a session's domains", lambda c: c.execute(stmt).scalars().all())
        return tuple(dict.fromkeys(rows))

    def session_principals(self, session_id: str) -> tuple[SessionPrincipal, ...]:
        check_session_id(session_id)
        stmt = (
            select(T.c.principal_tenant, T.c.principal_groups_hash, T.c.access_mode)
            .where(T.c.session_id == session_id)
            .distinct()
        )
        rows = self._run("reading a session's principals", lambda c: c.execute(stmt).all())
        return tuple(
            sorted(
                {SessionPrincipal(r[0], r[1], r[2]) for r in rows},
                key=lambda p: (p.tenant or "", p.groups_hash or "", p.access_mode),
            )
        )

    def session_owners(self, session_id: str) -> tuple[SessionOwner, ...]:
        check_session_id(session_id)
        stmt = (
            select(T.c.principal_tenant, T.c.principal_user, T.c.principal_groups_hash)
            .where(T.c.session_id == session_id)
            .distinct()
        )
        rows = self._run("reading a session's owner", lambda c: c.execute(stmt).all())
        return tuple(
            sorted(
                {SessionOwner(r[0], r[1], r[2]) for r in rows},
                key=lambda o: (o.tenant or "", o.user or "", o.groups_hash or ""),
            )
        )

    def find_citation_sources(
        self, session_id: str, document_ids: Sequence[str]
    ) -> dict[str, CitationSource]:
        check_session_id(session_id)
        cited = normalise_cited(document_ids)
        if not cited:
            return {}
        self._pass_barrier(session_id)
        stmt = citation_sources_statement(session_id, cited)
        rows = self._run("verifying citations", lambda c: c.execute(stmt).mappings().all())
        found: dict[str, CitationSource] = {}
        for m in rows:
            if m["document_id"] not in found:
                found[m["document_id"]] = CitationSource(
                    document_id=m["document_id"],
                    invocation_id=str(m["invocation_id"]),
                    step_id=m["step_id"],
                    seq=int(m["seq"]),
                    rank=int(m["rank"]),
                )
        return found

    # ------------------------------------------------------------------ eval

    def top_documents(
        self,
        time_range: TimeRange,
        limit: int = 10,
        traffic: Traffic | None = Traffic.PRODUCTION,
        tenant: str | None = None,
    ) -> tuple[DocumentCount, ...]:
        check_top_limit(limit)
        self._pass_barrier(None)
        times = func.count().label("times")
        stmt = (
            select(
                E.c.document_id,
                func.max(E.c.doc_id).label("doc_id"),
                func.max(E.c.source).label("source"),
                times,
                func.count(distinct(E.c.session_id)).label("sessions"),
            )
            .join(T, T.c.id == E.c.invocation_id)
            .where(and_(True, *_time_conditions(time_range, traffic, tenant)))
            .group_by(E.c.document_id)
            .order_by(times.desc(), E.c.document_id)
            .limit(limit)
        )
        rows = self._run("ranking documents", lambda c: c.execute(stmt).mappings().all())
        return tuple(
            DocumentCount(
                document_id=r["document_id"],
                doc_id=r["doc_id"],
                source=r["source"] or "",
                times_returned=int(r["times"]),
                sessions=int(r["sessions"]),
            )
            for r in rows
        )

    def quality_summary(
        self,
        time_range: TimeRange,
        top_n: int = 10,
        traffic: Traffic | None = Traffic.PRODUCTION,
        tenant: str | None = None,
    ) -> QualitySummary:
        check_top_limit(top_n)
        self._pass_barrier(None)
        where = and_(True, *_time_conditions(time_range, traffic, tenant))

        def count_if(condition: ColumnElement[bool]) -> Any:
            return func.coalesce(func.sum(case((condition, 1), else_=0)), 0)

        columns: list[Any] = [
            func.count().label("n"),
            count_if(T.c.status == "ok").label("ok"),
            count_if(T.c.status == "no_evidence").label("no_evidence"),
            count_if(T.c.status == "error").label("error"),
            count_if(and_(T.c.fallback_reason.is_not(None), T.c.fallback_reason != "")).label(
                "fallback"
            ),
            func.avg(case((T.c.status != "error", T.c.quality_score))).label("mean_quality"),
        ]
        if self._is_pg:
            columns += [
                func.percentile_disc(0.5).within_group(T.c.duration_ms).label("p50"),
                func.percentile_disc(0.95).within_group(T.c.duration_ms).label("p95"),
            ]

        def work(conn: Connection) -> tuple[RowMapping, float | None, float | None]:
            m = conn.execute(select(*columns).where(where)).mappings().one()
            if self._is_pg or not m["n"]:
                return m, m.get("p50"), m.get("p95")
            n = int(m["n"])

            def at(percentile: float) -> float:
                value = conn.execute(
                    select(T.c.duration_ms)
                    .where(where)
                    .order_by(T.c.duration_ms)
                    .limit(1)
                    .offset(nearest_rank_index(n, percentile))
                ).scalar_one()
                return float(value)

            return m, at(50), at(95)

        m, p50, p95 = self._run("summarising quality", work)
        # imported here: the answer checks' store imports the answer checker's domain
        from lookup_knowledge.adapters.audit.answer_checks import claim_counts

        claims = self._run("counting checked claims", lambda c: claim_counts(c, time_range))
        n = int(m["n"])
        return QualitySummary(
            time_range=time_range,
            count=n,
            ok_count=int(m["ok"]),
            no_evidence_count=int(m["no_evidence"]),
            error_count=int(m["error"]),
            fallback_count=int(m["fallback"]),
            mean_quality=None if m["mean_quality"] is None else float(m["mean_quality"]),
            p50_duration_ms=None if p50 is None else float(p50),
            p95_duration_ms=None if p95 is None else float(p95),
            top_documents=self.top_documents(time_range, top_n, traffic, tenant) if n else (),
            claims_checked=claims.claims,
            claims_supported=claims.supported,
            claims_contradicted=claims.contradicted,
            traffic=traffic,
            tenant=tenant,
        )
