"""``found`` is honest: an exact match in a tiny collection is evidence in every mode,
with or without access control, and the traces agree with the answer."""

from __future__ import annotations

import pytest

from lookup_knowledge.adapters.embedders import HashingEmbedder
from lookup_knowledge.adapters.files import MarkdownChunker
from lookup_knowledge.adapters.memory import InMemoryKnowledgeBase
from lookup_knowledge.application.ingest import IngestDocuments, StaticDocumentSource
from lookup_knowledge.application.lookup import LookupConfig, LookupOptions
from lookup_knowledge.application.ports import SourceDocument
from lookup_knowledge.domain.access import AccessMode, DocumentAccess, Principal
from lookup_knowledge.domain.model import SearchMode
from tests.fakes import FakeClock, make_lookup

ACME = Principal("acme", "alice")
DOCS = [
    SourceDocument(doc_id="kb/flux.md", text="# Flux\n\nThe gnuflux capacitor needs care."),
    SourceDocument(doc_id="kb/tea.md", text="# Tea\n\nBrew green leaves for two minutes."),
]


def _tiny(access: DocumentAccess | None) -> InMemoryKnowledgeBase:
    kb = InMemoryKnowledgeBase()
    ingest = IngestDocuments(
        store=kb,
        chunker=MarkdownChunker(chunk_size=400),
        clock=FakeClock(),
        embedder=HashingEmbedder(64),
    )
    if access is None:
        ingest.execute(StaticDocumentSource(DOCS))
    else:
        ingest.execute(StaticDocumentSource(DOCS, access=access))
    return kb


@pytest.mark.parametrize("mode", [SearchMode.SPARSE, SearchMode.HYBRID])
@pytest.mark.parametrize("access", [AccessMode.OFF, AccessMode.ENFORCED])
def test_a_word_in_one_of_two_documents_is_found(mode: SearchMode, access: AccessMode) -> None:
    enforced = access is AccessMode.ENFORCED
    kb = _tiny(DocumentAccess("acme") if enforced else None)
    fx = make_lookup(kb, config=LookupConfig(access_mode=access), embedder=HashingEmbedder(64))
    options = LookupOptions(mode=mode, principal=ACME if enforced else None)
    result = fx.lookup.execute("gnuflux", session_id="s", options=options)
    assert result.found, result.message
    assert result.evidence_blocks[0].document_id == "kb/flux.md#chunk-0"
    assert result.relevance_level.value != "none"
    # the exact match is the evidence; the other document is not padded in beside it
    assert all(b.document_id != "kb/tea.md#chunk-0" for b in result.evidence_blocks)


def test_no_evidence_is_said_everywhere_alike() -> None:
    kb = _tiny(None)
    fx = make_lookup(kb, embedder=HashingEmbedder(64))
    result = fx.lookup.execute(
        "zzqx flibbertigibbet", session_id="s", options=LookupOptions(mode=SearchMode.SPARSE)
    )
    assert not result.found
    assert result.status.value == "no_evidence"
    assert result.relevance_level.value == "none"
    assert result.completeness_hint.value == "none"
    assert "No evidence" in result.message
    assert all(entry["outcome"] != "returned" for entry in result.rerank_trace)
