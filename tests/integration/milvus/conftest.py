"""Milvus Lite fixtures: one fresh database file per test module, a new collection per
test, every client closed at the end."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from lookup_knowledge.adapters.embedders import HashingEmbedder
from lookup_knowledge.adapters.files import MarkdownChunker
from lookup_knowledge.adapters.milvus import (
    MilvusConnection,
    MilvusKnowledgeSearch,
    MilvusKnowledgeStore,
)
from lookup_knowledge.adapters.runtime import SystemClock
from lookup_knowledge.application.ingest import IngestDocuments


@pytest.fixture(scope="module")
def lite_uri(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(tmp_path_factory.mktemp("milvus") / "knowledge.db")


@pytest.fixture(scope="module")
def connection(lite_uri: str) -> Iterator[MilvusConnection]:
    conn = MilvusConnection(lite_uri, timeout_s=30.0)
    yield conn
    conn.close()


@pytest.fixture
def collection() -> str:
    return f"it_{uuid.uuid4().hex[:12]}"


@pytest.fixture
def store(connection: MilvusConnection, collection: str) -> MilvusKnowledgeStore:
    return MilvusKnowledgeStore(connection, collection=collection, write_batch_size=7)


@pytest.fixture
def search(connection: MilvusConnection, collection: str) -> MilvusKnowledgeSearch:
    return MilvusKnowledgeSearch(connection, collection=collection)


@pytest.fixture
def embedder() -> HashingEmbedder:
    return HashingEmbedder(64)


@pytest.fixture
def ingest(store: MilvusKnowledgeStore, embedder: HashingEmbedder) -> IngestDocuments:
    return IngestDocuments(
        store=store,
        chunker=MarkdownChunker(chunk_size=200, chunk_overlap=30),
        clock=SystemClock(),
        embedder=embedder,
    )
