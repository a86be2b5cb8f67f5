"""``LookupResult``: the result contract before JSON, and its agent-facing JSON."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lookup_knowledge.application.ports import RecordOutcome
from lookup_knowledge.domain.model import InvocationStatus
from lookup_knowledge.domain.packing import ContextPack
from lookup_knowledge.domain.projection import ProjectedBlock
from lookup_knowledge.domain.quality import CompletenessHint, RelevanceLevel


@dataclass(frozen=True, slots=True)
class LookupResult:
    """The result contract (``docs/architecture.md``), before JSON projection."""

    invocation_id: str
    status: InvocationStatus
    found: bool
    evidence_blocks: tuple[ProjectedBlock, ...]
    context_pack: ContextPack | None
    retrieval_trace: Mapping[str, Any]
    rerank_trace: tuple[Mapping[str, Any], ...]
    relevance_level: RelevanceLevel
    completeness_hint: CompletenessHint
    retrieved_domains_this_session: tuple[str, ...]
    message: str
    quality_score: float
    error_code: str | None = None
    record_outcome: RecordOutcome | None = None

    def to_tool_json(self) -> dict[str, Any]:
        """The agent-facing JSON of ``lookup_knowledge`` (the Projector's output)."""
        pack = self.context_pack
        return {
            "found": self.found,
            "evidenceBlocks": [b.as_json() for b in self.evidence_blocks],
            "contextPack": (
                {"text": pack.text, **pack.summary()}
                if pack is not None
                else {"text": "", "charBudget": 0, "charsUsed": 0, "included": [], "omitted": []}
            ),
            "retrievalTrace": dict(self.retrieval_trace),
            "rerankTrace": [dict(r) for r in self.rerank_trace],
            "relevanceLevel": self.relevance_level.value,
            "completenessHint": self.completeness_hint.value,
            "retrievedDomainsThisSession": list(self.retrieved_domains_this_session),
            "message": self.message,
            "invocationId": self.invocation_id,
        }
