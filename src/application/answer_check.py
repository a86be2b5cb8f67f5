"""``CheckAnswer``: is what the agent wrote supported by what its session was shown?

``VerifyCitations`` answers "was this document_id returned in this session?"; this use
case asks the next question of every claim in an answer: do its cited ids point at blocks
the session saw, do its quotes occur in them, do its numbers, codes and names, and do its
words, mostly? The rules are the domain's (``domain.answer_check``); this module gathers
their inputs through small ports (``application.ports.answer_check``) and records the
verdicts beside the invocations:

* ``SessionEvidenceReader`` - the blocks a session was shown, with the exact text
  (``shown_text``) where the store kept it, and which other sessions got an id;
* ``CurrentChunkText`` - a block's current text from the knowledge store, for records that
  kept only a hash (``audit.keep-shown-text`` false, or written before the text was kept),
  read from the row the block was recorded to come from (its ``row_tenant``; records
  written before audit revision 0005: the rows of the tenant the showing invocation was
  made for, and the untenanted ones): the text is used only if it hashes to what was
  shown, else "evidence changed since shown";
* ``WordStemmer`` - stems for lexical coverage; ``Embedder`` (optional) - claim-to-block
  cosine; ``ClaimJudge`` (optional) - an NLI/LLM opinion of the claim against its aligned
  span, recorded as a signal (``JudgeMode.SIGNAL``) or also overturning ``supported``
  (``JudgeMode.VETO``: contradicted -> ``contradicted``, neutral -> ``unsupported``);
* ``AnswerCheckStore`` - the ``answer_check`` / ``claim_check`` records.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from types import MappingProxyType
from typing import Any

from lookup_knowledge.application.access_check import CitationAccess
from lookup_knowledge.application.ids import uuid7
from lookup_knowledge.application.ports import (
    MAX_OTHER_SESSIONS,
    AnswerCheck,
    AnswerCheckStore,
    AnswerFormat,
    CheckedClaim,
    ClaimJudge,
    Clock,
    CurrentChunkText,
    Embedder,
    JudgeMode,
    SessionEvidenceReader,
    ShownBlock,
    ToolInvocationRecorder,
    WordStemmer,
    check_session_id,
    require_text,
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
    Verdict,
    assess_claim,
    bare_text,
    claims_from_claude,
    shown_text_from,
    split_claims,
    worst_verdict,
)
from lookup_knowledge.domain.errors import (
    ConfigurationError,
    InvalidInputError,
    LookupKnowledgeError,
)

MAX_ANSWER_CHARS = 200_000
MAX_CLAIMS = 500
CHANGED_SINCE_SHOWN = "evidence changed since shown"


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
                # the span of the cited text every check ran against, and the judge's
                # opinion of the claim against it (None: no judge configured)
                "span": c.signals.get("span"),
                "judge": c.signals.get("judge"),
            }
            for c in check.claims
        ],
    }


# --------------------------------------------------------------------------- use case


@dataclass(frozen=True, slots=True)
class AnswerCheckSettings:
    thresholds: CheckThresholds = field(default_factory=CheckThresholds)
    citation_pattern: str = DEFAULT_CITATION_PATTERN
    judge_mode: JudgeMode = JudgeMode.SIGNAL

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
    return require_text("answer", answer)


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


@dataclass(frozen=True, slots=True)
class OwnedView:
    """What an agent caller (not the auditor, not a trusted host) may learn: the session
    checked is read only if it is its own (``owns_session``; otherwise the check runs as
    on an empty session and is not recorded), another session is named only if ``owns``
    it, and an id it may not see is ``unknown`` (never ``forbidden``)."""

    owns_session: bool
    owns: Callable[[str], bool]


class CheckAnswer:
    """Checks an answer's claims against the evidence its session was shown, records the
    verdicts (``persist``) and returns them. Flushes the session's journaled audit records
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
        access: CitationAccess | None = None,
    ) -> None:
        self._access = access
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
        view: OwnedView | None = None,
        linked_sessions: Sequence[str] = (),
    ) -> AnswerCheck:
        """``linked_sessions``: other sessions of the same caller whose evidence counts as
        shown to this one (a stateless client, whose every call is its own session; see
        ``sessions_cited``). The check is recorded in ``session_id``."""
        check_session_id(session_id)
        if step_id is not None and (not isinstance(step_id, str) or not 0 < len(step_id) <= 255):
            raise InvalidInputError("step_id must be a string of 1..255 characters")
        fmt, text, claims = self._claims(answer, answer_format)

        own = view is None or view.owns_session
        pending = 0
        if own:
            for session in dict.fromkeys((session_id, *linked_sessions)):
                self._recorder.flush(session, self._flush_timeout_s)
                pending += self._recorder.pending_count(session)
        now = self._clock.now()
        cited = tuple(dict.fromkeys(d for c in claims for d in c.cited_ids))
        statuses, texts = self._gather(session_id, cited, now, view, linked_sessions)
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
        checked = tuple(self._recorded(v) for v in verdicts)
        check = AnswerCheck(
            id=str(uuid7(now)),
            session_id=session_id,
            step_id=step_id,
            answer_format=fmt,
            answer_text=text,
            answer_hash=hashlib.sha256(text.encode("utf-8")).hexdigest(),
            verdict=worst_verdict([c.verdict for c in checked]),
            claims=checked,
            checker_version=CHECKER_VERSION,
            created_at=now,
            pending_in_spool=pending,
        )
        if persist and own:
            self._store.save(check)
        return check

    def sessions_cited(
        self,
        answer: object,
        session_prefix: str,
        owns: Callable[[str], bool],
        *,
        answer_format: AnswerFormat | str = AnswerFormat.TEXT,
    ) -> tuple[str, ...]:
        """The sessions an answer's citations come from: those whose id starts with
        ``session_prefix``, that ``owns`` accepts (the caller's own: never another
        principal's) and that were shown an id the answer cites. The session shown most
        of the cited ids comes first, then the newest (the greatest id); each cited id
        counts for its newest such session only. Empty when no cited id was shown in one.

        For a client that keeps no session (MCP's stateless HTTP): every call is its own
        audit session, and the ids an answer cites are what ties it to the lookups it was
        built on."""
        _, _, claims = self._claims(answer, answer_format)
        cited = tuple(dict.fromkeys(d for c in claims for d in c.cited_ids))
        if not cited:
            return ()
        found = self._evidence.newest_sessions_returning(cited, session_prefix)
        verdict: dict[str, bool] = {}
        counts: dict[str, int] = {}
        for document_id in cited:
            for session in found.get(document_id, ()):
                if session not in verdict:
                    verdict[session] = owns(session)
                if verdict[session]:
                    counts[session] = counts.get(session, 0) + 1
                    break
        # Most cited ids first, then the newest id (sorted descending on both keys).
        return tuple(sorted(counts, key=lambda s: (counts[s], s), reverse=True))

    def _claims(
        self, answer: object, answer_format: AnswerFormat | str
    ) -> tuple[AnswerFormat, str, tuple[Claim, ...]]:
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
        return fmt, text, claims

    # ------------------------------------------------------------------ inputs

    def _gather(
        self,
        session_id: str,
        cited: Sequence[str],
        now: datetime,
        view: OwnedView | None = None,
        linked_sessions: Sequence[str] = (),
    ) -> tuple[dict[str, CitationVerdict], dict[str, list[EvidenceText]]]:
        if not cited:
            return {}, {}
        own = view is None or view.owns_session
        shown = self._evidence.shown_blocks(session_id, cited, now) if own else {}
        for linked in linked_sessions if own else ():
            rest = [d for d in cited if d not in shown]
            if not rest:
                break
            if linked != session_id:
                shown.update(self._evidence.shown_blocks(linked, rest, now))
        missing = [d for d in cited if d not in shown]
        elsewhere = self._elsewhere(session_id, missing, view)
        # A cited id the session's principal could not see is forbidden, even where
        # another session (another tenant's, say) was shown it. An agent caller is not
        # told (``view``): to it such an id is unknown, like a made-up one.
        forbidden = (
            set(self._access.forbidden(session_id, missing))
            if self._access and view is None
            else set()
        )
        statuses: dict[str, CitationVerdict] = {}
        for d in cited:
            if d in shown:
                statuses[d] = CitationVerdict(d, CitationStatus.VALID)
            elif d in forbidden:
                statuses[d] = CitationVerdict(d, CitationStatus.FORBIDDEN)
            elif elsewhere.get(d):
                statuses[d] = CitationVerdict(d, CitationStatus.NOT_IN_SESSION, elsewhere[d])
            else:
                statuses[d] = CitationVerdict(d, CitationStatus.UNKNOWN)
        current = self._current_texts(shown)
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
                    stored = [
                        current[t][d] for t in block.reread_tenants() if d in current.get(t, {})
                    ]
                    for candidate in stored:
                        text = shown_text_from(candidate, block.content_hash)
                        if text is not None:
                            break
                    if not stored:
                        problem = "shown text not kept and the block is no longer in the store"
                    elif text is None:
                        problem = CHANGED_SINCE_SHOWN
                prepared = None if text is None else PreparedEvidence.of(d, text, stem)
                texts.setdefault(d, []).append(EvidenceText(d, prepared, problem))
        return statuses, texts

    def _elsewhere(
        self, session_id: str, missing: Sequence[str], view: OwnedView | None
    ) -> dict[str, tuple[str, ...]]:
        """The other sessions that were shown each missing id (the caller's own only,
        under ``view``)."""
        if not missing:
            return {}
        if view is None:
            return self._evidence.sessions_returning(missing, session_id, MAX_OTHER_SESSIONS)
        # Read more than are named: the caller's own may come after others'.
        found = self._evidence.sessions_returning(missing, session_id, MAX_OTHER_SESSIONS * 20)
        verdict: dict[str, bool] = {}
        out: dict[str, tuple[str, ...]] = {}
        for document_id, sessions in found.items():
            mine = []
            for other in sessions:
                if other not in verdict:
                    verdict[other] = view.owns(other)
                if verdict[other]:
                    mine.append(other)
            if mine:
                out[document_id] = tuple(mine[:MAX_OTHER_SESSIONS])
        return out

    def _current_texts(
        self, shown: Mapping[str, Sequence[ShownBlock]]
    ) -> dict[str | None, dict[str, str]]:
        """The stored text of the blocks whose shown text was not kept, by tenant (None:
        rows without one) and document_id. A block is read from the row it was recorded
        to come from (``row_tenant``: another tenant's public row, or any row with access
        off, included); a record without it from the invocation's principal tenant's rows
        and the untenanted ones: the text whose hash is the shown one is used."""
        wanted: dict[str | None, set[str]] = {}
        for blocks in shown.values():
            for block in blocks:
                if block.shown_text is None:
                    for tenant in block.reread_tenants():
                        wanted.setdefault(tenant, set()).add(block.document_id)
        if not wanted or self._chunk_text is None:
            return {}
        current: dict[str | None, dict[str, str]] = {}
        for tenant in sorted(wanted, key=lambda t: (t is not None, t or "")):
            try:
                current[tenant] = self._chunk_text.fetch_content(sorted(wanted[tenant]), tenant)
            except LookupKnowledgeError:
                current[tenant] = {}
        return current

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

    def _recorded(self, verdict: ClaimVerdict) -> CheckedClaim:
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
        if verdict.span is not None:
            signals["span"] = {
                "document_id": verdict.span.document_id,
                "start": verdict.span.start,
                "end": verdict.span.end,
            }
        outcome, reasons = verdict.verdict, verdict.reasons
        judged = (Verdict.SUPPORTED, Verdict.UNSUPPORTED, Verdict.CONTRADICTED)
        if self._judge is not None and outcome in judged and verdict.span_text:
            said = " ".join(bare_text(claim).split()).rstrip(" .") + "."
            opinion = self._ask_judge(said, verdict.span_text)
            signals["judge"] = opinion
            if self._settings.judge_mode is JudgeMode.VETO and outcome is Verdict.SUPPORTED:
                label = opinion.get("label")
                if label in ("contradicted", "neutral"):
                    outcome = (
                        Verdict.CONTRADICTED if label == "contradicted" else Verdict.UNSUPPORTED
                    )
                    why = opinion.get("reason") or label
                    reasons = (f"judge {opinion.get('model') or ''}: {why}".replace("  ", " "),)
        return CheckedClaim(
            index=claim.index,
            text=claim.text,
            start=claim.start,
            end=claim.end,
            citations=verdict.citations,
            verdict=outcome,
            reasons=reasons,
            support=verdict.support if outcome is Verdict.SUPPORTED else None,
            signals=MappingProxyType(signals),
        )

    def _ask_judge(self, claim: str, span: str) -> dict[str, object]:
        assert self._judge is not None
        try:
            opinion = self._judge.judge(claim, [span])
        except LookupKnowledgeError as error:
            return {"error": f"{error.code}: {error.message}"}
        out: dict[str, object] = {
            "label": opinion.label,
            "score": opinion.score,
            "model": opinion.model,
        }
        if opinion.reason:
            out["reason"] = opinion.reason
        return out
