"""``KnowledgeCollection.ensure_loaded``: the collection is loaded once, however many
callers find it unloaded at the same time (the warm-up and a first request), and a load
that an ``invalidate`` overtook is not taken as done."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from lookup_knowledge.adapters.milvus.collection import KnowledgeCollection


class SlowLoadClient:
    """A server whose collection starts released and takes a while to load."""

    def __init__(self) -> None:
        self.loads = 0
        self.loaded = False

    def get_load_state(self, name: str, timeout: float) -> dict[str, Any]:
        return {"state": "Loaded" if self.loaded else "NotLoad"}

    def load_collection(self, name: str, timeout: float) -> None:
        self.loads += 1
        time.sleep(0.2)
        self.loaded = True


class Connection:
    is_lite = False
    timeout_s = 5.0
    uri = "http://milvus.test:19530"

    def __init__(self, client: SlowLoadClient) -> None:
        self._client = client

    def client(self) -> SlowLoadClient:
        return self._client


def test_callers_that_find_the_collection_unloaded_together_load_it_once() -> None:
    client = SlowLoadClient()
    collection = KnowledgeCollection(Connection(client), "docs")  # type: ignore[arg-type]
    start = threading.Barrier(4)

    def first_request() -> None:
        start.wait()
        collection.ensure_loaded()

    with ThreadPoolExecutor(max_workers=4) as callers:
        for done in [callers.submit(first_request) for _ in range(4)]:
            done.result()
    assert client.loads == 1
    collection.ensure_loaded()
    assert client.loads == 1
    collection.invalidate()  # what was cached is stale: asked again, not loaded again
    collection.ensure_loaded()
    assert client.loads == 1


class ReleasedDuringLoadClient(SlowLoadClient):
    """A load during which another caller finds the cache stale (the collection was
    released behind this process' back) and invalidates it."""

    def __init__(self) -> None:
        super().__init__()
        self.collection: KnowledgeCollection | None = None

    def load_collection(self, name: str, timeout: float) -> None:
        self.loads += 1
        if self.loads == 1 and self.collection is not None:
            self.collection.invalidate()
            return  # this load's answer is stale: the collection stays released
        self.loaded = True


def test_an_invalidate_during_a_load_makes_the_next_call_load_again() -> None:
    client = ReleasedDuringLoadClient()
    collection = KnowledgeCollection(Connection(client), "docs")  # type: ignore[arg-type]
    client.collection = collection
    collection.ensure_loaded()
    assert client.loads == 1
    assert not client.loaded
    collection.ensure_loaded()  # not trusted: asked again, and loaded
    assert client.loads == 2
    assert client.loaded
    collection.ensure_loaded()
    assert client.loads == 2
