"""The request and response bodies of the REST API (the OpenAPI document is built from
them). Responses are made from the application's audit values, field for field."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, computed_field

from lookup_knowledge.application.ports import (
    CitationReport,
    CitationSource,
    DocumentCount,
    EvidenceView,
    InvocationDetail,
    InvocationSummary,
    QualitySummary,
    SessionSummary,
)
from lookup_knowledge.application.tool import (
    MAX_DOCUMENT_ID_CHARS,
    MAX_ID_CHARS,
    unstorable_text,
)
from lookup_knowledge.domain.access import Principal

Id = Field(min_length=1, max_length=MAX_ID_CHARS)


def storable(value: str) -> str:
    """The one rule for text a request hands on to a store, a hash or a driver: no NUL,
    no lone UTF-16 surrogate (``"\\ud800"`` in JSON). Refused here with a 422 naming
    the field, so no route meets it as an encoder's or driver's error."""
    why = unstorable_text(value)
    if why is not None:
        raise ValueError(why)
    return value


def storable_json(value: Any) -> Any:
    """``storable`` on every string (keys too) of a JSON value (Claude content blocks)."""
    if isinstance(value, str):
        return storable(value)
    if isinstance(value, dict):
        for key, item in value.items():
            storable(key)
            storable_json(item)
    elif isinstance(value, list):
        for item in value:
            storable_json(item)
    return value


#: Request text: what a store can keep and compare exactly (``storable``).
Text = Annotated[str, AfterValidator(storable)]


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class PrincipalIn(_Body):
    """Who the lookup is for, as the calling host authenticated them (``access.mode``)."""

    tenant: Text = Field(min_length=1, max_length=128)
    user: Text = Field(default="", max_length=128)
    groups: list[Text] = Field(default_factory=list, max_length=256)

    def principal(self) -> Principal:
        return Principal(self.tenant, self.user, frozenset(self.groups))


class LookupRequest(_Body):
    """One ``lookup_knowledge(query)`` call on behalf of an agent's session. The caller
    (holder of the agent token) is the host: it names the principal, never the model."""

    query: str = Field(description="The agent's query (the tool's one argument).")
    session_id: Text = Field(min_length=1, max_length=MAX_ID_CHARS)
    step_id: Text | None = Field(default=None, min_length=1, max_length=MAX_ID_CHARS)
    tool_call_id: Text | None = Field(default=None, min_length=1, max_length=MAX_ID_CHARS)
    mode: Literal["dense", "sparse", "hybrid"] | None = None
    category: Text | None = Field(default=None, max_length=MAX_ID_CHARS)
    principal: PrincipalIn | None = None


class VerifyRequest(_Body):
    """The document_ids an agent cited in a session (``groups``: the session principal's
    groups, checked against the recorded digest, for ``forbidden``)."""

    session_id: Text = Field(min_length=1, max_length=MAX_ID_CHARS)
    document_ids: list[Text] = Field(max_length=1000)
    groups: list[Text] | None = Field(default=None, max_length=256)


class CheckAnswerRequest(_Body):
    """An agent's answer to check against what its session was shown: prose with
    bracketed document ids, or a Claude response's content blocks (``anthropic``)."""

    session_id: Text = Field(min_length=1, max_length=MAX_ID_CHARS)
    answer: Text | Annotated[list[dict[str, Any]], AfterValidator(storable_json)] = Field(
        description="The answer text, or the Claude response content blocks."
    )
    step_id: Text | None = Field(default=None, min_length=1, max_length=MAX_ID_CHARS)
    format: Literal["text", "anthropic"] | None = None


class CitationSourceOut(BaseModel):
    document_id: str
    invocation_id: str
    step_id: str | None
    seq: int
    rank: int

    @classmethod
    def of(cls, v: CitationSource) -> CitationSourceOut:
        return cls(
            document_id=v.document_id,
            invocation_id=v.invocation_id,
            step_id=v.step_id,
            seq=v.seq,
            rank=v.rank,
        )


class VerifyResponse(BaseModel):
    session_id: str
    all_valid: bool
    conclusive: bool
    valid: list[CitationSourceOut]
    unknown: list[str]
    pending_in_spool: int
    forbidden: list[str] = Field(default_factory=list)

    @classmethod
    def of(cls, r: CitationReport) -> VerifyResponse:
        return cls(
            session_id=r.session_id,
            all_valid=r.all_valid,
            conclusive=r.conclusive,
            valid=[CitationSourceOut.of(v) for v in r.valid],
            unknown=list(r.unknown),
            pending_in_spool=r.pending_in_spool,
            forbidden=list(r.forbidden),
        )


class InvocationOut(BaseModel):
    id: str
    session_id: str
    seq: int
    step_id: str | None
    tool_call_id: str | None
    tool_name: str
    query: str
    status: str
    error_code: str | None
    quality_score: float
    relevance_level: str
    retrieval_mode: str
    filter_applied: str | None
    fallback_reason: str | None
    candidate_count: int
    returned_count: int
    started_at: datetime
    duration_ms: float

    @classmethod
    def of(cls, s: InvocationSummary) -> InvocationOut:
        return cls(
            id=s.id,
            session_id=s.session_id,
            seq=s.seq,
            step_id=s.step_id,
            tool_call_id=s.tool_call_id,
            tool_name=s.tool_name,
            query=s.query,
            status=s.status,
            error_code=s.error_code,
            quality_score=s.quality_score,
            relevance_level=s.relevance_level,
            retrieval_mode=s.retrieval_mode,
            filter_applied=s.filter_applied,
            fallback_reason=s.fallback_reason,
            candidate_count=s.candidate_count,
            returned_count=s.returned_count,
            started_at=s.started_at,
            duration_ms=s.duration_ms,
        )


class InvocationPageOut(BaseModel):
    items: list[InvocationOut]
    next_offset: int | None = Field(description="Pass as offset for the next page; null: last.")


class EvidenceOut(BaseModel):
    rank: int
    document_id: str = Field(max_length=MAX_DOCUMENT_ID_CHARS)
    doc_id: str | None
    chunk_index: int | None
    source: str
    category: str
    score_before: float = Field(description="Relevance before the rerank.")
    score_after: float = Field(description="Score after the rerank.")
    projected: bool
    in_context_pack: bool
    content_hash: str = Field(description="SHA-256 of the exact text shown.")
    row_tenant: str | None = Field(
        default=None,
        description="Tenant of the stored row the block came from; '' a row without a "
        "tenant; null: not recorded (records written before audit revision 0005).",
    )

    @classmethod
    def of(cls, e: EvidenceView) -> EvidenceOut:
        return cls(
            rank=e.rank,
            document_id=e.document_id,
            doc_id=e.doc_id,
            chunk_index=e.chunk_index,
            source=e.source,
            category=e.category,
            score_before=e.score_before,
            score_after=e.score_after,
            projected=e.projected,
            in_context_pack=e.in_context_pack,
            content_hash=e.content_hash,
            row_tenant=e.row_tenant,
        )


class InvocationDetailOut(InvocationOut):
    error_message: str | None
    retrieve_k: int
    return_n: int
    trace_id: str | None
    span_id: str | None
    retrieval_details: dict[str, Any]
    evidence: list[EvidenceOut]

    @classmethod
    def of_detail(cls, d: InvocationDetail) -> InvocationDetailOut:
        return cls(
            **InvocationOut.of(d.summary).model_dump(),
            error_message=d.error_message,
            retrieve_k=d.retrieve_k,
            return_n=d.return_n,
            trace_id=d.trace_id,
            span_id=d.span_id,
            retrieval_details=dict(d.retrieval_details),
            evidence=[EvidenceOut.of(e) for e in d.evidence],
        )


class SessionOut(BaseModel):
    session_id: str
    invocation_count: int
    ok_count: int
    no_evidence_count: int
    error_count: int
    first_started_at: datetime
    last_started_at: datetime

    @classmethod
    def of(cls, s: SessionSummary) -> SessionOut:
        return cls(
            session_id=s.session_id,
            invocation_count=s.invocation_count,
            ok_count=s.ok_count,
            no_evidence_count=s.no_evidence_count,
            error_count=s.error_count,
            first_started_at=s.first_started_at,
            last_started_at=s.last_started_at,
        )


class SessionPageOut(BaseModel):
    items: list[SessionOut]
    next_offset: int | None


class DocumentCountOut(BaseModel):
    document_id: str
    doc_id: str | None
    source: str
    times_returned: int
    sessions: int

    @classmethod
    def of(cls, d: DocumentCount) -> DocumentCountOut:
        return cls(
            document_id=d.document_id,
            doc_id=d.doc_id,
            source=d.source,
            times_returned=d.times_returned,
            sessions=d.sessions,
        )


class StatsOut(BaseModel):
    since: datetime | None
    until: datetime | None
    count: int
    ok_count: int
    no_evidence_count: int
    error_count: int
    fallback_count: int
    no_evidence_rate: float
    fallback_rate: float
    error_rate: float
    mean_quality: float | None
    p50_duration_ms: float | None
    p95_duration_ms: float | None
    top_documents: list[DocumentCountOut]

    @classmethod
    def of(cls, q: QualitySummary) -> StatsOut:
        return cls(
            since=q.time_range.started_from,
            until=q.time_range.started_to,
            count=q.count,
            ok_count=q.ok_count,
            no_evidence_count=q.no_evidence_count,
            error_count=q.error_count,
            fallback_count=q.fallback_count,
            no_evidence_rate=q.no_evidence_rate,
            fallback_rate=q.fallback_rate,
            error_rate=q.error_rate,
            mean_quality=q.mean_quality,
            p50_duration_ms=q.p50_duration_ms,
            p95_duration_ms=q.p95_duration_ms,
            top_documents=[DocumentCountOut.of(d) for d in q.top_documents],
        )


class Health(BaseModel):
    status: Literal["ok"]


class Check(BaseModel):
    ok: bool
    detail: str


class Readiness(BaseModel):
    status: Literal["ready", "not_ready"]
    checks: dict[str, Check] = Field(description="Each component (LookupApp.health()).")
    spool_pending: int | None = Field(
        description="The old name of journal_pending, still emitted for probes that read it."
    )

    @computed_field  # type: ignore[prop-decorator]
    @property
    def journal_pending(self) -> int | None:
        """Audit records waiting in the local journal."""
        return self.spool_pending
