"""The in-memory audit store: a ``ToolInvocationRecorder`` and ``AuditQueries`` over lists.

It is the one recorder fake of the test suite, and it keeps what the SQL store keeps
(tests/contract/test_audit_contract.py runs one suite against both): records arrive
already validated (``ToolInvocation`` refuses a malformed record where it is made); the
recorder stores them cleaned exactly as the SQL recorder does (``clean_invocation``: NUL
and lone surrogates become U+FFFD, times become UTC, ``retrieval_details`` become
versioned JSON) under their canonical UUID; a retried record (same id, in any case) is a
no-op; ``seq`` is assigned per session, gap-free, at record time. The queries return
first-return citation sources and nearest-rank duration percentiles.

Outages: ``InMemoryRecorder.available = False`` makes the database "unreachable": records
are spooled in memory (each counted as a failure, ``RecordOutcome.JOURNALED_OFFLINE``) and replayed
in order, before any new record, by the next ``record`` or ``flush`` once ``available``
is True again. ``spool_error`` set as well makes the spool unwritable too: ``record``
raises it, the one case in which the SQL recorder raises. After ``close`` a record is
still kept (spooled), as the SQL recorder keeps it in a spool file of its own.
"""

from __future__ import annotations

import threading
import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace

from lookup_knowledge.adapters.audit.codec import clean_invocation
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
    RecordOutcome,
    SessionFilter,
    SessionOwner,
    SessionPage,
    SessionPrincipal,
    SessionState,
    SessionSummary,
    ShownEvidence,
    TimeRange,
    ToolInvocation,
    ToolInvocationRecorder,
    ascii_lower,
    check_session_id,
    check_tenant,
    check_top_limit,
    check_traffic,
    nearest_rank,
    normalise_cited,
    parse_invocation_id,
)
from lookup_knowledge.domain.errors import AuditError, NotFoundError
from lookup_knowledge.domain.model import Traffic


@dataclass(frozen=True, slots=True)
class StoredInvocation:
    invocation: ToolInvocation
    seq: int


def _canonical(invocation: ToolInvocation) -> ToolInvocation:
    """The record as the SQL store keeps it: cleaned, and under its canonical UUID."""
    clean = clean_invocation(invocation)
    return replace(clean, id=str(uuid.UUID(clean.id)))


class InMemoryAuditStore:
    """The shared state; thread-safe."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.by_id: dict[str, StoredInvocation] = {}
        self.order: list[str] = []  # insertion order

    def insert(self, invocation: ToolInvocation) -> bool:
        with self.lock:
            if invocation.id in self.by_id:
                return False
            seq = 1 + sum(
                1
                for i in self.order
                if self.by_id[i].invocation.session_id == invocation.session_id
            )
            self.by_id[invocation.id] = StoredInvocation(invocation, seq)
            self.order.append(invocation.id)
            return True

    def all(self) -> list[StoredInvocation]:
        with self.lock:
            return [self.by_id[i] for i in self.order]

    def invocations(self) -> list[ToolInvocation]:
        """The stored records, in the order they were stored."""
        return [s.invocation for s in self.all()]


class InMemoryRecorder(ToolInvocationRecorder):
    """Records into an ``InMemoryAuditStore`` (its own, or one shared with other recorders
    and with ``InMemoryAuditQueries``); see the module docstring for the outage switches."""

    def __init__(self, store: InMemoryAuditStore | None = None) -> None:
        self.store = store or InMemoryAuditStore()
        self.available = True
        self.spool_error: AuditError | None = None
        self.closed = False
        self._pending: list[ToolInvocation] = []
        self._failures = 0
        self._lock = threading.Lock()

    @property
    def records(self) -> list[ToolInvocation]:
        """What the store holds (committed records only), in the order they were stored."""
        return self.store.invocations()

    def record(self, invocation: ToolInvocation) -> RecordOutcome:
        clean = _canonical(invocation)
        with self._lock:
            if not self.closed:
                self._replay()
            if self.closed or self._pending or not self.available:
                if not self.available:
                    self._failures += 1
                    if self.spool_error is not None:
                        raise self.spool_error
                self._pending.append(clean)
                return RecordOutcome.JOURNALED_OFFLINE
            self.store.insert(clean)
            return RecordOutcome.COMMITTED

    def _replay(self) -> None:
        while self._pending and self.available:
            self.store.insert(self._pending.pop(0))

    def flush(self, session_id: str | None = None, timeout_s: float = 10.0) -> bool:
        with self._lock:
            if not self.closed:
                self._replay()
        return self.pending_count(session_id) == 0

    def pending_count(self, session_id: str | None = None) -> int:
        with self._lock:
            return sum(1 for p in self._pending if session_id in (None, p.session_id))

    def failure_count(self) -> int:
        return self._failures

    def close(self) -> None:
        self.closed = True


def _summary(stored: StoredInvocation) -> InvocationSummary:
    i = stored.invocation
    return InvocationSummary(
        id=i.id,
        session_id=i.session_id,
        seq=stored.seq,
        step_id=i.step_id,
        tool_call_id=i.tool_call_id,
        tool_name=i.tool_name,
        query=i.query,
        status=i.status,
        error_code=i.error_code,
        quality_score=i.quality_score,
        relevance_level=i.relevance_level,
        retrieval_mode=i.retrieval_mode,
        filter_applied=i.filter_applied,
        fallback_reason=i.fallback_reason,
        candidate_count=i.candidate_count,
        returned_count=i.returned_count,
        started_at=i.started_at,
        duration_ms=i.duration_ms,
        traffic=i.traffic,
        principal_tenant=i.principal_tenant,
        principal_user=i.principal_user,
        principal_groups_hash=i.principal_groups_hash,
        access_mode=i.access_mode,
        access_filter=i.access_filter,
    )


def _of(traffic: Traffic | None, stored: StoredInvocation, tenant: str | None = None) -> bool:
    return (traffic is None or stored.invocation.traffic == traffic.value) and (
        tenant is None or stored.invocation.principal_tenant == tenant
    )


def _evidence_views(invocation: ToolInvocation) -> list[EvidenceView]:
    return sorted(invocation.evidence, key=lambda e: e.rank)


class InMemoryAuditQueries(AuditQueries):
    def __init__(self, store: InMemoryAuditStore) -> None:
        self.store = store

    def _session(self, session_id: str) -> list[StoredInvocation]:
        return sorted(
            (s for s in self.store.all() if s.invocation.session_id == session_id),
            key=lambda s: s.seq,
        )

    def list_invocations(self, query: InvocationFilter) -> InvocationPage:
        rows = [
            s
            for s in self.store.all()
            if (query.session_id is None or s.invocation.session_id == query.session_id)
            and (query.step_id is None or s.invocation.step_id == query.step_id)
            and (query.status is None or s.invocation.status == query.status)
            and query.time_range.contains(s.invocation.started_at)
            and _of(query.traffic_kind(), s, query.tenant)
        ]
        rows.sort(
            key=lambda s: (s.invocation.started_at, s.invocation.id), reverse=query.newest_first
        )
        page = rows[query.offset : query.offset + query.limit]
        more = len(rows) > query.offset + query.limit
        return InvocationPage(
            tuple(_summary(s) for s in page), query.offset + query.limit if more else None
        )

    def get_invocation(self, invocation_id: str) -> InvocationDetail:
        key = str(parse_invocation_id(invocation_id))
        with self.store.lock:
            stored = self.store.by_id.get(key)
        if stored is None:
            raise NotFoundError(f"no tool invocation with id {key}")
        i = stored.invocation
        return InvocationDetail(
            summary=_summary(stored),
            error_message=i.error_message,
            retrieve_k=i.retrieve_k,
            return_n=i.return_n,
            trace_id=i.trace_id,
            span_id=i.span_id,
            retrieval_details=dict(i.retrieval_details),
            evidence=tuple(_evidence_views(i)),
        )

    def list_sessions(self, query: SessionFilter) -> SessionPage:
        wanted = ascii_lower(query.id_contains or "")
        asked = ascii_lower(query.query_contains or "")
        asking = {
            s.invocation.session_id
            for s in self.store.all()
            if asked in ascii_lower(s.invocation.query)
        }
        shown = {
            s.invocation.session_id
            for s in self.store.all()
            if not query.document_id
            or any(e.document_id == query.document_id for e in s.invocation.evidence)
        }
        matching = asking & shown
        by_session: dict[str, list[ToolInvocation]] = {}
        for s in self.store.all():
            i = s.invocation
            if (
                query.time_range.contains(i.started_at)
                and wanted in ascii_lower(i.session_id)
                and _of(query.traffic_kind(), s)
                and i.session_id in matching
            ):
                by_session.setdefault(i.session_id, []).append(i)
        summaries = [
            SessionSummary(
                session_id=sid,
                invocation_count=len(calls),
                ok_count=sum(1 for c in calls if c.status == "ok"),
                no_evidence_count=sum(1 for c in calls if c.status == "no_evidence"),
                error_count=sum(1 for c in calls if c.status == "error"),
                first_started_at=min(c.started_at for c in calls),
                last_started_at=max(c.started_at for c in calls),
            )
            for sid, calls in by_session.items()
            if query.status is None or any(c.status == query.status for c in calls)
        ]
        # Newest last call first, ties by session id ascending.
        summaries.sort(key=lambda x: x.session_id)
        summaries.sort(key=lambda x: x.last_started_at, reverse=True)
        page = summaries[query.offset : query.offset + query.limit]
        more = len(summaries) > query.offset + query.limit
        return SessionPage(tuple(page), query.offset + query.limit if more else None)

    def session_evidence(self, session_id: str) -> tuple[ShownEvidence, ...]:
        check_session_id(session_id)
        return tuple(
            ShownEvidence(
                invocation_id=s.invocation.id,
                seq=s.seq,
                step_id=s.invocation.step_id,
                started_at=s.invocation.started_at,
                evidence=view,
            )
            for s in self._session(session_id)
            for view in _evidence_views(s.invocation)
        )

    def session_domains(self, session_id: str) -> tuple[str, ...]:
        return tuple(
            dict.fromkeys(
                shown.evidence.category
                for shown in self.session_evidence(session_id)
                if shown.evidence.category
            )
        )

    def find_citation_sources(
        self, session_id: str, document_ids: Sequence[str]
    ) -> dict[str, CitationSource]:
        check_session_id(session_id)
        wanted = set(normalise_cited(document_ids))
        found: dict[str, CitationSource] = {}
        for shown in self.session_evidence(session_id):
            key = shown.evidence.document_id
            if key in wanted and key not in found:
                found[key] = CitationSource(
                    document_id=key,
                    invocation_id=shown.invocation_id,
                    step_id=shown.step_id,
                    seq=shown.seq,
                    rank=shown.evidence.rank,
                )
        return found

    def session_owners(self, session_id: str) -> tuple[SessionOwner, ...]:
        check_session_id(session_id)
        found = {
            SessionOwner(
                s.invocation.principal_tenant,
                s.invocation.principal_user,
                s.invocation.principal_groups_hash,
            )
            for s in self._session(session_id)
        }
        return tuple(
            sorted(found, key=lambda o: (o.tenant or "", o.user or "", o.groups_hash or ""))
        )

    def session_principals(self, session_id: str) -> tuple[SessionPrincipal, ...]:
        check_session_id(session_id)
        found = {
            SessionPrincipal(
                s.invocation.principal_tenant,
                s.invocation.principal_groups_hash,
                s.invocation.access_mode,
            )
            for s in self._session(session_id)
        }
        return tuple(
            sorted(found, key=lambda p: (p.tenant or "", p.groups_hash or "", p.access_mode))
        )

    def _in_range(
        self, time_range: TimeRange, traffic: Traffic | None, tenant: str | None = None
    ) -> list[StoredInvocation]:
        check_tenant(tenant)
        return [
            s
            for s in self.store.all()
            if time_range.contains(s.invocation.started_at) and _of(traffic, s, tenant)
        ]

    def top_documents(
        self,
        time_range: TimeRange,
        limit: int = 10,
        traffic: Traffic | None = Traffic.PRODUCTION,
        tenant: str | None = None,
    ) -> tuple[DocumentCount, ...]:
        check_top_limit(limit)
        check_traffic(traffic)
        times: Counter[str] = Counter()
        sessions: dict[str, set[str]] = {}
        doc_ids: dict[str, str | None] = {}
        sources: dict[str, str] = {}
        for s in self._in_range(time_range, traffic, tenant):
            for e in s.invocation.evidence:
                times[e.document_id] += 1
                sessions.setdefault(e.document_id, set()).add(s.invocation.session_id)
                if e.doc_id is not None:
                    doc_ids[e.document_id] = max(doc_ids.get(e.document_id) or "", e.doc_id)
                sources[e.document_id] = max(sources.get(e.document_id, ""), e.source)
        ranked = sorted(times, key=lambda d: (-times[d], d))[:limit]
        return tuple(
            DocumentCount(
                document_id=d,
                doc_id=doc_ids.get(d),
                source=sources.get(d, ""),
                times_returned=times[d],
                sessions=len(sessions[d]),
            )
            for d in ranked
        )

    def quality_summary(
        self,
        time_range: TimeRange,
        top_n: int = 10,
        traffic: Traffic | None = Traffic.PRODUCTION,
        tenant: str | None = None,
    ) -> QualitySummary:
        check_top_limit(top_n)
        check_traffic(traffic)
        rows = [s.invocation for s in self._in_range(time_range, traffic, tenant)]
        statuses = Counter(i.status for i in rows)
        qualities = [i.quality_score for i in rows if i.status != "error"]
        durations = sorted(i.duration_ms for i in rows)
        return QualitySummary(
            time_range=time_range,
            count=len(rows),
            ok_count=statuses["ok"],
            no_evidence_count=statuses["no_evidence"],
            error_count=statuses["error"],
            fallback_count=sum(1 for i in rows if i.fallback_reason),
            mean_quality=sum(qualities) / len(qualities) if qualities else None,
            p50_duration_ms=nearest_rank(durations, 50),
            p95_duration_ms=nearest_rank(durations, 95),
            top_documents=self.top_documents(time_range, top_n, traffic, tenant) if rows else (),
            traffic=traffic,
            tenant=tenant,
        )


def in_memory_audit() -> tuple[InMemoryRecorder, InMemoryAuditQueries]:
    store = InMemoryAuditStore()
    return InMemoryRecorder(store), InMemoryAuditQueries(store)


class FakeSessionState(SessionState):
    def __init__(self) -> None:
        self.domains: dict[str, list[str]] = {}

    def retrieved_domains(self, session_id: str) -> tuple[str, ...]:
        return tuple(self.domains.get(session_id, ()))

    def add_retrieved_domains(self, session_id: str, domains: Sequence[str]) -> None:
        known = self.domains.setdefault(session_id, [])
        known.extend(d for d in dict.fromkeys(domains) if d not in known)
