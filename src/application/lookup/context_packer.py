"""The ContextPacker: the projected evidence as one char-budgeted context text.

It packs only blocks the Projector gave the agent, and their excerpts as projected, so
the pack never names an evidence id the agent cannot find among its blocks and never
shows text its blocks do not.

Order is rerank order; every block keeps its source/title/breadcrumb header visible (a
header is never cut); no source content appears twice; what did not fit is listed as
omitted with its reason. The packing policy itself is ``domain.packing``.
"""

from __future__ import annotations

from collections.abc import Sequence

from lookup_knowledge.application.lookup.config import LookupConfig
from lookup_knowledge.domain.model import RankedCandidate
from lookup_knowledge.domain.packing import ContextPack, pack_context
from lookup_knowledge.domain.projection import ProjectedBlock


class ContextPacker:
    def __init__(self, config: LookupConfig) -> None:
        self._budget = config.context_char_budget
        self._min_excerpt = config.context_min_excerpt_chars

    def pack(
        self, final: Sequence[RankedCandidate], projected: Sequence[ProjectedBlock]
    ) -> ContextPack:
        # The pack holds what the agent's blocks show (their projected excerpts), so a
        # packed excerpt is always a prefix of its block and can be sent by reference.
        shown = {b.document_id: b.content for b in projected}
        blocks = [
            r.with_candidate(r.candidate.with_content(shown[r.evidence_key]))
            for r in final
            if r.evidence_key in shown
        ]
        return pack_context(blocks, self._budget, self._min_excerpt)
