"""Milvus Lite with the product's text analysis: Chinese BM25, the schema version and the
analysis recorded on the collection, the dense search parameters in the trace."""

from __future__ import annotations

import pytest

from lookup_knowledge.adapters.embedders import HashingEmbedder
from lookup_knowledge.adapters.files import FileDocumentSource, MarkdownChunker
from lookup_knowledge.adapters.milvus import (
    MilvusConnection,
    MilvusKnowledgeSearch,
    MilvusKnowledgeStore,
)
from lookup_knowledge.adapters.runtime import DisabledRecorder, InMemorySessionState, SystemClock
from lookup_knowledge.adapters.text import SnowballJiebaAnalyzer
from lookup_knowledge.application.ingest import IngestDocuments
from lookup_knowledge.application.lookup import LookupConfig, LookupKnowledge
from lookup_knowledge.application.ports import KnowledgeSearchRequest
from lookup_knowledge.application.query_transformer import QueryTransformer
from lookup_knowledge.domain.errors import SchemaMismatch
from lookup_knowledge.domain.model import InvocationStatus, SearchMode
from lookup_knowledge.domain.settings import RetrievalSettings
from lookup_knowledge.sample_corpus import corpus_path


def _ingest(connection: MilvusConnection, collection: str, embedder: HashingEmbedder) -> None:
    IngestDocuments(
        store=MilvusKnowledgeStore(connection, collection=collection),
        chunker=MarkdownChunker(),
        clock=SystemClock(),
        embedder=embedder,
    ).execute(FileDocumentSource(corpus_path()))


@pytest.fixture(scope="module")
def sample(connection: MilvusConnection) -> str:
    name = "sample_corpus_analysed"
    _ingest(connection, name, HashingEmbedder(64))
    return name


def sparse(text: str, top_k: int = 5) -> KnowledgeSearchRequest:
    return KnowledgeSearchRequest(query_text=text, top_k=top_k, mode=SearchMode.SPARSE)


def docs(hits: list[object]) -> list[str]:
    return [str(h.metadata["doc_id"]) for h in hits]  # type: ignore[attr-defined]


@pytest.mark.slow
def test_a_chinese_word_finds_the_chinese_document_in_sparse_mode(
    connection: MilvusConnection, sample: str
) -> None:
    search = MilvusKnowledgeSearch(connection, collection=sample)
    assert docs(search.search(sparse("内存")))[0] == "sample_corpus/operations/redis-memory-zh.md"
    # A word inside a longer run ("退款" in "退款与争议处理常见问题") is found too.
    assert docs(search.search(sparse("退款")))[0] == "sample_corpus/product/refunds-zh.md"
    # Mixed: an English term and a Chinese word.
    assert (
        "sample_corpus/database/slow-query-zh.md"
        in docs(search.search(sparse("PostgreSQL 慢查询")))[:2]
    )


@pytest.mark.slow
def test_a_question_in_chinese_finds_an_english_document_through_glosses(
    connection: MilvusConnection, sample: str
) -> None:
    """Query words glossed in English (CC-CEDICT) meet the English runbooks in BM25;
    without the glosses the same questions find only Chinese documents."""
    glossed = MilvusKnowledgeSearch(connection, collection=sample)
    plain = MilvusKnowledgeSearch(
        connection, collection=sample, analyzer=SnowballJiebaAnalyzer(chinese_query_glosses=0)
    )
    for question, answer in [
        ("日志服务器磁盘满了怎么办", "sample_corpus/operations/disk-full-log-hosts.md"),
        ("证书快过期了怎么续期", "sample_corpus/operations/tls-certificate-renewal.md"),
        ("线上发布出问题了怎么回滚", "sample_corpus/operations/deploy-rollback.md"),
    ]:
        assert answer in docs(glossed.search(sparse(question))), question
        assert answer not in docs(plain.search(sparse(question, top_k=20))), question


@pytest.mark.slow
def test_stemming_and_the_title_reach_bm25(connection: MilvusConnection, sample: str) -> None:
    search = MilvusKnowledgeSearch(connection, collection=sample)
    # "renewing certificates" shares no surface form with "certificate renewal".
    assert docs(search.search(sparse("renewing certificates")))[0] == (
        "sample_corpus/operations/tls-certificate-renewal.md"
    )
    assert search.search(sparse("the of and")) == []  # stop words only: nothing to match


@pytest.mark.slow
def test_a_search_with_another_analysis_is_refused(
    connection: MilvusConnection, sample: str
) -> None:
    other = MilvusKnowledgeSearch(
        connection, collection=sample, analyzer=SnowballJiebaAnalyzer(stemming=False)
    )
    with pytest.raises(SchemaMismatch, match="text analysis"):
        other.search(sparse("内存"))
    store = MilvusKnowledgeStore(
        connection, collection=sample, analyzer=SnowballJiebaAnalyzer(stop_words=False)
    )
    with pytest.raises(SchemaMismatch, match="ingest"):
        store.ensure_collection(64)


def test_a_collection_from_before_the_schema_version_must_be_re_ingested(
    connection: MilvusConnection, collection: str
) -> None:
    # The layout of the previous release: BM25 straight on the raw text, no properties.
    from pymilvus import DataType, Function, FunctionType

    client = connection.client()
    schema = client.create_schema(auto_id=False, enable_dynamic_field=False)
    schema.add_field("evidence_key", DataType.VARCHAR, is_primary=True, max_length=2200)
    schema.add_field("doc_id", DataType.VARCHAR, max_length=2048)
    schema.add_field("text", DataType.VARCHAR, max_length=65535, enable_analyzer=True)
    schema.add_field("sparse_vector", DataType.SPARSE_FLOAT_VECTOR)
    schema.add_function(
        Function(
            name="text_bm25",
            function_type=FunctionType.BM25,
            input_field_names=["text"],
            output_field_names=["sparse_vector"],
        )
    )
    index = client.prepare_index_params()
    index.add_index(
        field_name="sparse_vector", index_type="SPARSE_INVERTED_INDEX", metric_type="BM25"
    )
    client.create_collection(collection, schema=schema, index_params=index)
    with pytest.raises(SchemaMismatch, match=r"older lookup-knowledge.*ingest the documents again"):
        MilvusKnowledgeSearch(connection, collection=collection).search(sparse("disk"))
    with pytest.raises(SchemaMismatch, match="schema version"):
        MilvusKnowledgeStore(connection, collection=collection).ensure_collection(None)


def test_a_collection_records_its_schema_version_and_analysis(
    connection: MilvusConnection, collection: str
) -> None:
    store = MilvusKnowledgeStore(connection, collection=collection)
    store.ensure_collection(8)
    described = store.describe()
    assert described["schemaVersion"] == 3
    assert described["analysis"] == SnowballJiebaAnalyzer().fingerprint


@pytest.mark.slow
def test_the_trace_records_analysis_index_and_search_parameters(
    connection: MilvusConnection, sample: str
) -> None:
    search = MilvusKnowledgeSearch(connection, collection=sample, search_ef=96)
    lookup = LookupKnowledge(
        search=search,
        transformer=QueryTransformer({}),
        recorder=DisabledRecorder(),
        session_state=InMemorySessionState(),
        clock=SystemClock(),
        embedder=HashingEmbedder(64),
        config=LookupConfig(
            retrieval=RetrievalSettings(retrieve_k=20, return_n=5, min_relevance=0.0),
            mode=SearchMode.HYBRID,
        ),
    )
    result = lookup.execute("Redis 内存 告警", session_id="s-params")
    assert result.status is InvocationStatus.OK, result.message
    params = result.retrieval_trace["searchParameters"]
    assert params["analysis"] == SnowballJiebaAnalyzer().fingerprint
    assert params["collectionAnalysis"] == params["analysis"]
    assert params["bm25Field"] == "bm25_text"
    assert params["queryExpansion"] == "zh-en-glosses/cc-cedict/senses=3"
    assert params["denseIndex"]["type"] == "HNSW"
    assert params["denseIndex"]["M"] in (16, "16")
    assert params["denseSearch"] == {"metric": "COSINE", "ef": 96, "efRule": "max(ef, limit)"}
