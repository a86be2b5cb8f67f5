"""``CheckAnswer``: is what the agent wrote supported by what its session was shown?

``VerifyCitations`` answers "was this document_id returned in this session?"; this use
case asks the next question of every claim in an answer: do its cited ids point at blocks
the session saw, do its quotes occur in them, do its numbers, codes and names, and do its
words, mostly? The rules are the domain's (``domain.answer_check``); this module gathers
their inputs through small ports and records the verdicts beside the invocations:

* ``SessionEvidenceReader`` - the blocks a session was shown, with the exact text
  (``shown_text``) where the store kept it, and which other sessions got an id;
* ``CurrentChunkText`` - a block's current text from the knowledge store, for records that
  kept only a hash (``audit.keep-shown-text`` false, or written before the text was kept):
  the text is used only if it hashes to what was shown, else "evidence changed since shown";
* ``WordStemmer`` - stems for lexical coverage; ``Embedder`` (optional) - claim-to-block
  cosine; ``ClaimJudge`` (optional) - an NLI/LLM opinion recorded as a signal, never a
  verdict;
* ``AnswerCheckStore`` - the ``answer_check`` / ``claim_check`` records.
"""

from __future__ import annotations

import hashlib
import math
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from types import MappingProxyType
from typing import Any

from lookup_knowledge.application.ids import uuid7
from lookup_knowledge.application.ports import (
    Clock,
    Embedder,
    TimeRange,
    ToolInvocationRecorder,
    check_session_id,
)
from lookup_knowledge.domain.answer_check import (
    CHECKER_VERSION,
    DEFAULT_CITATION_PATTERN,
    CheckThresholds,
    CitationStatus,
    CitationSyntax,
    CitationVerdict,
    Claim,
    ClaimVerdict,
    EvidenceText,
    PreparedEvidence,
    SupportSpan,
    Verdict,
    assess_claim,
    claims_from_claude,
    overall_verdict,
    shown_text_from,
    split_claims,
)
from lookup_knowledge.domain.errors import (
    ConfigurationError,
    InvalidInputError,
    LookupKnowledgeError,
)

MAX_ANSWER_CHARS = 200_000
MAX_CLAIMS = 500
MAX_OTHER_SESSIONS = 5
CHANGED_SINCE_SHOWN = "evidence changed since shown"
_NO_SIGNALS: Mapping[str, object] = MappingProxyType({})


class AnswerFormat(StrEnum):
    TEXT = "text"  # prose with bracketed document ids
    ANTHROPIC = "anthropic"  # a Claude response's content blocks with search_result citations


# --------------------------------------------------------------------------- ports


@dataclass(frozen=True, slots=True)
class ShownBlock:
    """One time a session was shown a block."""

    document_id: str
    invocation_id: str
    seq: int
    rank: int
    step_id: str | None
    started_at: datetime
    content_hash: str
    shown_text: str | None  # None: the store kept only the hash


class SessionEvidenceReader(ABC):
    """What sessions were shown. Raises ``AuditError`` subclasses only."""

    @abstractmethod
    def shown_blocks(
        self, session_id: str, document_ids: Sequence[str], as_of: datetime
    ) -> dict[str, tuple[ShownBlock, ...]]:
        """Every showing of the ids in the session that started at or before ``as_of``,
        oldest first; ids never shown are absent."""

    @abstractmethod
    def sessions_returning(
        self, document_ids: Sequence[str], exclude_session_id: str, limit: int = MAX_OTHER_SESSIONS
    ) -> dict[str, tuple[str, ...]]:
        """For each id: up to ``limit`` other sessions it was returned to (sorted)."""


class CurrentChunkText(ABC):
    """A block's current text in the knowledge store, by document_id."""

    @abstractmethod
    def fetch_content(self, document_ids: Sequence[str]) -> dict[str, str]: ...


class WordStemmer(ABC):
    """Stems words (lower-case, one per item) for lexical coverage."""

    @abstractmethod
    def stem(self, words: Sequence[str]) -> list[str]: ...


@dataclass(frozen=True, slots=True)
class JudgeOpinion:
    label: str  # "entailed" | "contradicted" | "neutral"
    score: float | None = None
    model: str = ""


class ClaimJudge(ABC):
    """An optional NLI or LLM judge. Raises ``JudgeError`` when it cannot answer."""

    @abstractmethod
    def judge(self, claim: str, evidence: Sequence[str]) -> JudgeOpinion: ...


# --------------------------------------------------------------------------- records


@dataclass(frozen=True, slots=True)
class CheckedClaim:
    """One claim's verdict as recorded (and as read back from the store)."""

    index: int
    text: str
    start: int
    end: int
    citations: tuple[CitationVerdict, ...]
    verdict: Verdict
    reasons: tuple[str, ...] = ()
    support: SupportSpan | None = None
    # Everything else the checker saw: quotes found (offsets), facts missing, coverage,
    # cosine, the judge's opinion. Plain JSON values.
    signals: Mapping[str, object] = field(default_factory=lambda: _NO_SIGNALS)

    @property
    def cited_ids(self) -> tuple[str, ...]:
        return tuple(c.document_id for c in self.citations)


@dataclass(frozen=True, slots=True)
class AnswerCheck:
    id: str
    session_id: str
    step_id: str | None
    answer_format: AnswerFormat
    answer_text: str
    answer_hash: str
    verdict: Verdict
    claims: tuple[CheckedClaim, ...]
    checker_version: str
    created_at: datetime
    pending_in_spool: int = 0

    def count(self, verdict: Verdict) -> int:
        return sum(1 for c in self.claims if c.verdict is verdict)

    @property
    def all_supported(self) -> bool:
        return all(c.verdict is Verdict.SUPPORTED for c in self.claims)

    @property
    def conclusive(self) -> bool:
        """False when some of the session's records were still spooled: an ``unknown``
        citation may then be one the database has not received yet."""
        return self.pending_in_spool == 0


@dataclass(frozen=True, slots=True)
class AnswerCheckSummary:
    id: str
    session_id: str
    step_id: str | None
    verdict: Verdict
    claim_count: int
    supported_count: int
    unsupported_count: int
    uncited_count: int
    invalid_citation_count: int
    checker_version: str
    created_at: datetime


@dataclass(frozen=True, slots=True)
class AnswerCheckFilter:
    session_id: str | None = None
    time_range: TimeRange = field(default_factory=TimeRange)
    limit: int = 50
    offset: int = 0
    newest_first: bool = False

    def __post_init__(self) -> None:
        if self.session_id is not None:
            check_session_id(self.session_id)
        if isinstance(self.limit, bool) or not 1 <= self.limit <= 1000:
            raise InvalidInputError("limit must be between 1 and 1000")
        if isinstance(self.offset, bool) or self.offset < 0:
            raise InvalidInputError("offset must be >= 0")


@dataclass(frozen=True, slots=True)
class ClaimCounts:
    """Checked claims in a time range; ``supported_share`` is None when there are none."""

    checks: int = 0
    claims: int = 0
    supported: int = 0

    @property
    def supported_share(self) -> float | None:
        return self.supported / self.claims if self.claims else None


class AnswerCheckStore(ABC):
    """The ``answer_check`` / ``claim_check`` records. Raises ``AuditError`` subclasses,
    ``NotFoundError`` for an unknown check id."""

    @abstractmethod
    def save(self, check: AnswerCheck) -> None: ...

    @abstractmethod
    def list_checks(self, query: AnswerCheckFilter) -> tuple[AnswerCheckSummary, ...]: ...

    @abstractmethod
    def get_check(self, check_id: str) -> AnswerCheck: ...

    @abstractmethod
    def claim_counts(self, time_range: TimeRange) -> ClaimCounts: ...


def summary_of(check: AnswerCheck) -> AnswerCheckSummary:
    return AnswerCheckSummary(
        id=check.id,
        session_id=check.session_id,
        step_id=check.step_id,
        verdict=check.verdict,
        claim_count=len(check.claims),
        supported_count=check.count(Verdict.SUPPORTED),
        unsupported_count=check.count(Verdict.UNSUPPORTED),
        uncited_count=check.count(Verdict.UNCITED),
        invalid_citation_count=check.count(Verdict.INVALID_CITATION),
        checker_version=check.checker_version,
        created_at=check.created_at,
    )


# --------------------------------------------------------------------------- JSON


def answer_check_json(check: AnswerCheck) -> dict[str, Any]:
    """The published shape (``audit check-answer --json``, the MCP tool): other tools rely
    on these names."""
    return {
        "checkId": check.id,
        "sessionId": check.session_id,
        "verdict": check.verdict.value,
        "claims": [
            {
                "index": c.index,
                "text": c.text,
                "start": c.start,
                "end": c.end,
                "citations": [
                    {"document_id": v.document_id, "status": v.status.value} for v in c.citations
                ],
                "verdict": c.verdict.value,
                "reasons": list(c.reasons),
                "support": (
                    None
                    if c.support is None
                    else {
                        "document_id": c.support.document_id,
                        "start": c.support.start,
                        "end": c.support.end,
                        "score": c.support.score,
                    }
                ),
            }
            for c in check.claims
        ],
    }


# --------------------------------------------------------------------------- use case


@dataclass(frozen=True, slots=True)
class AnswerCheckSettings:
    thresholds: CheckThresholds = field(default_factory=CheckThresholds)
    citation_pattern: str = DEFAULT_CITATION_PATTERN

    def __post_init__(self) -> None:
        try:
            CitationSyntax(self.citation_pattern)
        except ValueError as error:
            raise ConfigurationError(
                "audit.check.citation-pattern", self.citation_pattern, str(error)
            ) from None


def _answer_text(answer: object) -> str:
    if not isinstance(answer, str) or not answer.strip():
        raise InvalidInputError("answer must be a non-empty string")
    if len(answer) > MAX_ANSWER_CHARS:
        raise InvalidInputError(f"answer is longer than {MAX_ANSWER_CHARS} characters")
    return answer


def claude_content(answer: object) -> Sequence[object]:
    """The content blocks of a Claude response given as the message (a mapping or an SDK
    ``Message`` with ``content``) or as the block list itself."""
    content = answer.get("content") if isinstance(answer, Mapping) else answer
    if not isinstance(content, Sequence) and hasattr(answer, "content"):
        content = answer.content
    if isinstance(content, str) or not isinstance(content, Sequence):
        raise InvalidInputError(
            "a Claude answer must be a list of content blocks or a message with 'content'"
        )
    return content


def _cosine(a: Sequence[float], b: Sequence[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=False))
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return dot / norm if norm else 0.0


class CheckAnswer:
    """Checks an answer's claims against the evidence its session was shown, records the
    verdicts (``persist``) and returns them. Flushes the session's spooled audit records
    first, like ``VerifyCitations``."""

    def __init__(
        self,
        *,
        evidence: SessionEvidenceReader,
        store: AnswerCheckStore,
        recorder: ToolInvocationRecorder,
        clock: Clock,
        stemmer: WordStemmer,
        chunk_text: CurrentChunkText | None = None,
        embedder: Embedder | None = None,
        judge: ClaimJudge | None = None,
        settings: AnswerCheckSettings | None = None,
        flush_timeout_s: float = 5.0,
    ) -> None:
        self._evidence = evidence
        self._store = store
        self._recorder = recorder
        self._clock = clock
        self._stemmer = stemmer
        self._chunk_text = chunk_text
        self._embedder = embedder
        self._judge = judge
        self._settings = settings or AnswerCheckSettings()
        self._syntax = CitationSyntax(self._settings.citation_pattern)
        self._flush_timeout_s = flush_timeout_s

    def execute(
        self,
        session_id: str,
        answer: object,
        *,
        step_id: str | None = None,
        answer_format: AnswerFormat | str = AnswerFormat.TEXT,
        persist: bool = True,
    ) -> AnswerCheck:
        check_session_id(session_id)
        if step_id is not None and (not isinstance(step_id, str) or not 0 < len(step_id) <= 255):
            raise InvalidInputError("step_id must be a string of 1..255 characters")
        try:
            fmt = AnswerFormat(answer_format)
        except ValueError:
            raise InvalidInputError(
                f"unknown answer format {answer_format!r}; use text or anthropic"
            ) from None
        if fmt is AnswerFormat.TEXT:
            text = _answer_text(answer)
            claims = split_claims(text, self._syntax)
        else:
            text, claims = claims_from_claude(claude_content(answer), self._syntax)
            _answer_text(text)
        if len(claims) > MAX_CLAIMS:
            raise InvalidInputError(f"the answer has more than {MAX_CLAIMS} claims")

        self._recorder.flush(session_id, self._flush_timeout_s)
        pending = self._recorder.pending_count(session_id)
        now = self._clock.now()
        cited = tuple(dict.fromkeys(d for c in claims for d in c.cited_ids))
        statuses, texts = self._gather(session_id, cited, now)
        stem = self._stemmer.stem
        cosines = self._cosines(claims, texts)
        verdicts = [
            assess_claim(
                claim,
                statuses,
                texts,
                stem,
                self._settings.thresholds,
                cosines.get(claim.index),
            )
            for claim in claims
        ]
        checked = tuple(self._recorded(v, texts) for v in verdicts)
        check = AnswerCheck(
            id=str(uuid7(now)),
            session_id=session_id,
            step_id=step_id,
            answer_format=fmt,
            answer_text=text,
            answer_hash=hashlib.sha256(text.encode("utf-8")).hexdigest(),
            verdict=overall_verdict(verdicts),
            claims=checked,
            checker_version=CHECKER_VERSION,
            created_at=now,
            pending_in_spool=pending,
        )
        if persist:
            self._store.save(check)
        return check

    # ------------------------------------------------------------------ inputs

    def _gather(
        self, session_id: str, cited: Sequence[str], now: datetime
    ) -> tuple[dict[str, CitationVerdict], dict[str, list[EvidenceText]]]:
        if not cited:
            return {}, {}
        shown = self._evidence.shown_blocks(session_id, cited, now)
        missing = [d for d in cited if d not in shown]
        elsewhere = (
            self._evidence.sessions_returning(missing, session_id, MAX_OTHER_SESSIONS)
            if missing
            else {}
        )
        statuses: dict[str, CitationVerdict] = {}
        for d in cited:
            if d in shown:
                statuses[d] = CitationVerdict(d, CitationStatus.VALID)
            elif elsewhere.get(d):
                statuses[d] = CitationVerdict(d, CitationStatus.NOT_IN_SESSION, elsewhere[d])
            else:
                statuses[d] = CitationVerdict(d, CitationStatus.UNKNOWN)
        need_fetch = sorted(
            {b.document_id for bs in shown.values() for b in bs if b.shown_text is None}
        )
        current: dict[str, str] = {}
        if need_fetch and self._chunk_text is not None:
            try:
                current = self._chunk_text.fetch_content(need_fetch)
            except LookupKnowledgeError:
                current = {}
        stem = self._stemmer.stem
        texts: dict[str, list[EvidenceText]] = {}
        for d, blocks in shown.items():
            seen: set[str] = set()
            for block in blocks:
                if block.content_hash in seen:
                    continue  # shown twice, same text
                seen.add(block.content_hash)
                text = block.shown_text
                problem = None
                if text is None:
                    if d not in current:
                        problem = "shown text not kept and the block is no longer in the store"
                    else:
                        text = shown_text_from(current[d], block.content_hash)
                        problem = None if text is not None else CHANGED_SINCE_SHOWN
                prepared = None if text is None else PreparedEvidence.of(d, text, stem)
                texts.setdefault(d, []).append(EvidenceText(d, prepared, problem))
        return statuses, texts

    def _cosines(
        self, claims: Sequence[Claim], texts: Mapping[str, Sequence[EvidenceText]]
    ) -> dict[int, dict[str, float]]:
        if self._embedder is None:
            return {}
        wanted = [c for c in claims if any(d in texts for d in c.cited_ids)]
        blocks = {
            e.document_id: e.prepared.text
            for items in texts.values()
            for e in items
            if e.prepared is not None
        }
        if not wanted or not blocks:
            return {}
        ids = list(blocks)
        vectors = self._embedder.embed_documents(
            [c.text for c in wanted] + [blocks[d] for d in ids]
        )
        block_vectors = dict(zip(ids, vectors[len(wanted) :], strict=True))
        out: dict[int, dict[str, float]] = {}
        for claim, vector in zip(wanted, vectors[: len(wanted)], strict=True):
            out[claim.index] = {
                d: _cosine(vector, block_vectors[d]) for d in claim.cited_ids if d in block_vectors
            }
        return out

    def _recorded(
        self, verdict: ClaimVerdict, texts: Mapping[str, Sequence[EvidenceText]]
    ) -> CheckedClaim:
        claim = verdict.claim
        signals: dict[str, object] = {}
        if verdict.coverage is not None:
            signals["coverage"] = round(verdict.coverage, 4)
        if verdict.cosine is not None:
            signals["cosine"] = round(verdict.cosine, 4)
        if verdict.missing:
            signals["missing"] = list(verdict.missing)
        if verdict.quotes:
            signals["quotes"] = [
                {"text": q.text, "document_id": q.document_id, "start": q.start, "end": q.end}
                for q in verdict.quotes
            ]
        if claim.facts:
            signals["facts"] = [{"kind": f.kind.value, "key": f.key} for f in claim.facts]
        if self._judge is not None and verdict.verdict in (Verdict.SUPPORTED, Verdict.UNSUPPORTED):
            shown = [
                e.prepared.text
                for d in claim.cited_ids
                for e in texts.get(d, ())
                if e.prepared is not None
            ]
            if shown:
                signals["judge"] = self._ask_judge(claim.text, shown)
        return CheckedClaim(
            index=claim.index,
            text=claim.text,
            start=claim.start,
            end=claim.end,
            citations=verdict.citations,
            verdict=verdict.verdict,
            reasons=verdict.reasons,
            support=verdict.support,
            signals=MappingProxyType(signals),
        )

    def _ask_judge(self, claim: str, evidence: Sequence[str]) -> dict[str, object]:
        assert self._judge is not None
        try:
            opinion = self._judge.judge(claim, evidence)
        except LookupKnowledgeError as error:
            return {"error": f"{error.code}: {error.message}"}
        return {"label": opinion.label, "score": opinion.score, "model": opinion.model}
