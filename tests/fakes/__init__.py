"""In-memory fakes of the ports, by role, for unit and contract tests (no mocks).

- ``tests.fakes.search``: ``FakeSearch`` (a search engine over rows) and ``FakeEmbedder``.
- ``tests.fakes.audit``: the in-memory audit store, its recorder (``InMemoryRecorder``, the
  one recorder fake: it keeps what the SQL store keeps) and queries, and ``FakeSessionState``.
- ``tests.fakes.runtime``: ``FakeClock``.
- ``tests.fakes.reranking``: ``FakeReranker`` (scores by words, or fails).
- ``tests.fakes.answer_check``: the answer checker's ports (shown evidence, chunk text, check
  records, a stemmer, a scripted judge).
- ``tests.fakes.lookup``: ``make_lookup``, the use case wired to these fakes.
"""

from tests.fakes.audit import (
    FakeSessionState,
    InMemoryAuditQueries,
    InMemoryAuditStore,
    InMemoryRecorder,
    in_memory_audit,
)
from tests.fakes.lookup import LookupFixture, make_lookup
from tests.fakes.reranking import FakeReranker
from tests.fakes.runtime import FakeClock
from tests.fakes.search import FakeEmbedder, FakeSearch, StoredChunk, chunk

__all__ = [
    "FakeClock",
    "FakeEmbedder",
    "FakeReranker",
    "FakeSearch",
    "FakeSessionState",
    "InMemoryAuditQueries",
    "InMemoryAuditStore",
    "InMemoryRecorder",
    "LookupFixture",
    "StoredChunk",
    "chunk",
    "in_memory_audit",
    "make_lookup",
]
