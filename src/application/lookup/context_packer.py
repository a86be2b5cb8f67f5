"""The ContextPacker: the projected evidence as one char-budgeted context text.

It packs only blocks the Projector gave the agent, so the pack never names an evidence
id the agent cannot find among its blocks.

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
        shown = {b.document_id for b in projected}
        blocks = [r for r in final if r.evidence_key in shown]
        return pack_context(blocks, self._budget, self._min_excerpt)
