"""Agent projection: what the agent receives, bounded by budgets.

``document_id`` is the chunk-scoped evidenceKey (``docs/architecture.md``, Result contract), so a citation maps 1:1
to an excerpt the agent was shown. ``source`` may repeat; ``document_id`` never does.
Budgets: at most ``max_blocks`` blocks, each excerpt at most ``max_excerpt_chars``, all
excerpts together at most ``max_total_chars`` (the last block is shortened to fit when
at least ``min_excerpt_chars`` remain, otherwise projection stops).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from lookup_knowledge.domain.model import RankedCandidate

ELLIPSIS = "…"


@dataclass(frozen=True, slots=True)
class ProjectionBudgets:
    max_blocks: int = 5
    max_excerpt_chars: int = 1200
    max_total_chars: int = 6000
    min_excerpt_chars: int = 80

    def __post_init__(self) -> None:
        for name in ("max_blocks", "max_excerpt_chars", "max_total_chars", "min_excerpt_chars"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"projection budget {name} must be a whole number >= 1")


@dataclass(frozen=True, slots=True)
class ProjectedBlock:
    document_id: str
    source: str
    title: str
    breadcrumb: str
    content: str
    score: float
    relevance: float
    rank: int
    hit_reasons: tuple[str, ...]
    truncated: bool

    def as_json(self) -> dict[str, object]:
        return {
            "document_id": self.document_id,
            "source": self.source,
            "title": self.title,
            "breadcrumb": self.breadcrumb,
            "content": self.content,
            "score": round(self.score, 4),
            "relevance": round(self.relevance, 4),
            "rank": self.rank,
            "hitReasons": list(self.hit_reasons),
            "truncated": self.truncated,
        }

    def as_agent_json(self, mode: str = "") -> dict[str, object]:
        """The block as the ``agent`` payload profile shows it: what to read and cite, each
        fact once. ``rank`` is the block's position in ``evidenceBlocks`` (not repeated);
        ``source`` is left out when ``document_id`` already spells it (``<source-name>/
        <source>#chunk-N``); the ``breadcrumb`` leaves out the headings the content opens
        with (``agent_breadcrumb``), and ``title`` is left out when the breadcrumb starts
        with it (a breadcrumb that is the title alone is sent as ``title``); empty fields
        are left out, and
        ``hitReasons`` appear only when they say more than the search ``mode`` that found
        every block."""
        block: dict[str, object] = {"document_id": self.document_id}
        if self.source and self.source not in self.document_id:
            block["source"] = self.source
        breadcrumb = agent_breadcrumb(self.breadcrumb, self.content)
        if self.title and not breadcrumb.startswith(self.title):
            block["title"] = self.title
        if breadcrumb and breadcrumb != self.title:
            block["breadcrumb"] = breadcrumb
        elif breadcrumb:
            block["title"] = breadcrumb
        block.update(content=self.content, score=round(self.score, 3))
        reasons = [r for r in self.hit_reasons if r != mode]
        if reasons:
            block["hitReasons"] = reasons
        return block


BREADCRUMB_SEPARATOR = " > "
_HEADING = re.compile(r"#{1,6}[ \t]+(.*?)[ \t#]*")


def agent_breadcrumb(breadcrumb: str, content: str) -> str:
    """``breadcrumb`` without the trailing headings that ``content`` itself opens with:
    a chunk that starts with ``## Setup`` under ``Guide > Setup`` says "Setup" already, so
    its breadcrumb is ``Guide``. Only an exact match of the breadcrumb's last headings
    with the content's leading Markdown headings, in order, is removed; the first element
    (the document's title) always stays."""
    parts = breadcrumb.split(BREADCRUMB_SEPARATOR)
    opening: list[str] = []
    for line in content.lstrip().splitlines():
        if not line.strip():
            continue
        match = _HEADING.fullmatch(line.strip())
        if match is None:
            break
        opening.append(match.group(1).strip())
    for k in range(min(len(opening), len(parts) - 1), 0, -1):
        if parts[-k:] == opening[:k]:
            return BREADCRUMB_SEPARATOR.join(parts[:-k])
    return breadcrumb


def _cut(text: str, limit: int) -> tuple[str, bool]:
    if len(text) <= limit:
        return text, False
    return text[: max(limit - len(ELLIPSIS), 0)] + ELLIPSIS, True


def project_blocks(
    blocks: Sequence[RankedCandidate], budgets: ProjectionBudgets
) -> list[ProjectedBlock]:
    projected: list[ProjectedBlock] = []
    seen: set[str] = set()
    total = 0
    for item in blocks:
        if len(projected) >= budgets.max_blocks:
            break
        key = item.evidence_key
        if key in seen:
            continue
        c = item.candidate
        excerpt, truncated = _cut((c.content or "").strip(), budgets.max_excerpt_chars)
        remaining = budgets.max_total_chars - total
        if len(excerpt) > remaining:
            if remaining < min(budgets.min_excerpt_chars, budgets.max_excerpt_chars):
                break
            excerpt, _ = _cut(excerpt, remaining)
            truncated = True
        seen.add(key)
        total += len(excerpt)
        projected.append(
            ProjectedBlock(
                document_id=key,
                source=c.source,
                title=c.title,
                breadcrumb=c.breadcrumb,
                content=excerpt,
                score=item.final_score,
                relevance=c.relevance,
                rank=len(projected) + 1,
                hit_reasons=c.hit_reasons,
                truncated=truncated,
            )
        )
    return projected
