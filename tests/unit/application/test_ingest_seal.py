"""An ingest run that changed the store seals it once (Milvus: flush), and only then."""

from __future__ import annotations

from lookup_knowledge.adapters.embedders import HashingEmbedder
from lookup_knowledge.adapters.files.chunking import MarkdownChunker
from lookup_knowledge.adapters.memory import InMemoryKnowledgeBase
from lookup_knowledge.application.ingest import IngestDocuments, StaticDocumentSource
from lookup_knowledge.application.ports import SourceDocument
from tests.fakes import FakeClock


class SealCountingStore(InMemoryKnowledgeBase):
    def __init__(self) -> None:
        super().__init__()
        self.seals = 0

    def seal(self) -> None:
        self.seals += 1


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
