"""The two traces of a lookup as typed values, with one serialiser each to the camelCase
wire form (the full tool JSON, the audit record) and one lenient parser back (a stored
trace, which an older version may have written without some keys).

``RetrievalTrace``: settings, hints, passes, filter, fallback, counts, timings.
``RerankTrace``: one ranked candidate: scores, rank before and after, the bonuses
applied, its outcome. Each is also a read-only ``Mapping`` of its wire form, so a
reader that knows the wire keys reads the value the same way as a stored trace.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

_EMPTY: Mapping[str, Any] = {}


class _WireMapping(Mapping[str, Any]):
    """A read-only mapping view of ``to_wire()``."""

    __slots__ = ()

    def to_wire(self) -> dict[str, Any]:
        raise NotImplementedError

    def __getitem__(self, key: str) -> Any:
        return self.to_wire()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.to_wire())

    def __len__(self) -> int:
        return len(self.to_wire())


@dataclass(frozen=True, slots=True, eq=False)
class RetrievalTrace(_WireMapping):
    """How the candidates were found (``retrievalTrace``)."""

    mode: str
    retrieve_k: int = 0
    return_n: int = 0
    #: None: no per-document cap.
    max_chunks_per_document: int | None = None
    min_relevance: float | None = None
    engine_grouping: bool = False
    late_materialisation: bool = False
    search_parameters: Mapping[str, Any] = field(default_factory=dict)
    query_hints: Mapping[str, Any] = field(default_factory=dict)
    passes: tuple[Mapping[str, Any], ...] = ()
    filter_applied: str | None = None
    #: ``{"mode", "filter", "droppedByCheck"}``: the access scope and its check.
    access: Mapping[str, Any] = field(default_factory=dict)
    fallback_reason: str | None = None
    mode_reason: str | None = None
    counts: Mapping[str, int] = field(default_factory=dict)
    timings_ms: Mapping[str, float] = field(default_factory=dict)
    #: What the optional reranker stage did (absent without one).
    reranker: Mapping[str, Any] | None = None
    #: The mode asked for, when another one was searched (absent otherwise).
    requested_mode: str | None = None
    vanished: tuple[str, ...] = ()
    #: Hits not served, each with its reason (absent when none).
    dropped: tuple[Mapping[str, Any], ...] = ()

    def to_wire(self) -> dict[str, Any]:
        wire: dict[str, Any] = {
            "mode": self.mode,
            "retrieveK": self.retrieve_k,
            "returnN": self.return_n,
            "maxChunksPerDocument": self.max_chunks_per_document,
            "minRelevance": self.min_relevance,
            "engineGrouping": self.engine_grouping,
            "lateMaterialisation": self.late_materialisation,
            "searchParameters": dict(self.search_parameters),
            "queryHints": dict(self.query_hints),
            "passes": [dict(p) for p in self.passes],
            "filterApplied": self.filter_applied,
            "access": dict(self.access),
            "fallbackReason": self.fallback_reason,
            "modeReason": self.mode_reason,
            "counts": dict(self.counts),
            "timingsMs": {k: round(v, 3) for k, v in self.timings_ms.items()},
        }
        if self.reranker is not None:
            wire["reranker"] = dict(self.reranker)
        if self.requested_mode is not None:
            wire["requestedMode"] = self.requested_mode
        if self.vanished:
            wire["vanished"] = list(self.vanished)
        if self.dropped:
            wire["dropped"] = [dict(d) for d in self.dropped]
        return wire

    @classmethod
    def from_wire(cls, data: object) -> RetrievalTrace:
        """A stored trace; what is missing or of another type reads as its default."""
        wire: Mapping[str, Any] = data if isinstance(data, Mapping) else _EMPTY
        reranker = wire.get("reranker")
        return cls(
            mode=_str(wire.get("mode")) or "",
            retrieve_k=_int(wire.get("retrieveK")),
            return_n=_int(wire.get("returnN")),
            max_chunks_per_document=_int(wire.get("maxChunksPerDocument")) or None,
            min_relevance=_number(wire.get("minRelevance")),
            engine_grouping=wire.get("engineGrouping") is True,
            late_materialisation=wire.get("lateMaterialisation") is True,
            search_parameters=_mapping(wire.get("searchParameters")),
            query_hints=_mapping(wire.get("queryHints")),
            passes=_mappings(wire.get("passes")),
            filter_applied=_str(wire.get("filterApplied")),
            access=_mapping(wire.get("access")),
            fallback_reason=_str(wire.get("fallbackReason")),
            mode_reason=_str(wire.get("modeReason")),
            counts=_mapping(wire.get("counts")),
            timings_ms=_mapping(wire.get("timingsMs")),
            reranker=reranker if isinstance(reranker, Mapping) else None,
            requested_mode=_str(wire.get("requestedMode")),
            vanished=tuple(v for v in _list(wire.get("vanished")) if isinstance(v, str)),
            dropped=_mappings(wire.get("dropped")),
        )


@dataclass(frozen=True, slots=True, eq=False)
class RerankTrace(_WireMapping):
    """One ranked candidate (an entry of ``rerankTrace``)."""

    document_id: str
    relevance: float
    strength: float
    final_score: float
    rank_before: int
    rank_after: int
    adjustments: tuple[Mapping[str, Any], ...] = ()
    outcome: str = "dropped"
    #: The reranker's evidence for it, when a reranker judged it.
    reranker_score: float | None = None

    def to_wire(self) -> dict[str, Any]:
        wire: dict[str, Any] = {"document_id": self.document_id}
        if self.reranker_score is not None:
            wire["rerankerScore"] = round(self.reranker_score, 6)
        wire.update(
            {
                "relevance": round(self.relevance, 6),
                "strength": round(self.strength, 6),
                "finalScore": round(self.final_score, 6),
                "rankBefore": self.rank_before,
                "rankAfter": self.rank_after,
                "adjustments": [dict(a) for a in self.adjustments],
                "outcome": self.outcome,
            }
        )
        return wire

    @classmethod
    def from_wire(cls, data: object) -> RerankTrace:
        """A stored entry; what is missing or of another type reads as its default."""
        wire: Mapping[str, Any] = data if isinstance(data, Mapping) else _EMPTY
        return cls(
            document_id=_str(wire.get("document_id")) or "",
            relevance=_number(wire.get("relevance")) or 0.0,
            strength=_number(wire.get("strength")) or 0.0,
            final_score=_number(wire.get("finalScore")) or 0.0,
            rank_before=_int(wire.get("rankBefore")),
            rank_after=_int(wire.get("rankAfter")),
            adjustments=_mappings(wire.get("adjustments")),
            outcome=_str(wire.get("outcome")) or "dropped",
            reranker_score=_number(wire.get("rerankerScore")),
        )


def _str(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _number(value: object) -> float | None:
    """A number as stored (an int stays an int: it is shown as written)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return value


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _mappings(value: object) -> tuple[Mapping[str, Any], ...]:
    return tuple(v for v in _list(value) if isinstance(v, Mapping))
