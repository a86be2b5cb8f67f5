"""Post-processing policies (``docs/architecture.md``, Evidence identity): sort, dedup by evidenceKey, cap, truncate.

Each function is pure and keeps the relative order of what it keeps, so the output of
the chain is always a subsequence of the score order.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from lookup_knowledge.domain.model import RankedCandidate


def sort_by_final_score(ranked: Sequence[RankedCandidate]) -> list[RankedCandidate]:
    """Highest final score first; ties keep the engine's original order."""
    return sorted(ranked, key=lambda r: (-r.final_score, r.candidate.original_rank))


def _merge_reasons(first: tuple[str, ...], second: tuple[str, ...]) -> tuple[str, ...]:
    return first + tuple(reason for reason in second if reason not in first)


@dataclass(frozen=True, slots=True)
class DedupOutcome:
    kept: list[RankedCandidate]
    merged: dict[str, int]  # evidence_key -> how many duplicates were folded into it


def dedup_by_evidence_key(ranked: Sequence[RankedCandidate]) -> DedupOutcome:
    """Keep the first (higher-ranked) block per evidenceKey; merge later hit reasons in.

    Different chunks of one document have different keys and are never merged.
    """
    index_of: dict[str, int] = {}
    kept: list[RankedCandidate] = []
    merged: dict[str, int] = {}
    for item in ranked:
        key = item.evidence_key
        if key not in index_of:
            index_of[key] = len(kept)
            kept.append(item)
            continue
        position = index_of[key]
        winner = kept[position]
        reasons = _merge_reasons(winner.candidate.hit_reasons, item.candidate.hit_reasons)
        kept[position] = winner.with_candidate(winner.candidate.with_hit_reasons(reasons))
        merged[key] = merged.get(key, 0) + 1
    return DedupOutcome(kept=kept, merged=merged)


@dataclass(frozen=True, slots=True)
class CapOutcome:
    kept: list[RankedCandidate]
    dropped: list[RankedCandidate]


def cap_per_document(ranked: Sequence[RankedCandidate], max_per_document: int | None) -> CapOutcome:
    """At most ``max_per_document`` blocks per docId, taken in the given (score) order.

    A candidate without a docId is its own bucket (keyed by its evidenceKey). ``None``
    disables the cap.
    """
    if max_per_document is None:
        return CapOutcome(kept=list(ranked), dropped=[])
    if max_per_document < 1:
        raise ValueError("max_per_document must be >= 1 or None")
    counts: dict[str, int] = {}
    kept: list[RankedCandidate] = []
    dropped: list[RankedCandidate] = []
    for item in ranked:
        bucket = item.doc_id if item.doc_id is not None else f"\x00{item.evidence_key}"
        seen = counts.get(bucket, 0)
        if seen >= max_per_document:
            dropped.append(item)
            continue
        counts[bucket] = seen + 1
        kept.append(item)
    return CapOutcome(kept=kept, dropped=dropped)


def drop_far_below_best(ranked: Sequence[RankedCandidate], share: float) -> CapOutcome:
    """Keep the candidates whose evidence strength is at least ``share`` of the best's
    (no padding with evidence far weaker than the best); order kept. ``share`` 0 keeps all."""
    if not 0.0 <= share <= 1.0:
        raise ValueError("share must be in [0, 1]")
    if not ranked or share == 0.0:
        return CapOutcome(kept=list(ranked), dropped=[])
    floor = share * max(r.candidate.evidence_strength for r in ranked)
    kept = [r for r in ranked if r.candidate.evidence_strength >= floor]
    dropped = [r for r in ranked if r.candidate.evidence_strength < floor]
    return CapOutcome(kept=kept, dropped=dropped)


def truncate(ranked: Sequence[RankedCandidate], return_n: int) -> list[RankedCandidate]:
    if return_n < 1:
        raise ValueError("return_n must be >= 1")
    return list(ranked[:return_n])


T = TypeVar("T")


def group_by_document(
    items: Sequence[T], doc_of: Callable[[T], object], top_k: int, per_document: int
) -> list[T]:
    """Engine-style grouping: at most ``per_document`` items for each of the first
    ``top_k`` documents, in the given order (the shape Milvus ``group_by_field`` returns).
    Adapters whose engine lacks grouping, or groups wrongly, apply this to an
    over-fetched ranking."""
    if top_k < 1 or per_document < 1:
        raise ValueError("top_k and per_document must be >= 1")
    kept: list[T] = []
    per_doc: dict[object, int] = {}
    for item in items:
        doc = doc_of(item)
        if doc not in per_doc and len(per_doc) >= top_k:
            continue
        if per_doc.get(doc, 0) >= per_document:
            continue
        per_doc[doc] = per_doc.get(doc, 0) + 1
        kept.append(item)
    return kept
