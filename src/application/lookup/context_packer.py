"""The ContextPacker: the returned evidence as one char-budgeted context text.

Order is rerank order; every block keeps its source/title/breadcrumb header visible (a
header is never cut); no source content appears twice; what did not fit is listed as
omitted with its reason. The packing policy itself is ``domain.packing``.
"""

from __future__ import annotations

from collections.abc import Sequence

from lookup_knowledge.application.lookup.config import LookupConfig
from lookup_knowledge.domain.model import RankedCandidate
from lookup_knowledge.domain.packing import ContextPack, pack_context


class ContextPacker:
    def __init__(self, config: LookupConfig) -> None:
        self._budget = config.context_char_budget
        self._min_excerpt = config.context_min_excerpt_chars

    def pack(self, final: Sequence[RankedCandidate]) -> ContextPack:
        return pack_context(final, self._budget, self._min_excerpt)
