"""In-memory fakes of the ports, by role, for unit and contract tests (no mocks).

- ``tests.fakes.search``: ``FakeSearch`` (a search engine over rows) and ``FakeEmbedder``.
- ``tests.fakes.audit``: the in-memory audit store, its recorder and queries, and
  ``FakeSessionState``.
- ``tests.fakes.runtime``: ``FakeClock``.
"""

from tests.fakes.audit import (
    FakeRecorder,
    FakeSessionState,
    InMemoryAuditQueries,
    InMemoryAuditStore,
    InMemoryRecorder,
    in_memory_audit,
)
from tests.fakes.runtime import FakeClock
from tests.fakes.search import FakeEmbedder, FakeSearch, StoredChunk, chunk

__all__ = [
    "FakeClock",
    "FakeEmbedder",
    "FakeRecorder",
    "FakeSearch",
    "FakeSessionState",
    "InMemoryAuditQueries",
    "InMemoryAuditStore",
    "InMemoryRecorder",
    "StoredChunk",
    "chunk",
    "in_memory_audit",
]
