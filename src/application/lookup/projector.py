"""The Projector: the evidence blocks the agent receives.

``document_id`` is the evidence key (chunk-scoped), never repeated; ``source`` may
repeat. Projection budgets (most blocks, most characters per excerpt and in total)
bound what the agent receives; the policy itself is ``domain.projection``.
"""

from __future__ import annotations

from collections.abc import Sequence

from lookup_knowledge.application.lookup.config import LookupConfig
from lookup_knowledge.domain.model import RankedCandidate
from lookup_knowledge.domain.projection import ProjectedBlock, project_blocks


class Projector:
    def __init__(self, config: LookupConfig) -> None:
        self._budgets = config.projection

    def project(self, final: Sequence[RankedCandidate]) -> tuple[ProjectedBlock, ...]:
        return tuple(project_blocks(final, self._budgets))
