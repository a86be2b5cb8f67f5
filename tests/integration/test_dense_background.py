"""The dense background is measured when a Milvus Lite collection is sealed, stored with
it, and read back by a later process; a collection without it is measured on demand."""

from __future__ import annotations

from pathlib import Path

from lookup_knowledge.adapters.api import create_app
from lookup_knowledge.adapters.milvus import MilvusConnection
from lookup_knowledge.adapters.milvus.collection import KnowledgeCollection
from lookup_knowledge.adapters.milvus.schema import BACKGROUND_PROPERTY

WORDS = [
    "alpha",
    "bravo",
    "charlie",
    "delta",
    "echo",
    "foxtrot",
    "golf",
    "hotel",
    "india",
    "juliet",
    "kilo",
    "lima",
]


def test_seal_stores_the_background_and_a_lookup_reads_it(tmp_path: Path) -> None:
    kb = tmp_path / "kb"
    kb.mkdir()
    for i, word in enumerate(WORDS):
        (kb / f"{word}.md").write_text(
            f"# {word}\n\n{word} {WORDS[(i + 1) % len(WORDS)]} notes.\n", encoding="utf-8"
        )
    overrides = {
        "data-dir": str(tmp_path / "data"),
        "search.backend": "milvus",
        "embedder.provider": "hashing",
        "embedder.hashing.dimension": 64,
    }
    with create_app(overrides=overrides) as app:
        app.ingest([kb])
        app.seal_knowledge_store()
        name = app.settings.milvus.collection
    connection = MilvusConnection(str(tmp_path / "data" / "milvus.db"))
    try:
        collection = KnowledgeCollection(connection, name)
        described = connection.client().describe_collection(name)
        assert BACKGROUND_PROPERTY in (described.get("properties") or {})
        layout = collection.layout()
        assert layout is not None
        stored = layout.dense_background
        assert stored is not None
        assert stored.pairs == len(WORDS) * (len(WORDS) - 1) // 2
        assert stored == collection.measure_background()
    finally:
        connection.close()
    with create_app(overrides=overrides) as app:
        result = app.lookup_result("golf hotel", session_id="s", mode="dense")
        assert result.found
