"""An ingest run that changed the store seals it once (Milvus: flush), and only then;
its embedder's document memory is let go before the seal."""

from __future__ import annotations

from collections.abc import Sequence

from lookup_knowledge.adapters.embedders import HashingEmbedder
from lookup_knowledge.adapters.files.chunking import MarkdownChunker
from lookup_knowledge.adapters.memory import InMemoryKnowledgeBase
from lookup_knowledge.application.ingest import IngestDocuments, StaticDocumentSource
from lookup_knowledge.application.ports import SourceDocument
from tests.fakes import FakeClock


class SealCountingStore(InMemoryKnowledgeBase):
    def __init__(self, events: list[str] | None = None) -> None:
        super().__init__()
        self.events = events if events is not None else []

    @property
    def seals(self) -> int:
        return self.events.count("seal")

    def seal(self) -> None:
        self.events.append("seal")


class EventEmbedder(HashingEmbedder):
    def __init__(self, events: list[str]) -> None:
        super().__init__(16)
        self.events = events

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        self.events.append("embed")
        return super().embed_documents(texts)

    def release_documents(self) -> None:
        self.events.append("release")


def _source(text: str) -> StaticDocumentSource:
    return StaticDocumentSource(
        [SourceDocument(doc_id="a.md", text=text, source="a.md", title="A")]
    )


def test_seal_once_per_run_that_wrote_and_never_for_an_unchanged_run() -> None:
    store = SealCountingStore()
    ingest = IngestDocuments(
        store=store, chunker=MarkdownChunker(), clock=FakeClock(), embedder=HashingEmbedder(16)
    )
    ingest.execute(_source("# A\n\nfirst version of the text\n"))
    assert store.seals == 1
    ingest.execute(_source("# A\n\nfirst version of the text\n"))
    assert store.seals == 1, "nothing written, nothing to seal"
    ingest.execute(_source("# A\n\nsecond version\n"))
    assert store.seals == 2


def test_the_embedder_lets_go_of_documents_after_the_last_embed_and_before_the_seal() -> None:
    events: list[str] = []
    ingest = IngestDocuments(
        store=SealCountingStore(events),
        chunker=MarkdownChunker(),
        clock=FakeClock(),
        embedder=EventEmbedder(events),
    )
    ingest.execute(_source("# A\n\nfirst version of the text\n"))
    assert "embed" in events
    assert events[-2:] == ["release", "seal"], "every embed came before the release"
