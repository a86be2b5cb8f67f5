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

from lookup_knowledge.domain.identity import split_chunk_key
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
        """The block alone as the ``agent`` payload profile shows it: what to read and
        cite, each fact once. ``rank`` is the block's position in ``evidenceBlocks`` (not
        repeated); ``source`` is left out when ``document_id`` already spells it
        (``<source-name>/<source>#chunk-N``) or when it is only a name in front of the
        document id (``scifact/4983`` for ``4983#chunk-0``: ``source_spelled``); the
        ``breadcrumb`` leaves out the headings the content opens with
        (``agent_breadcrumb``), and ``title`` is left out when the breadcrumb starts with
        it (a breadcrumb that is the title alone is sent as ``title``); empty fields are
        left out, ``score`` is the calibrated ``relevance`` (the order says the rank),
        and ``hitReasons`` appear only when they say more than the search
        ``mode`` that found every block. ``agent_blocks`` then says a document's
        provenance once for a run of its blocks."""
        block: dict[str, object] = {"document_id": self.document_id}
        if self.source and not source_spelled(self.source, self.document_id):
            block["source"] = self.source
        breadcrumb = agent_breadcrumb(self.breadcrumb, self.content)
        if self.title and not breadcrumb.startswith(self.title):
            block["title"] = self.title
        if breadcrumb and breadcrumb != self.title:
            block["breadcrumb"] = breadcrumb
        elif breadcrumb:
            block["title"] = breadcrumb
        # The agent's one number per block: its calibrated relevance (how likely it is
        # relevant), not the ranking score, which in hybrid mode says where it ranked.
        block.update(content=self.content, score=round(self.relevance, 3))
        reasons = [r for r in self.hit_reasons if r != mode]
        if reasons:
            block["hitReasons"] = reasons
        return block


#: The fields of an agent block that say where its excerpt comes from.
PROVENANCE = ("source", "title", "breadcrumb")


def document_of(document_id: str) -> str | None:
    """The document a chunk-scoped evidence key belongs to (``docId#chunk-N`` ->
    ``docId``); None for a ``vector:``/``rank:`` key, which names no document."""
    parts = split_chunk_key(document_id)
    return None if parts is None else parts[0]


def source_spelled(source: str, document_id: str) -> bool:
    """Whether ``document_id`` already says ``source``: it contains it (a file's id is
    ``<source-name>/<relative path>``), or ``source`` is only a bare name (no ``/`` or
    ``:``, so no path, host or scheme is lost) in front of the document id, as a BEIR
    corpus's ``<dataset>/<_id>``."""
    if source in document_id:
        return True
    doc = document_of(document_id)
    if doc is None or not source.endswith("/" + doc):
        return False
    name = source[: -len(doc) - 1]
    return bool(name) and "/" not in name and ":" not in name


def agent_blocks(blocks: Sequence[ProjectedBlock], mode: str = "") -> list[dict[str, object]]:
    """The blocks as the ``agent`` profile sends them (``as_agent_json``), with each
    document's provenance said once: a block whose ``source``, ``title`` and
    ``breadcrumb`` are all those of the nearest earlier block of the same document
    names none of them (it has that block's). A block with no provenance of its own
    after one of its document that has some says ``"title": ""``, so that reading rule
    never gives it another block's. ``expand_agent_blocks`` is the reading rule."""
    out: list[dict[str, object]] = []
    said: dict[str, dict[str, object]] = {}
    for projected in blocks:
        block = projected.as_agent_json(mode)
        label = {k: block[k] for k in PROVENANCE if k in block}
        doc = document_of(projected.document_id)
        if doc is not None:
            previous = said.get(doc)
            if previous is not None and previous == label:
                block = {k: v for k, v in block.items() if k not in PROVENANCE}
            elif previous and not label:
                block = {"document_id": block.pop("document_id"), "title": "", **block}
            said[doc] = label
        out.append(block)
    return out


def expand_agent_blocks(blocks: Sequence[dict[str, object]]) -> list[dict[str, object]]:
    """``agent_blocks`` read back: each block with the provenance it stands for (its own,
    or that of the nearest earlier block of its document when it names none; empty
    fields dropped), as ``as_agent_json`` gives it for the block alone."""
    out: list[dict[str, object]] = []
    said: dict[str, dict[str, object]] = {}
    for block in blocks:
        label = {k: block[k] for k in PROVENANCE if k in block}
        doc = document_of(str(block["document_id"]))
        if doc is not None:
            if not label:
                label = said.get(doc, {})
            said[doc] = label
        rest = {k: v for k, v in block.items() if k not in PROVENANCE and k != "document_id"}
        shown = {k: v for k, v in label.items() if v != ""}
        out.append({"document_id": block["document_id"], **shown, **rest})
    return out


BREADCRUMB_SEPARATOR = " > "
_HEADING = re.compile(r"#{1,6}[ \t]+(.*)")
#: A heading's optional closing run of ``#`` (CommonMark: after a space or tab, or the
#: whole text); a ``#`` glued to the text is the text's (``# C#`` is "C#").
_CLOSING = re.compile(r"(?:^|[ \t]+)#+[ \t]*$")


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
        opening.append(_CLOSING.sub("", match.group(1)).strip())
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
                relevance=c.evidence_strength,
                rank=len(projected) + 1,
                hit_reasons=c.hit_reasons,
                truncated=truncated,
            )
        )
    return projected
