"""In-memory fakes of the answer checker's ports: what sessions were shown, the current
text of blocks, the check records, a judge."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from datetime import datetime

from lookup_knowledge.application.ports import (
    AnswerCheck,
    AnswerCheckFilter,
    AnswerCheckStore,
    AnswerCheckSummary,
    ClaimCounts,
    ClaimJudge,
    CurrentChunkText,
    JudgeOpinion,
    SessionEvidenceReader,
    ShownBlock,
    TimeRange,
    WordStemmer,
    summary_of,
)
from lookup_knowledge.domain.access import storage_key
from lookup_knowledge.domain.errors import JudgeError, NotFoundError


def digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class FakeSessionEvidence(SessionEvidenceReader):
    def __init__(self) -> None:
        self.blocks: list[tuple[str, ShownBlock]] = []  # (session, block)

    def show(
        self,
        session_id: str,
        document_id: str,
        text: str,
        at: datetime,
        *,
        keep_text: bool = True,
        tenant: str | None = None,
        row_tenant: str | None = None,
    ) -> None:
        seq = 1 + sum(1 for s, _ in self.blocks if s == session_id)
        block = ShownBlock(
            document_id=document_id,
            invocation_id=f"inv-{session_id}-{seq}",
            seq=seq,
            rank=1,
            step_id=None,
            started_at=at,
            content_hash=digest(text),
            shown_text=text if keep_text else None,
            principal_tenant=tenant,
            row_tenant=row_tenant,
        )
        self.blocks.append((session_id, block))

    def shown_blocks(
        self, session_id: str, document_ids: Sequence[str], as_of: datetime
    ) -> dict[str, tuple[ShownBlock, ...]]:
        out: dict[str, list[ShownBlock]] = {}
        for session, block in self.blocks:
            if (
                session == session_id
                and block.document_id in document_ids
                and block.started_at <= as_of
            ):
                out.setdefault(block.document_id, []).append(block)
        return {k: tuple(v) for k, v in out.items()}

    def sessions_returning(
        self, document_ids: Sequence[str], exclude_session_id: str, limit: int = 5
    ) -> dict[str, tuple[str, ...]]:
        out: dict[str, set[str]] = {}
        for session, block in self.blocks:
            if block.document_id in document_ids and session != exclude_session_id:
                out.setdefault(block.document_id, set()).add(session)
        return {k: tuple(sorted(v))[:limit] for k, v in out.items()}


class FakeChunkText(CurrentChunkText):
    """``texts`` by storage key (``storage_key(tenant, document_id)``; a bare id is a row
    without a tenant)."""

    def __init__(self, texts: dict[str, str] | None = None) -> None:
        self.texts = dict(texts or {})
        self.fetched: list[tuple[str, ...]] = []
        self.tenants: list[str | None] = []  # the tenant of each fetch

    def fetch_content(
        self, document_ids: Sequence[str], tenant: str | None = None
    ) -> dict[str, str]:
        self.fetched.append(tuple(document_ids))
        self.tenants.append(tenant)
        keys = {d: storage_key(tenant or "", d) for d in document_ids}
        return {d: self.texts[k] for d, k in keys.items() if k in self.texts}


class InMemoryAnswerCheckStore(AnswerCheckStore):
    def __init__(self) -> None:
        self.checks: dict[str, AnswerCheck] = {}

    def save(self, check: AnswerCheck) -> None:
        self.checks[check.id] = check

    def list_checks(self, query: AnswerCheckFilter) -> tuple[AnswerCheckSummary, ...]:
        found = sorted(
            (
                c
                for c in self.checks.values()
                if (query.session_id is None or c.session_id == query.session_id)
                and query.time_range.contains(c.created_at)
            ),
            key=lambda c: (c.created_at, c.id),
            reverse=query.newest_first,
        )
        return tuple(summary_of(c) for c in found[query.offset : query.offset + query.limit])

    def get_check(self, check_id: str) -> AnswerCheck:
        if check_id not in self.checks:
            raise NotFoundError(f"no answer check with id {check_id}")
        return self.checks[check_id]

    def claim_counts(self, time_range: TimeRange) -> ClaimCounts:
        checks = [c for c in self.checks.values() if time_range.contains(c.created_at)]
        return ClaimCounts(
            checks=len(checks),
            claims=sum(len(c.claims) for c in checks),
            supported=sum(summary_of(c).supported_count for c in checks),
            contradicted=sum(summary_of(c).contradicted_count for c in checks),
        )


class SuffixStemmer(WordStemmer):
    """Strips a plural "s": enough to show that the use case stems."""

    def stem(self, words: Sequence[str]) -> list[str]:
        return [w[:-1] if w.endswith("s") and len(w) > 3 else w for w in words]


class ScriptedJudge(ClaimJudge):
    def __init__(self, label: str = "contradicted", *, fail: bool = False) -> None:
        self.label = label
        self.fail = fail
        self.calls: list[tuple[str, tuple[str, ...]]] = []

    def judge(self, claim: str, evidence: Sequence[str]) -> JudgeOpinion:
        self.calls.append((claim, tuple(evidence)))
        if self.fail:
            raise JudgeError("judge down")
        return JudgeOpinion(self.label, 0.9, "scripted")
