"""``make_lookup``: the ``LookupKnowledge`` use case wired to fakes, for use-case tests.

Every port has a default (an empty ``FakeSearch``, a fresh in-memory audit store, a
``FakeSessionState``, a ``FakeClock``, a ``FakeEmbedder``, no query domains, the default
``LookupConfig``, no telemetry); a keyword argument replaces one, with a fake or with a
real adapter. The returned ``LookupFixture`` holds the use case and what it was built with,
so a test reads back what the search was asked and what the recorder kept.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Final

from lookup_knowledge.application.lookup import LookupConfig, LookupKnowledge
from lookup_knowledge.application.ports import (
    AuditQueries,
    Clock,
    Embedder,
    KnowledgeSearchPort,
    Reranker,
    SessionState,
    Telemetry,
    ToolInvocation,
    ToolInvocationRecorder,
)
from lookup_knowledge.application.query_transformer import QueryTransformer
from tests.fakes.audit import FakeSessionState, InMemoryAuditQueries, InMemoryRecorder
from tests.fakes.runtime import FakeClock
from tests.fakes.search import FakeEmbedder, FakeSearch


class _Default(Enum):
    EMBEDDER = "a FakeEmbedder"


_FAKE_EMBEDDER: Final = _Default.EMBEDDER


@dataclass(frozen=True)
class LookupFixture:
    """A use case and the ports it was built with."""

    lookup: LookupKnowledge
    search: KnowledgeSearchPort
    recorder: ToolInvocationRecorder
    audit: AuditQueries | None  # the queries over the fake store; None for another recorder
    session_state: SessionState
    clock: Clock
    embedder: Embedder | None
    config: LookupConfig

    @property
    def records(self) -> list[ToolInvocation]:
        """What the in-memory audit store holds, in the order it was stored."""
        if not isinstance(self.recorder, InMemoryRecorder):
            raise TypeError(f"{type(self.recorder).__name__} keeps no records in memory")
        return self.recorder.records


def make_lookup(
    search: KnowledgeSearchPort | None = None,
    *,
    recorder: ToolInvocationRecorder | None = None,
    session_state: SessionState | None = None,
    clock: Clock | None = None,
    embedder: Embedder | _Default | None = _FAKE_EMBEDDER,
    domains: Mapping[str, Sequence[str]] | None = None,
    transformer: QueryTransformer | None = None,
    config: LookupConfig | None = None,
    telemetry: Telemetry | None = None,
    reranker: Reranker | None = None,
) -> LookupFixture:
    """``embedder=None`` builds a use case without an embedder (sparse mode, or the
    configuration error of dense mode without one); ``domains`` are the query
    transformer's domain keywords (ignored when ``transformer`` is given)."""
    if recorder is None:
        fake = InMemoryRecorder()
        recorder, audit = fake, InMemoryAuditQueries(fake.store)
    elif isinstance(recorder, InMemoryRecorder):
        audit = InMemoryAuditQueries(recorder.store)
    else:
        audit = None
    search = search if search is not None else FakeSearch()
    session_state = session_state if session_state is not None else FakeSessionState()
    clock = clock if clock is not None else FakeClock()
    chosen_embedder = FakeEmbedder() if isinstance(embedder, _Default) else embedder
    config = config if config is not None else LookupConfig()
    lookup = LookupKnowledge(
        search=search,
        transformer=transformer or QueryTransformer(dict(domains or {})),
        recorder=recorder,
        session_state=session_state,
        clock=clock,
        embedder=chosen_embedder,
        config=config,
        telemetry=telemetry,
        reranker=reranker,
    )
    return LookupFixture(
        lookup=lookup,
        search=search,
        recorder=recorder,
        audit=audit,
        session_state=session_state,
        clock=clock,
        embedder=chosen_embedder,
        config=config,
    )
