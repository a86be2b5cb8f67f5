"""Context packing under a character budget.

The pack is the text an agent can paste into its context: blocks in rerank order, each
with a header that always shows title, breadcrumb, source and document_id (the header
is never cut; if it does not fit with at least ``min_excerpt_chars`` of content, the
block is omitted). Content identical to an already packed block (after whitespace and
case folding) is omitted as a duplicate. ``len(pack.text) <= char_budget`` always holds.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from lookup_knowledge.domain.model import RankedCandidate

SEPARATOR = "\n\n"
ELLIPSIS = "…"


class OmissionReason(StrEnum):
    CHAR_BUDGET = "char_budget"
    DUPLICATE_CONTENT = "duplicate_content"
    NO_CONTENT = "no_content"


@dataclass(frozen=True, slots=True)
class PackedBlock:
    evidence_key: str
    rank: int
    header: str
    excerpt: str
    truncated: bool


@dataclass(frozen=True, slots=True)
class OmittedBlock:
    evidence_key: str
    rank: int
    reason: OmissionReason


@dataclass(frozen=True, slots=True)
class ContextPack:
    text: str
    included: tuple[PackedBlock, ...]
    omitted: tuple[OmittedBlock, ...]
    char_budget: int

    @property
    def chars_used(self) -> int:
        return len(self.text)

    @property
    def included_keys(self) -> tuple[str, ...]:
        return tuple(b.evidence_key for b in self.included)

    def summary(self) -> dict[str, object]:
        return {
            "charBudget": self.char_budget,
            "charsUsed": self.chars_used,
            "included": [
                {"document_id": b.evidence_key, "rank": b.rank, "truncated": b.truncated}
                for b in self.included
            ],
            "omitted": [
                {"document_id": o.evidence_key, "rank": o.rank, "reason": o.reason.value}
                for o in self.omitted
            ],
        }


def content_fingerprint(content: str) -> str:
    """Hash of the content with whitespace and case folded (for duplicate detection)."""
    folded = " ".join(content.split()).casefold()
    return hashlib.sha256(folded.encode("utf-8")).hexdigest()


def block_header(rank: int, item: RankedCandidate) -> str:
    c = item.candidate
    title = c.title or c.source or item.evidence_key
    line = f"[{rank}] {title}"
    if c.breadcrumb:
        line += f" › {c.breadcrumb}"
    return f"{line}\nsource: {c.source or '-'} | document_id: {item.evidence_key}\n"


def pack_context(
    blocks: Sequence[RankedCandidate], char_budget: int, min_excerpt_chars: int = 80
) -> ContextPack:
    if char_budget < 1:
        raise ValueError("char_budget must be >= 1")
    if min_excerpt_chars < 1:
        raise ValueError("min_excerpt_chars must be >= 1")
    pieces: list[str] = []
    used = 0
    included: list[PackedBlock] = []
    omitted: list[OmittedBlock] = []
    seen: set[str] = set()
    for rank, item in enumerate(blocks, start=1):
        content = item.candidate.content
        if content is None or not content.strip():
            omitted.append(OmittedBlock(item.evidence_key, rank, OmissionReason.NO_CONTENT))
            continue
        fingerprint = content_fingerprint(content)
        if fingerprint in seen:
            omitted.append(OmittedBlock(item.evidence_key, rank, OmissionReason.DUPLICATE_CONTENT))
            continue
        header = block_header(rank, item)
        separator = SEPARATOR if pieces else ""
        room = char_budget - used - len(separator) - len(header)
        body = content.strip()
        if room >= len(body):
            excerpt, truncated = body, False
        elif room >= min_excerpt_chars:
            excerpt, truncated = body[: room - len(ELLIPSIS)] + ELLIPSIS, True
        else:
            omitted.append(OmittedBlock(item.evidence_key, rank, OmissionReason.CHAR_BUDGET))
            continue
        piece = separator + header + excerpt
        pieces.append(piece)
        used += len(piece)
        seen.add(fingerprint)
        included.append(PackedBlock(item.evidence_key, rank, header, excerpt, truncated))
    return ContextPack("".join(pieces), tuple(included), tuple(omitted), char_budget)
