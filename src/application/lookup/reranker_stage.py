"""The optional reranker stage: between the Retriever and the PostProcessor.

When a ``Reranker`` is configured, the texts of the top ``rag.rerank.top-k`` candidates
(in the engine's order; content fetched first for a search without it) are scored with
the query. Each score becomes evidence on the calibrated scale and is pooled with the
candidate's calibrated relevance (``domain.reranking``); the pooled value is both the
candidate's evidence strength (what ``min-relevance``, ``relevanceLevel`` and ``found``
read) and the base of the rule rerank, so the reranker reorders and can abstain.

An optional stage never fails a lookup: when the reranker fails or times out the
candidates go on unchanged and the report (retrieval trace, audit record) says why.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from lookup_knowledge.application.lookup.config import LookupConfig
from lookup_knowledge.application.lookup.retriever import Retrieval
from lookup_knowledge.application.ports import Clock, KnowledgeSearchPort, Reranker
from lookup_knowledge.domain.access import UNRESTRICTED, AccessScope
from lookup_knowledge.domain.errors import LookupKnowledgeError, RerankerError
from lookup_knowledge.domain.model import EvidenceCandidate, SearchMode
from lookup_knowledge.domain.reranking import pooled_relevance, reranker_evidence

logger = logging.getLogger(__name__)

_NO_SCORES: Mapping[str, float] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class RerankerReport:
    """What the stage did: ``applied``, or ``failed`` with the reason (the lookup was
    answered without the reranker). ``scores``: each judged candidate's reranker
    evidence in [0, 1], by evidence key."""

    provider: str
    status: str
    duration_ms: float = 0.0
    sent: int = 0
    not_judged: int = 0
    reason: str | None = None
    scores: Mapping[str, float] = field(default_factory=lambda: _NO_SCORES)

    def as_trace(self) -> dict[str, Any]:
        trace: dict[str, Any] = {
            "provider": self.provider,
            "status": self.status,
            "durationMs": round(self.duration_ms, 3),
            "sent": self.sent,
        }
        if self.not_judged:
            trace["notJudged"] = self.not_judged
        if self.reason is not None:
            trace["reason"] = self.reason
        return trace


class RerankerStage:
    def __init__(
        self,
        *,
        reranker: Reranker,
        search: KnowledgeSearchPort,
        clock: Clock,
        config: LookupConfig,
    ) -> None:
        self._reranker = reranker
        self._search = search
        self._clock = clock
        self._config = config

    def apply(
        self,
        query: str,
        retrieval: Retrieval,
        mode: SearchMode,
        access: AccessScope = UNRESTRICTED,
    ) -> tuple[Retrieval, RerankerReport]:
        """``mode``: the mode searched, whose found threshold the pooled relevance meets."""
        settings = self._config.reranker
        t = self._clock.monotonic()
        judged = list(retrieval.candidates[: settings.top_k])
        rest = len(retrieval.candidates) - len(judged)
        provider = self._reranker.provider
        try:
            judged = self._with_content(judged, access)
            sendable = [c for c in judged if c.content]
            raw = self._reranker.rerank(query, [c.content or "" for c in sendable])
            if len(raw) != len(sendable):
                raise RerankerError(
                    f"the reranker returned {len(raw)} scores for {len(sendable)} texts"
                )
        # An optional stage: whatever goes wrong in it (a RerankerError, a driver error
        # an adapter failed to translate, a content fetch that failed) leaves the lookup
        # to be answered as if no reranker were configured, with the reason traced.
        except Exception as failure:
            logger.warning(
                "reranker failed; answering without it",
                extra={"provider": provider, "error": f"{type(failure).__name__}: {failure}"},
                exc_info=not isinstance(failure, LookupKnowledgeError),
            )
            return retrieval, RerankerReport(
                provider=provider,
                status="failed",
                duration_ms=(self._clock.monotonic() - t) * 1000.0,
                sent=len(judged),
                reason=_reason(failure),
            )
        scores = {
            c.evidence_key: reranker_evidence(s, logits=settings.logits)
            for c, s in zip(sendable, raw, strict=True)
        }
        reranked = tuple(_pooled(c, scores, settings.weight) for c in sendable)
        min_relevance = self._config.retrieval.min_relevance_for(mode)
        best = max((c.evidence_strength for c in reranked), default=0.0)
        usable = reranked if best >= min_relevance else ()
        report = RerankerReport(
            provider=provider,
            status="applied",
            duration_ms=(self._clock.monotonic() - t) * 1000.0,
            sent=len(sendable),
            not_judged=rest + len(judged) - len(sendable),
            reason=None if usable else "nothing reaches min-relevance after the reranker",
            scores=MappingProxyType(scores),
        )
        return (
            replace(
                retrieval,
                candidates=usable,
                below_min_relevance=retrieval.below_min_relevance + len(reranked) - len(usable),
            ),
            report,
        )

    def _with_content(
        self, candidates: list[EvidenceCandidate], access: AccessScope
    ) -> list[EvidenceCandidate]:
        """The candidates with their text (a search without content fetches it now: the
        reranker reads it, and the returned blocks are not fetched twice)."""
        missing = [c.row_id or c.evidence_key for c in candidates if c.content is None]
        if not missing:
            return candidates
        fetched = self._search.fetch_content(missing, access)
        return [
            c.with_content(fetched[c.row_id or c.evidence_key])
            if c.content is None and (c.row_id or c.evidence_key) in fetched
            else c
            for c in candidates
        ]


def _pooled(
    candidate: EvidenceCandidate, scores: Mapping[str, float], weight: float
) -> EvidenceCandidate:
    pooled = pooled_relevance(candidate.evidence_strength, scores[candidate.evidence_key], weight)
    return replace(
        candidate,
        relevance=pooled,
        strength=pooled,
        hit_reasons=tuple(dict.fromkeys((*candidate.hit_reasons, "reranker"))),
    )


def _reason(failure: BaseException) -> str:
    if isinstance(failure, LookupKnowledgeError):
        return f"{failure.code}: {failure.message}"
    return f"{type(failure).__name__}: {failure}"
