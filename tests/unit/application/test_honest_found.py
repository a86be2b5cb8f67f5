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
from tests.fakes import FakeClock, LookupFixture, make_lookup

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
    # the block's relevance is its calibrated evidence, never its fused rank score
    assert result.evidence_blocks[0].relevance == pytest.approx(
        result.rerank_trace[0]["strength"], abs=1e-4
    )
    # the exact match is the evidence; the other document is not padded in beside it
    assert all(b.document_id != "kb/tea.md#chunk-0" for b in result.evidence_blocks)


def test_a_natural_question_about_the_only_document_is_found_by_bm25() -> None:
    """Words the collection lacks ("how", "many", "does") do not outweigh the words the
    only document matches: a first ingest of one file answers a question about it. (In
    hybrid the dense list's support decides too, and the hashing embedder gives none.)"""
    mode = SearchMode.SPARSE
    kb = InMemoryKnowledgeBase()
    IngestDocuments(
        store=kb,
        chunker=MarkdownChunker(chunk_size=400),
        clock=FakeClock(),
        embedder=HashingEmbedder(64),
    ).execute(
        StaticDocumentSource(
            [SourceDocument("kb/pool.md", "# Pool\n\nPgBouncer keeps up to 16 server connections.")]
        )
    )
    fx = make_lookup(kb, embedder=HashingEmbedder(64))
    question = "how many server connections does PgBouncer keep"
    result = fx.lookup.execute(question, session_id="s", options=LookupOptions(mode=mode))
    assert result.found, result.message
    assert result.evidence_blocks[0].document_id == "kb/pool.md#chunk-0"


class LookAlikeEmbedder(HashingEmbedder):
    """Every text shares one direction (as sentence embedders' vectors of one domain
    do): unrelated chunks have a cosine near 0.5, not 0."""

    def _embed(self, text: str) -> list[float]:
        vector = super()._embed(text)
        vector[-1] += 1.0
        norm = sum(v * v for v in vector) ** 0.5
        return [v / norm for v in vector]


def _smithy() -> LookupFixture:
    words = [
        "anvil",
        "bellows",
        "crucible",
        "forge",
        "hammer",
        "ingot",
        "lathe",
        "mould",
        "quench",
        "rivet",
        "tongs",
    ]
    docs = [
        SourceDocument(doc_id=f"kb/{w}.md", text=f"# {w}\n\nThe {w} in the smithy.") for w in words
    ]
    embedder = LookAlikeEmbedder(64)
    kb = InMemoryKnowledgeBase()
    IngestDocuments(
        store=kb, chunker=MarkdownChunker(chunk_size=400), clock=FakeClock(), embedder=embedder
    ).execute(StaticDocumentSource(docs))
    return make_lookup(kb, embedder=embedder)


def test_cosine_is_judged_against_the_collections_background() -> None:
    fx = _smithy()
    dense = LookupOptions(mode=SearchMode.DENSE)
    # a cosine of ~0.5 is what any two chunks here have: no evidence of anything
    off_topic = fx.lookup.execute("violin concerto tickets", session_id="s", options=dense)
    assert not off_topic.found
    on_topic = fx.lookup.execute("The quench in the smithy", session_id="s", options=dense)
    assert on_topic.found
    assert on_topic.evidence_blocks[0].document_id == "kb/quench.md#chunk-0"


@pytest.mark.parametrize("mode", [SearchMode.DENSE, SearchMode.HYBRID])
def test_no_evidence_is_said_everywhere_alike(mode: SearchMode) -> None:
    fx = _smithy()
    result = fx.lookup.execute(
        "violin concerto tickets", session_id="s", options=LookupOptions(mode=mode)
    )
    assert not result.found
    assert result.status.value == "no_evidence"
    assert result.relevance_level.value == "none"
    assert result.completeness_hint.value == "none"
    assert "No evidence" in result.message
    assert result.evidence_blocks == ()
    assert all(entry["outcome"] != "returned" for entry in result.rerank_trace)
    assert result.retrieval_trace["counts"].get("returned", 0) == 0


def test_the_agent_reads_each_blocks_calibrated_relevance_as_its_score() -> None:
    fx = _smithy()
    result = fx.lookup.execute(
        "quench", session_id="s", options=LookupOptions(mode=SearchMode.HYBRID)
    )
    blocks = result.to_tool_json()["evidenceBlocks"]
    assert blocks
    strength = {t["document_id"]: t["strength"] for t in result.rerank_trace}
    for shown in blocks:
        # the calibrated evidence, not the fused rank score (1.0 for the first of both lists)
        assert shown["score"] == round(strength[shown["document_id"]], 3)


def test_a_chinese_question_about_an_english_document_is_read_against_its_own_reference() -> None:
    """A gloss-expanded query (Chinese words plus their English senses) has a BM25
    reference of its own: each Chinese word counted once, in its cheapest form, so the
    English chunk that holds the senses is found, and its relevance is the calibrated
    share, not the saturation fallback of a query without a reference."""
    from lookup_knowledge.adapters.text import SnowballJiebaAnalyzer
    from lookup_knowledge.application.ports import KnowledgeSearchRequest
    from lookup_knowledge.domain.relevance import bm25_evidence, query_reference, reference_idf

    analyzer = SnowballJiebaAnalyzer(chinese_query_glosses=3)
    kb = InMemoryKnowledgeBase(analyzer=analyzer)
    IngestDocuments(store=kb, chunker=MarkdownChunker(chunk_size=400), clock=FakeClock()).execute(
        StaticDocumentSource(
            [
                SourceDocument(
                    "kb/lb.md", "# HAProxy\n\nHAProxy checks the health of each server."
                ),
                SourceDocument("kb/tea.md", "# Tea\n\nBrew green leaves for two minutes."),
                SourceDocument("kb/dns.md", "# DNS\n\nA record maps a name to an address."),
            ]
        )
    )
    question = "HAProxy 健康检查"  # health check: the dictionary glosses its parts
    hits = kb.search(KnowledgeSearchRequest(question, top_k=3, mode=SearchMode.SPARSE))
    assert hits[0].identity.doc_id == "kb/lb.md"
    assert hits[0].calibration is not None
    reference = hits[0].calibration.bm25_reference
    # three concepts (haproxy, 健康 or "health", 检查 or "inspect"...), each held by at
    # most one of the three chunks: the reference is three such terms' idf, where the
    # sum over every term sent would count 健康 and "health" both
    assert reference == pytest.approx(3 * reference_idf(3, 1))
    assert reference == pytest.approx(
        query_reference(analyzer.query_concepts(question), lambda _t: reference_idf(3, 1))
    )
    assert bm25_evidence(hits[0].score, reference) > 0.5  # two of the three concepts
    fx = make_lookup(kb)
    result = fx.lookup.execute(
        question, session_id="s", options=LookupOptions(mode=SearchMode.SPARSE)
    )
    assert result.found, result.message
    assert result.evidence_blocks[0].document_id == "kb/lb.md#chunk-0"
