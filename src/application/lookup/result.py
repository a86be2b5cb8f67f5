"""``LookupResult``: the result contract before JSON, and its agent-facing JSON in the two
payload profiles (``PayloadProfile``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lookup_knowledge.application.lookup.config import PayloadProfile
from lookup_knowledge.application.lookup.traces import RerankTrace, RetrievalTrace
from lookup_knowledge.application.ports import RecordOutcome
from lookup_knowledge.domain.model import InvocationStatus
from lookup_knowledge.domain.packing import ELLIPSIS, ContextPack
from lookup_knowledge.domain.projection import ProjectedBlock, agent_blocks
from lookup_knowledge.domain.quality import CompletenessHint, RelevanceLevel


@dataclass(frozen=True, slots=True)
class LookupResult:
    """The result contract (``docs/architecture.md``), before JSON projection."""

    invocation_id: str
    status: InvocationStatus
    found: bool
    evidence_blocks: tuple[ProjectedBlock, ...]
    context_pack: ContextPack | None
    retrieval_trace: RetrievalTrace
    rerank_trace: tuple[RerankTrace, ...]
    relevance_level: RelevanceLevel
    completeness_hint: CompletenessHint
    retrieved_domains_this_session: tuple[str, ...]
    message: str
    quality_score: float
    error_code: str | None = None
    #: What went wrong, for a person (``message`` is written for the agent).
    error_message: str | None = None
    record_outcome: RecordOutcome | None = None
    payload_profile: PayloadProfile = PayloadProfile.AGENT

    def to_tool_json(self, profile: PayloadProfile | None = None) -> dict[str, Any]:
        """The agent-facing JSON of ``lookup_knowledge`` in ``profile`` (default: the
        configured ``rag.payload.profile``)."""
        if (profile or self.payload_profile) is PayloadProfile.FULL:
            return self._full_json()
        return self._agent_json()

    def _agent_json(self) -> dict[str, Any]:
        blocks = {b.document_id: b for b in self.evidence_blocks}
        trace = self.retrieval_trace
        return {
            "found": self.found,
            "evidenceBlocks": agent_blocks(self.evidence_blocks, trace.mode),
            "contextPack": _agent_pack(self.context_pack, blocks),
            "retrievalTrace": _agent_trace(trace),
            "rerankTrace": _agent_rerank(self.rerank_trace, blocks),
            "relevanceLevel": self.relevance_level.value,
            "completenessHint": self.completeness_hint.value,
            "retrievedDomainsThisSession": list(self.retrieved_domains_this_session),
            "message": self.message,
            "invocationId": self.invocation_id,
        }

    def _full_json(self) -> dict[str, Any]:
        pack = self.context_pack
        return {
            "found": self.found,
            "evidenceBlocks": [b.as_json() for b in self.evidence_blocks],
            "contextPack": (
                {"text": pack.text, **pack.summary()}
                if pack is not None
                else {"text": "", "charBudget": 0, "charsUsed": 0, "included": [], "omitted": []}
            ),
            "retrievalTrace": self.retrieval_trace.to_wire(),
            "rerankTrace": [r.to_wire() for r in self.rerank_trace],
            "relevanceLevel": self.relevance_level.value,
            "completenessHint": self.completeness_hint.value,
            "retrievedDomainsThisSession": list(self.retrieved_domains_this_session),
            "message": self.message,
            "invocationId": self.invocation_id,
        }


#: The counts the agent profile keeps: how much was found and how much is shown.
_COUNTS = ("candidates", "afterCap", "returned", "projected")


def _agent_trace(trace: RetrievalTrace) -> dict[str, Any]:
    """The retrieval trace the agent needs: the mode searched, the filter, the fallback
    reason and the reason for another mode than configured when there was one (absent,
    not ``null``, otherwise), and the counts: candidates and after the per-document cap;
    ``returned`` and ``projected`` only when projection showed fewer blocks than were
    returned (otherwise both are the length of ``evidenceBlocks``)."""
    out: dict[str, Any] = {"mode": trace.mode}
    for key, value in (
        ("filterApplied", trace.filter_applied),
        ("fallbackReason", trace.fallback_reason),
        ("modeReason", trace.mode_reason),
    ):
        if value is not None:
            out[key] = value
    counts = {k: v for k, v in trace.counts.items() if k in _COUNTS}
    if counts.get("projected", counts.get("returned")) == counts.get("returned"):
        counts.pop("projected", None)  # every returned block is shown: the list says it
        counts.pop("returned", None)
    out["counts"] = counts
    return out


def _agent_rerank(
    trace: tuple[RerankTrace, ...], blocks: Mapping[str, ProjectedBlock]
) -> list[dict[str, Any]]:
    """The rerank bonuses of the returned blocks, one entry per rule and contribution
    with the ``ranks`` (positions in ``evidenceBlocks``) it raised; blocks ranked by
    relevance alone appear in none."""
    grouped: dict[tuple[str, float], list[int]] = {}
    for entry in trace:
        block = blocks.get(entry.document_id)
        if block is None:
            continue
        for a in entry.adjustments:
            if a["rule"] != "relevance" and a["contribution"]:
                grouped.setdefault((a["rule"], round(a["contribution"], 3)), []).append(block.rank)
    return [
        {"rule": rule, "bonus": bonus, "ranks": sorted(ranks)}
        for (rule, bonus), ranks in grouped.items()
    ]


def _agent_pack(pack: ContextPack | None, blocks: Mapping[str, ProjectedBlock]) -> dict[str, Any]:
    """The context pack by reference: the packer packs the blocks' own excerpts, so the
    text is in the blocks once and the pack says, by rank, only the blocks it holds in
    part (``partial``: characters held; 0 = left out, with the reason under
    ``omitted``). ``{}``: every block is in the pack whole. Its character budget and use
    are in the ``full`` profile and the audit record."""
    if pack is None:
        return {}
    held = {
        b.evidence_key: len(b.excerpt.removesuffix(ELLIPSIS))
        for b in pack.included
        if b.evidence_key in blocks
    }
    out: dict[str, Any] = {}
    partial = {
        str(block.rank): held.get(key, 0)
        for key, block in blocks.items()
        if held.get(key, 0) != len(block.content.removesuffix(ELLIPSIS))
    }
    if partial:
        out["partial"] = partial
    omitted = {
        str(blocks[o.evidence_key].rank): o.reason.value
        for o in pack.omitted
        if o.evidence_key in blocks
    }
    if omitted:
        out["omitted"] = omitted
    return out
