"""``Replay``: re-run logged queries under another configuration and compare the evidence."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from types import MappingProxyType

from lookup_knowledge.application.evaluation.recorded import (
    RecordedInvocation,
    check_recorded,
    list_all_invocations,
    read_session,
)
from lookup_knowledge.application.evaluation.run import new_run_id
from lookup_knowledge.application.evaluation.values import (
    EvalProgress,
    EvalProgressCallback,
    describe_config,
)
from lookup_knowledge.application.lookup import LookupConfig, LookupKnowledge, LookupOptions
from lookup_knowledge.application.ports import (
    AuditQueries,
    Clock,
    EvidenceView,
    InvocationFilter,
    InvocationSummary,
    TimeRange,
    ToolInvocationRecorder,
)
from lookup_knowledge.application.tool import TOOL_NAME
from lookup_knowledge.domain.access import Principal
from lookup_knowledge.domain.errors import (
    AuditError,
    InvalidInputError,
    NotFoundError,
)
from lookup_knowledge.domain.model import Traffic
from lookup_knowledge.domain.overlap import DEFAULT_PERSISTENCE, jaccard, rank_biased_overlap

#: The measures an eval reports, in ir-measures notation (RR@10 is MRR@10 once averaged).

# --------------------------------------------------------------------------- Replay


class OverlapMeasure(StrEnum):
    JACCARD = "jaccard"
    RBO = "rbo"


@dataclass(frozen=True, slots=True)
class ReplaySelection:
    """Which logged invocations to replay: one session, or a time range (at least one
    bound, so that a forgotten option never replays the whole store) of one kind of
    traffic (agents' calls unless told otherwise; a session is replayed whole)."""

    session_id: str | None = None
    time_range: TimeRange | None = None
    limit: int | None = None
    traffic: Traffic = Traffic.PRODUCTION

    def __post_init__(self) -> None:
        if not isinstance(self.traffic, Traffic):
            raise InvalidInputError(f"traffic must be a Traffic, not {self.traffic!r}")
        if (self.session_id is None) == (self.time_range is None):
            raise InvalidInputError("replay needs either a session id or a time range")
        if self.time_range is not None and (
            self.time_range.started_from is None and self.time_range.started_to is None
        ):
            raise InvalidInputError("a replay time range needs a start or an end")
        if self.limit is not None and (isinstance(self.limit, bool) or self.limit < 1):
            raise InvalidInputError("limit must be >= 1")

    def describe(self) -> dict[str, object]:
        if self.session_id is not None:
            return {"sessionId": self.session_id, "limit": self.limit}
        assert self.time_range is not None
        start, end = self.time_range.started_from, self.time_range.started_to
        return {
            "since": start.isoformat() if start else None,
            "until": end.isoformat() if end else None,
            "limit": self.limit,
            "traffic": self.traffic.value,
        }


@dataclass(frozen=True, slots=True)
class ReplayThreshold:
    """Pass when the mean overlap is at least ``min_overlap`` and (when set) no more
    than ``max_lost`` queries lost all their evidence."""

    min_overlap: float
    measure: OverlapMeasure = OverlapMeasure.JACCARD
    max_lost: int | None = None

    def __post_init__(self) -> None:
        value = self.min_overlap
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
            raise InvalidInputError("min_overlap must be a number in [0, 1]")
        if self.max_lost is not None and (isinstance(self.max_lost, bool) or self.max_lost < 0):
            raise InvalidInputError("max_lost must be >= 0")


@dataclass(frozen=True, slots=True)
class ReplayedQuery:
    original_invocation_id: str
    original_session_id: str
    step_id: str | None
    query: str
    replay_invocation_id: str
    status_before: str
    status_after: str
    before: tuple[str, ...]  # document_ids, best rank first
    after: tuple[str, ...]
    jaccard: float
    rbo: float

    @property
    def lost_all(self) -> bool:
        return bool(self.before) and not self.after

    @property
    def gained(self) -> bool:
        return not self.before and bool(self.after)

    @property
    def unchanged(self) -> bool:
        return self.before == self.after

    def as_dict(self) -> dict[str, object]:
        kept = set(self.after)
        had = set(self.before)
        return {
            "originalInvocationId": self.original_invocation_id,
            "originalSessionId": self.original_session_id,
            "stepId": self.step_id,
            "query": self.query,
            "replayInvocationId": self.replay_invocation_id,
            "statusBefore": self.status_before,
            "statusAfter": self.status_after,
            "jaccard": round(self.jaccard, 6),
            "rbo": round(self.rbo, 6),
            "lostAll": self.lost_all,
            "gained": self.gained,
            "unchanged": self.unchanged,
            "before": list(self.before),
            "after": list(self.after),
            "added": [d for d in self.after if d not in had],
            "removed": [d for d in self.before if d not in kept],
        }


@dataclass(frozen=True, slots=True)
class ReplayReport:
    replay_session_id: str
    selection: ReplaySelection
    settings: Mapping[str, object]
    queries: tuple[ReplayedQuery, ...]
    threshold: ReplayThreshold | None
    rbo_persistence: float = DEFAULT_PERSISTENCE
    #: Invocations replayed for their recorded tenant without the recorded groups (only
    #: their digest is kept, and no configured principal has them).
    groups_unknown: tuple[str, ...] = ()

    @property
    def mean_jaccard(self) -> float:
        return sum(q.jaccard for q in self.queries) / len(self.queries) if self.queries else 1.0

    @property
    def mean_rbo(self) -> float:
        return sum(q.rbo for q in self.queries) / len(self.queries) if self.queries else 1.0

    @property
    def lost_all(self) -> tuple[ReplayedQuery, ...]:
        return tuple(q for q in self.queries if q.lost_all)

    @property
    def gained(self) -> tuple[ReplayedQuery, ...]:
        return tuple(q for q in self.queries if q.gained)

    @property
    def unchanged(self) -> int:
        return sum(1 for q in self.queries if q.unchanged)

    def mean_overlap(self, measure: OverlapMeasure) -> float:
        return self.mean_jaccard if measure is OverlapMeasure.JACCARD else self.mean_rbo

    @property
    def failures(self) -> tuple[str, ...]:
        """Why the threshold check failed (empty when it passed or there is none)."""
        threshold = self.threshold
        if threshold is None:
            return ()
        reasons: list[str] = []
        mean = self.mean_overlap(threshold.measure)
        if mean < threshold.min_overlap:
            reasons.append(
                f"mean {threshold.measure.value} overlap {mean:.4f} is below "
                f"{threshold.min_overlap:.4f}"
            )
        lost = len(self.lost_all)
        if threshold.max_lost is not None and lost > threshold.max_lost:
            reasons.append(
                f"{lost} queries lost all their evidence (at most {threshold.max_lost} allowed)"
            )
        return tuple(reasons)

    @property
    def passed(self) -> bool:
        return not self.failures

    def as_dict(self, *, per_query: bool = True) -> dict[str, object]:
        threshold = self.threshold
        data: dict[str, object] = {
            "replaySessionId": self.replay_session_id,
            "selection": self.selection.describe(),
            "settings": dict(self.settings),
            "queries": len(self.queries),
            "meanJaccard": round(self.mean_jaccard, 6),
            "meanRbo": round(self.mean_rbo, 6),
            "rboPersistence": self.rbo_persistence,
            "unchanged": self.unchanged,
            "lostAll": len(self.lost_all),
            "gained": len(self.gained),
            "threshold": (
                None
                if threshold is None
                else {
                    "measure": threshold.measure.value,
                    "minOverlap": threshold.min_overlap,
                    "maxLost": threshold.max_lost,
                }
            ),
            "passed": self.passed,
            "failures": list(self.failures),
        }
        if self.groups_unknown:
            data["groupsUnknown"] = list(self.groups_unknown)
        if per_query:
            data["perQuery"] = [q.as_dict() for q in self.queries]
        return data


_REPLAY = LookupOptions(traffic=Traffic.REPLAY)


def recorded_principal(
    summary: InvocationSummary, known: Sequence[Principal]
) -> tuple[Principal | None, bool]:
    """The principal an invocation was recorded for, and whether its groups are known.

    The record keeps the tenant and user, and the groups only as a digest: the groups
    are those of a configured principal (``known``) of that tenant with that digest, or
    none when the digest is that of no groups; otherwise the tenant without groups
    (``False``: the replay may see less than the original did)."""
    tenant = summary.principal_tenant
    if tenant is None:
        return None, True
    user = summary.principal_user or ""
    wanted = summary.principal_groups_hash
    for candidate in known:
        if candidate.tenant == tenant and candidate.groups_hash() == wanted:
            return Principal(tenant, user, candidate.groups), True
    bare = Principal(tenant, user)
    return bare, wanted is None or bare.groups_hash() == wanted


class Replay:
    """Re-run logged queries under another configuration and compare the evidence."""

    def __init__(
        self,
        *,
        lookup: LookupKnowledge,
        audit: AuditQueries,
        recorder: ToolInvocationRecorder,
        clock: Clock,
        rbo_persistence: float = DEFAULT_PERSISTENCE,
        flush_timeout_s: float = 30.0,
        principals: Sequence[Principal] = (),
    ) -> None:
        if not 0.0 < rbo_persistence < 1.0:
            raise InvalidInputError("rbo_persistence must be in (0, 1)")
        self._lookup = lookup
        self._audit = audit
        self._recorder = recorder
        self._clock = clock
        self._p = rbo_persistence
        self._flush_timeout_s = flush_timeout_s
        self._principals = tuple(principals)

    def execute(
        self,
        selection: ReplaySelection,
        config: LookupConfig,
        *,
        threshold: ReplayThreshold | None = None,
        progress: EvalProgressCallback | None = None,
        session_id: str | None = None,
    ) -> ReplayReport:
        notify = progress or (lambda _event: None)
        originals = self._originals(selection)
        if not originals:
            raise NotFoundError(f"no logged lookups to replay for {selection.describe()}")
        session = session_id or f"replay-{new_run_id(self._clock.now())}"
        use_case = self._lookup.with_config(config)
        total = len(originals)
        notify(EvalProgress("replay", "", 0, total))
        groups_unknown: list[str] = []
        for done, original in enumerate(originals, 1):
            # Under the principal the original was made for: a replay of an enforced
            # session sees what that principal may see, not the public documents only.
            principal, groups_known = recorded_principal(original.summary, self._principals)
            if not groups_known:
                groups_unknown.append(original.summary.id)
            result = use_case.execute(
                original.summary.query,
                session_id=session,
                step_id=original.summary.id,
                options=replace(_REPLAY, principal=principal),
            )
            check_recorded(result.record_outcome)
            notify(EvalProgress("replay", "", done, total))

        replayed = {
            inv.summary.step_id: inv
            for inv in read_session(
                self._audit, self._recorder, session, flush_timeout_s=self._flush_timeout_s
            )
        }
        queries: list[ReplayedQuery] = []
        for original in originals:
            after = replayed.get(original.summary.id)
            if after is None:
                raise AuditError(
                    f"the replay of invocation {original.summary.id} is not in the audit store"
                )
            before_ids, after_ids = original.document_ids, after.document_ids
            queries.append(
                ReplayedQuery(
                    original_invocation_id=original.summary.id,
                    original_session_id=original.summary.session_id,
                    step_id=original.summary.step_id,
                    query=original.summary.query,
                    replay_invocation_id=after.summary.id,
                    status_before=original.summary.status,
                    status_after=after.summary.status,
                    before=before_ids,
                    after=after_ids,
                    jaccard=jaccard(before_ids, after_ids),
                    rbo=rank_biased_overlap(before_ids, after_ids, self._p),
                )
            )
        return ReplayReport(
            replay_session_id=session,
            selection=selection,
            settings=MappingProxyType(describe_config(config)),
            queries=tuple(queries),
            threshold=threshold,
            rbo_persistence=self._p,
            groups_unknown=tuple(groups_unknown),
        )

    def _originals(self, selection: ReplaySelection) -> list[RecordedInvocation]:
        if selection.session_id is not None:
            chosen = read_session(
                self._audit,
                self._recorder,
                selection.session_id,
                flush_timeout_s=self._flush_timeout_s,
            )
        else:
            assert selection.time_range is not None
            self._recorder.flush(None, self._flush_timeout_s)
            summaries = list_all_invocations(
                self._audit,
                InvocationFilter(time_range=selection.time_range, traffic=selection.traffic),
            )
            wanted = {s.id for s in summaries}
            evidence: dict[str, list[EvidenceView]] = {}
            for session in dict.fromkeys(s.session_id for s in summaries):
                for shown in self._audit.session_evidence(session):
                    if shown.invocation_id in wanted:
                        evidence.setdefault(shown.invocation_id, []).append(shown.evidence)
            chosen = [
                RecordedInvocation(s, tuple(sorted(evidence.get(s.id, ()), key=lambda e: e.rank)))
                for s in summaries
            ]
        chosen = [inv for inv in chosen if inv.summary.tool_name == TOOL_NAME]
        if selection.limit is not None:
            chosen = chosen[: selection.limit]
        return chosen
