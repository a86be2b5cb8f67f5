"""The Eval harness's values: datasets, configurations, progress events and reports."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from types import MappingProxyType

from lookup_knowledge.application.ingest import IngestReport
from lookup_knowledge.application.lookup import LookupConfig
from lookup_knowledge.application.ports import (
    DocumentSource,
    Qrels,
)
from lookup_knowledge.application.tool import MAX_ID_CHARS
from lookup_knowledge.domain.errors import (
    InvalidInputError,
    NotFoundError,
)

#: The measures an eval reports, in ir-measures notation (RR@10 is MRR@10 once averaged).

MEASURES: tuple[str, ...] = ("nDCG@10", "R@5", "R@10", "R@20", "RR@10")
#: Step id prefix of an unanswerable query's lookup (its ids may repeat the answerable ones').
UNANSWERABLE_STEP = "unanswerable:"

NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+=-]{0,99}$")
_EMPTY: Mapping[str, object] = MappingProxyType({})


# --------------------------------------------------------------------------- inputs


@dataclass(frozen=True, slots=True)
class EvalQuery:
    query_id: str
    text: str


@dataclass(frozen=True, slots=True)
class EvalDataset:
    """A test collection: the corpus to ingest, the queries to run and their qrels."""

    name: str
    corpus: DocumentSource
    queries: tuple[EvalQuery, ...]
    qrels: Qrels
    #: Questions the corpus cannot answer (another collection's, off-topic ones): each
    #: should come back ``no_evidence``. No qrels; ids distinct from ``queries``.
    unanswerable: tuple[EvalQuery, ...] = ()

    def __post_init__(self) -> None:
        if not self.name.strip():
            raise InvalidInputError("a dataset needs a name")
        if not self.queries:
            raise InvalidInputError(f"dataset {self.name!r} has no queries to run")
        seen: set[str] = set()
        longest = MAX_ID_CHARS - len(UNANSWERABLE_STEP)
        for query in self.unanswerable:
            if not query.query_id or len(query.query_id) > longest:
                raise InvalidInputError(
                    f"unanswerable query id {query.query_id!r} must have 1..{longest} characters"
                )
            if query.query_id in seen:
                raise InvalidInputError(f"unanswerable query id {query.query_id!r} appears twice")
            seen.add(query.query_id)
        for query in self.queries:
            if not query.query_id or len(query.query_id) > MAX_ID_CHARS:
                raise InvalidInputError(
                    f"query id {query.query_id!r} must have 1..{MAX_ID_CHARS} characters"
                )
            if query.query_id in seen:
                raise InvalidInputError(f"query id {query.query_id!r} appears twice")
            seen.add(query.query_id)
            if not any(grade > 0 for grade in self.qrels.get(query.query_id, {}).values()):
                raise InvalidInputError(
                    f"query {query.query_id!r} has no relevant document in the qrels; "
                    "an eval runs only judged queries"
                )


@dataclass(frozen=True, slots=True)
class EvalConfiguration:
    """One named configuration to compare. ``changes`` records what it changes relative
    to the base configuration, as the caller names it (e.g. settings keys)."""

    name: str
    config: LookupConfig
    changes: Mapping[str, object] = field(default_factory=lambda: _EMPTY)

    def __post_init__(self) -> None:
        if not NAME_PATTERN.match(self.name):
            raise InvalidInputError(
                f"configuration name {self.name!r} must be 1..100 letters, digits or "
                "_ . + = - (starting with a letter or digit)"
            )


def describe_config(config: LookupConfig) -> dict[str, object]:
    """The settings of a lookup configuration that shape which evidence comes back."""
    retrieval = config.retrieval
    return {
        "mode": config.mode.value,
        "retrieveK": retrieval.retrieve_k,
        "returnN": retrieval.return_n,
        "maxChunksPerDocument": retrieval.max_chunks_per_document,
        "minRelevance": retrieval.min_relevance_for(config.mode),
        "engineGrouping": config.engine_grouping,
        "rerank": config.rerank.enabled,
        "lateMaterialisation": config.late_materialisation,
        "maxBlocks": config.projection.max_blocks,
    }


# --------------------------------------------------------------------------- results

#: Upper edges of the calibration table's relevance bins (the last one holds 1.0).
CALIBRATION_EDGES: tuple[float, ...] = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)


@dataclass(frozen=True, slots=True)
class CalibrationBin:
    """Returned blocks whose relevance fell in ``[low, high)``, and how many of them are
    judged relevant (a block of an unanswerable query never is)."""

    low: float
    high: float
    blocks: int
    relevant: int

    @property
    def relevant_share(self) -> float | None:
        return self.relevant / self.blocks if self.blocks else None

    def as_dict(self) -> dict[str, object]:
        return {
            "bin": f"{self.low:.1f}-{self.high:.1f}",
            "blocks": self.blocks,
            "relevant": self.relevant,
            "relevantShare": _rounded(self.relevant_share, 4),
        }


def calibration_table(blocks: Sequence[tuple[float, bool]]) -> tuple[CalibrationBin, ...]:
    """``(relevance, judged relevant)`` of every returned block, binned by relevance."""
    counts = [[0, 0] for _ in CALIBRATION_EDGES]
    for relevance, relevant in blocks:
        index = next(
            (i for i, edge in enumerate(CALIBRATION_EDGES) if relevance < edge),
            len(CALIBRATION_EDGES) - 1,
        )
        counts[index][0] += 1
        counts[index][1] += int(relevant)
    lows = (0.0, *CALIBRATION_EDGES[:-1])
    return tuple(
        CalibrationBin(low, high, n, r)
        for low, high, (n, r) in zip(lows, CALIBRATION_EDGES, counts, strict=True)
    )


@dataclass(frozen=True, slots=True)
class EvalProgress:
    """One progress event. ``phase``: ingest, lookup, score or done."""

    phase: str
    configuration: str
    done: int
    total: int | None


EvalProgressCallback = Callable[[EvalProgress], None]


@dataclass(frozen=True, slots=True)
class QueryResult:
    """One query under one configuration, as recorded."""

    query_id: str
    invocation_id: str
    status: str
    duration_ms: float
    documents: tuple[str, ...]  # document-level ranking: best chunk rank first
    blocks: int  # evidence rows (chunks) recorded for the invocation
    metrics: Mapping[str, float]

    def as_dict(self) -> dict[str, object]:
        return {
            "queryId": self.query_id,
            "invocationId": self.invocation_id,
            "status": self.status,
            "durationMs": round(self.duration_ms, 3),
            "documents": list(self.documents),
            "blocks": self.blocks,
            "metrics": {k: round(v, 6) for k, v in self.metrics.items()},
        }


@dataclass(frozen=True, slots=True)
class ConfigurationResult:
    """The figures of one configuration. Metric values are means over all its queries;
    ``distinct_documents`` and ``blocks`` are means over the results with evidence."""

    name: str
    session_id: str
    changes: Mapping[str, object]
    settings: Mapping[str, object]
    queries: int
    metrics: Mapping[str, float]
    distinct_documents: float | None
    blocks: float | None
    no_evidence_rate: float
    error_rate: float
    latency_p50_ms: float | None
    latency_p95_ms: float | None
    first_error: str | None
    per_query: tuple[QueryResult, ...]
    #: Share of the (answerable) queries that came back with evidence.
    found_rate: float = 0.0
    #: Share of the unanswerable queries that came back ``no_evidence`` (None: none run).
    abstention_rate: float | None = None
    unanswerable_queries: int = 0
    calibration: tuple[CalibrationBin, ...] = ()
    #: Per unanswerable query: its id and status.
    unanswerable: tuple[tuple[str, str], ...] = ()

    def as_dict(self, *, per_query: bool = True) -> dict[str, object]:
        data: dict[str, object] = {
            "name": self.name,
            "sessionId": self.session_id,
            "changes": dict(self.changes),
            "settings": dict(self.settings),
            "queries": self.queries,
            "metrics": {k: round(v, 6) for k, v in self.metrics.items()},
            "distinctDocumentsPerResult": _rounded(self.distinct_documents),
            "blocksPerResult": _rounded(self.blocks),
            "noEvidenceRate": round(self.no_evidence_rate, 6),
            "errorRate": round(self.error_rate, 6),
            "latencyP50Ms": _rounded(self.latency_p50_ms),
            "latencyP95Ms": _rounded(self.latency_p95_ms),
            "firstError": self.first_error,
            "foundRate": round(self.found_rate, 6),
            "abstentionRate": _rounded(self.abstention_rate),
            "unanswerableQueries": self.unanswerable_queries,
            "calibration": [b.as_dict() for b in self.calibration],
        }
        if per_query:
            data["perQuery"] = [q.as_dict() for q in self.per_query]
            data["unanswerable"] = [
                {"queryId": qid, "status": status} for qid, status in self.unanswerable
            ]
        return data


@dataclass(frozen=True, slots=True)
class EvalReport:
    run_id: str
    dataset: str
    started_at: datetime
    finished_at: datetime
    measures: tuple[str, ...]
    ingest: IngestReport | None
    configurations: tuple[ConfigurationResult, ...]

    def configuration(self, name: str) -> ConfigurationResult:
        for result in self.configurations:
            if result.name == name:
                return result
        raise NotFoundError(f"no configuration {name!r} in eval run {self.run_id}")

    def as_dict(self, *, per_query: bool = True) -> dict[str, object]:
        return {
            "runId": self.run_id,
            "dataset": self.dataset,
            "startedAt": self.started_at.isoformat(),
            "finishedAt": self.finished_at.isoformat(),
            "measures": list(self.measures),
            "ingest": self.ingest.as_dict() if self.ingest is not None else None,
            "configurations": [c.as_dict(per_query=per_query) for c in self.configurations],
        }


def _rounded(value: float | None, digits: int = 6) -> float | None:
    return None if value is None else round(value, digits)


def mean_or_none(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None
