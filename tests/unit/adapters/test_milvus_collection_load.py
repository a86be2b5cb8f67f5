"""``KnowledgeCollection.ensure_loaded``: the collection is loaded once, however many
callers find it unloaded at the same time (the warm-up and a first request), and a load
that an ``invalidate`` overtook is not taken as done, nor a layout it overtook cached."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from lookup_knowledge.adapters.milvus import collection as collection_module
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


class DroppedWhileDescribedClient:
    """A collection dropped and made again by another process while this one describes
    it: the first description is stale by the time it arrives."""

    def __init__(self) -> None:
        self.described = 0
        self.collection: KnowledgeCollection | None = None

    def has_collection(self, name: str, timeout: float) -> bool:
        return True

    def describe_collection(self, name: str, timeout: float) -> dict[str, Any]:
        self.described += 1
        if self.described == 1 and self.collection is not None:
            self.collection.invalidate()  # what another caller's error does
        return {"described": self.described}


def test_a_layout_an_invalidate_overtook_is_not_cached(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(collection_module, "read_layout", lambda description, where: description)
    client = DroppedWhileDescribedClient()
    collection = KnowledgeCollection(Connection(client), "docs")  # type: ignore[arg-type]
    client.collection = collection
    assert collection.layout() == {"described": 1}  # answered, not kept
    assert collection.layout() == {"described": 2}
    assert collection.layout() == {"described": 2}  # kept now
    assert client.described == 2
