"""The builders the container's providers call: each makes one adapter from the
``Settings`` (and the adapters it needs), importing the heavy ones (pymilvus, the ONNX
runtime, the evaluation extra) only when it runs; ``Resource`` builders yield and close."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

from dependency_injector import providers
from sqlalchemy.engine import Engine

from lookup_knowledge.adapters.audit import (
    SqlToolInvocationRecorder,
    build_sql_recorder,
    create_audit_engine,
    upgrade_database,
)
from lookup_knowledge.adapters.audit.chain import DEFAULT_KEY_FILE, AuditChain
from lookup_knowledge.adapters.config import AuditDurability, Settings
from lookup_knowledge.adapters.durable_files import DurableFiles
from lookup_knowledge.adapters.private_files import private_directory
from lookup_knowledge.application.ingest import IngestConfig
from lookup_knowledge.application.ports import (
    AuditQueries,
    KnowledgeSearchHit,
    KnowledgeSearchPort,
    KnowledgeSearchRequest,
    RankingMetrics,
    Reranker,
    SearchCapabilities,
    TextAnalyzer,
)
from lookup_knowledge.domain.access import UNRESTRICTED, AccessScope, DocumentAccess, Principal
from lookup_knowledge.domain.errors import AuditUnavailable, ConfigurationError

if TYPE_CHECKING:
    from lookup_knowledge.adapters.answer_check import (
        OpenAICompatibleClaimJudge,
        SearchChunkText,
        SnowballStemmer,
        TeiNliClaimJudge,
    )
    from lookup_knowledge.adapters.audit.answer_checks import (
        SqlAnswerCheckStore,
        SqlSessionEvidence,
    )

    # Imported by the builders that make them: pymilvus brings pandas, pyarrow and gRPC
    # (~2 s cold on a small machine) and the ONNX embedder its runtime; a command that
    # only reads the audit store (``audit``, ``db``) needs none of them, nor the
    # ingest, text-analysis and telemetry adapters.
    from lookup_knowledge.adapters.embedders import (
        HashingEmbedder,
        OnnxMiniLMEmbedder,
        OpenAICompatibleEmbedder,
    )
    from lookup_knowledge.adapters.files.chunking import MarkdownChunker
    from lookup_knowledge.adapters.files.loader import FileDocumentSource
    from lookup_knowledge.adapters.memory import InMemoryKnowledgeBase
    from lookup_knowledge.adapters.milvus import (
        MilvusConnection,
        MilvusKnowledgeSearch,
        MilvusKnowledgeStore,
    )
    from lookup_knowledge.adapters.telemetry import OpenTelemetryTelemetry
    from lookup_knowledge.adapters.text import SnowballJiebaAnalyzer
    from lookup_knowledge.application.answer_check import CheckAnswer
    from lookup_knowledge.application.evaluation import Replay, RunEval

logger = logging.getLogger(__name__)


def data_dir(settings: Settings) -> None:
    """The data directory, created 0700 (a path that cannot be one names ``data-dir``)."""
    private_directory(settings.data_dir, key="data-dir")


def milvus_connection(settings: Settings) -> Iterator[MilvusConnection]:
    from lookup_knowledge.adapters.milvus import MilvusConnection

    if settings.milvus.uri is None:
        data_dir(settings)
    connection = MilvusConnection(
        settings.milvus_uri,
        token=settings.milvus_token,
        db_name=settings.milvus.db_name,
        timeout_s=settings.milvus.timeout_s,
    )
    try:
        yield connection
    finally:
        connection.close()


def telemetry() -> OpenTelemetryTelemetry:
    from lookup_knowledge.adapters.telemetry import OpenTelemetryTelemetry

    return OpenTelemetryTelemetry()


def text_analyzer(settings: Settings) -> SnowballJiebaAnalyzer:
    from lookup_knowledge.adapters.text import SnowballJiebaAnalyzer

    analysis = settings.rag.text_analysis
    return SnowballJiebaAnalyzer(
        language=analysis.language.value,
        stemming=analysis.stemming,
        stop_words=analysis.stop_words,
        chinese_query_glosses=analysis.chinese_query_glosses,
    )


def milvus_search(
    connection: MilvusConnection, analyzer: TextAnalyzer, settings: Settings
) -> MilvusKnowledgeSearch:
    from lookup_knowledge.adapters.milvus import MilvusKnowledgeSearch

    return MilvusKnowledgeSearch(
        connection,
        collection=settings.milvus.collection,
        rrf_k=settings.rag.hybrid.rrf_k,
        analyzer=analyzer,
        search_ef=settings.milvus.search_ef,
    )


def milvus_store(
    connection: MilvusConnection, analyzer: TextAnalyzer, settings: Settings
) -> MilvusKnowledgeStore:
    from lookup_knowledge.adapters.milvus import MilvusKnowledgeStore

    index = settings.milvus.index
    params: dict[str, Any] = (
        {"M": index.m, "efConstruction": index.ef_construction} if index.type == "HNSW" else {}
    )
    return MilvusKnowledgeStore(
        connection,
        collection=settings.milvus.collection,
        index_type=index.type,
        index_params=params,
        analyzer=analyzer,
    )


class SearchWhenNeeded(KnowledgeSearchPort):
    """The configured search port, built by its first call. The citation and answer
    checks ask the knowledge base only about ids the session was not shown, or for a
    block whose text the audit keeps as a hash only; most checks never do, and building
    the Milvus adapter imports its client (pandas, pyarrow, gRPC: seconds, cold)."""

    def __init__(self, build: Callable[[], KnowledgeSearchPort]) -> None:
        self._build = build

    def _port(self) -> KnowledgeSearchPort:
        return self._build()  # a Singleton provider: built once, then the same object

    def search(self, request: KnowledgeSearchRequest) -> list[KnowledgeSearchHit]:
        return self._port().search(request)

    def fetch_content(
        self, evidence_keys: Sequence[str], access: AccessScope = UNRESTRICTED
    ) -> dict[str, str]:
        return self._port().fetch_content(evidence_keys, access)

    def capabilities(self) -> SearchCapabilities:
        return self._port().capabilities()

    def document_access(self, document_ids: Sequence[str]) -> dict[str, tuple[DocumentAccess, ...]]:
        return self._port().document_access(document_ids)

    def search_parameters(self) -> Mapping[str, object]:
        return self._port().search_parameters()

    def check(self) -> str:
        return self._port().check()

    def holds_nothing(self) -> bool:
        return self._port().holds_nothing()


def memory_knowledge(analyzer: TextAnalyzer, settings: Settings) -> InMemoryKnowledgeBase:
    from lookup_knowledge.adapters.memory import InMemoryKnowledgeBase

    return InMemoryKnowledgeBase(rrf_k=settings.rag.hybrid.rrf_k, analyzer=analyzer)


def onnx_embedder(settings: Settings) -> OnnxMiniLMEmbedder:
    from lookup_knowledge.adapters.embedders import OnnxMiniLMEmbedder

    return OnnxMiniLMEmbedder(
        batch_size=settings.embedder.batch_size,
        max_batch_tokens=settings.embedder.max_batch_tokens,
        intra_op_threads=settings.embedder.threads,
        # The model file's sha256 is checked once per installed file, not per start.
        verified_record=settings.data_dir / "model-verified.json",
    )


def openai_embedder(settings: Settings) -> OpenAICompatibleEmbedder:
    from lookup_knowledge.adapters.embedders import OpenAICompatibleEmbedder

    openai = settings.embedder.openai
    return OpenAICompatibleEmbedder(
        base_url=openai.base_url,
        model=openai.model,
        api_key=settings.openai_api_key,
        dimension=openai.dimension,
        request_dimensions=openai.dimension is not None,
        batch_size=settings.embedder.batch_size,
        timeout_s=openai.timeout_s,
        max_retries=openai.max_retries,
    )


def hashing_embedder(settings: Settings) -> HashingEmbedder:
    from lookup_knowledge.adapters.embedders import HashingEmbedder

    return HashingEmbedder(dimension=settings.embedder.hashing.dimension)


@dataclass(frozen=True, slots=True)
class AuditDatabase:
    """The audit engine and, when the start-up migration found the database down, the
    migration the recorder runs before its first write (None: migrated, or not asked)."""

    engine: Engine
    pending_migration: Callable[[], object] | None = None


def audit_database(settings: Settings) -> Iterator[AuditDatabase]:
    if settings.audit.database_url is None:
        data_dir(settings)
    engine = create_audit_engine(settings.audit_database_url)
    pending: Callable[[], object] | None = None
    try:
        if settings.audit.auto_migrate:
            try:
                upgrade_database(engine)
            except AuditUnavailable as error:
                # Start anyway: the recorder journals, and migrates before its first write.
                pending = partial(upgrade_database, engine)
                logger.warning(
                    "the audit database is unreachable (%s); lookups are recorded in the "
                    "local journal %s and replayed, after the schema migration, once it is "
                    "back",
                    error,
                    settings.audit_journal_dir,
                )
        yield AuditDatabase(engine, pending)
    finally:
        engine.dispose()


# How long the background writer lets a record wait for others to share its
# transaction: lookups back to back then pay for a fraction of a transaction each.
AUDIT_LINGER_S = 0.05


def audit_chain(database: AuditDatabase, settings: Settings) -> AuditChain:
    """The tamper-evident trail (closed by the recorder): its signing key is made at
    first start in the data directory unless ``audit.signing-key`` names one."""
    audit = settings.audit
    if audit.signing_key is None:
        data_dir(settings)
    key = audit.signing_key or settings.data_dir / DEFAULT_KEY_FILE
    return AuditChain(
        database.engine,
        AuditChain.key_file(key),
        every=audit.checkpoint_every,
        interval_s=audit.checkpoint_interval_s,
        witness=audit.checkpoint_file,
    )


def sql_recorder(
    database: AuditDatabase, settings: Settings, chain: AuditChain
) -> Iterator[SqlToolInvocationRecorder]:
    """The recorder as a Resource: ``shutdown_resources`` closes it (``LookupApp.close``;
    the CLI closes its app before ``exit_now``), moving what is pending once."""
    if settings.audit.journal_dir is None:
        data_dir(settings)
    # The lookup waits for the journal append only; the background writer moves the
    # records into the database in batches, and every reader flushes first. A migration
    # the start-up could not run runs before the first write, so the journal is replayed
    # into a schema that exists.
    recorder = build_sql_recorder(
        database.engine,
        settings.audit_journal_dir,
        write_behind=True,
        linger_s=AUDIT_LINGER_S,
        files=DurableFiles(enabled=settings.audit.durability is not AuditDurability.PROCESS),
        commit_before_return=settings.audit.durability is AuditDurability.DATABASE,
        adopt_unbound_journals=settings.audit.adopt_unbound_journals,
        keep_shown_text=settings.audit.keep_shown_text,
        prepare=database.pending_migration,
        chain=chain,
    )
    try:
        yield recorder
    finally:
        recorder.close()


AUDIT_BARRIER_TIMEOUT_S = 10.0


def audit_barrier(recorder: SqlToolInvocationRecorder) -> Callable[[str | None], object]:
    """What an audit query runs first: records still in the journal reach the database."""
    return lambda session_id: recorder.barrier(session_id, AUDIT_BARRIER_TIMEOUT_S)


def audit_disabled(*_: Any) -> AuditQueries:
    raise ConfigurationError(
        "audit.enabled", False, "the audit store is switched off; enable it to query audits"
    )


# The answer checker's parts are imported by their builders: it pulls in the domain's
# claim and fact analysis, which a lookup never runs (benchmarks/bench_cold_cli.py).


def check_answer(**parts: Any) -> CheckAnswer:
    from lookup_knowledge.application.answer_check import CheckAnswer

    return CheckAnswer(**parts)


def session_evidence(
    engine: Engine, *, barrier: Callable[[str | None], object] | None = None
) -> SqlSessionEvidence:
    from lookup_knowledge.adapters.audit.answer_checks import SqlSessionEvidence

    return SqlSessionEvidence(engine, barrier=barrier)


def answer_check_store(engine: Engine, chain: AuditChain) -> SqlAnswerCheckStore:
    from lookup_knowledge.adapters.audit.answer_checks import SqlAnswerCheckStore

    return SqlAnswerCheckStore(engine, chain)


def chunk_text(search: KnowledgeSearchPort) -> SearchChunkText:
    from lookup_knowledge.adapters.answer_check import SearchChunkText

    return SearchChunkText(search)


def stemmer(settings: Settings) -> SnowballStemmer:
    from lookup_knowledge.adapters.answer_check import SnowballStemmer

    return SnowballStemmer(settings.audit.check.stemmer_language)


def judge(settings: Settings, api: str) -> Iterator[OpenAICompatibleClaimJudge | TeiNliClaimJudge]:
    """The claim judge ``audit.check.judge`` names (``openai`` or ``tei``; either API
    takes the same options), closed with the container."""
    from lookup_knowledge.adapters.answer_check import OpenAICompatibleClaimJudge, TeiNliClaimJudge

    judge_type = TeiNliClaimJudge if api == "tei" else OpenAICompatibleClaimJudge
    judge = settings.audit.check.judge
    client = judge_type(
        base_url=judge.base_url,
        model=judge.model,
        api_key=settings.judge_api_key,
        timeout_s=judge.timeout_s,
    )
    try:
        yield client
    finally:
        client.close()


def reranker_options(settings: Settings) -> dict[str, Any]:
    rerank = settings.rag.rerank
    return {
        "url": rerank.url or "",
        "model": rerank.model or "",
        "api_key": settings.rerank_api_key,
        "timeout_s": rerank.timeout_s,
        "max_retries": rerank.max_retries,
    }


def tei_reranker(settings: Settings) -> Iterator[Reranker]:
    from lookup_knowledge.adapters.reranking import TeiReranker

    client = TeiReranker(raw_scores=settings.rag.rerank.logits, **reranker_options(settings))
    try:
        yield client
    finally:
        client.close()


def cohere_reranker(settings: Settings) -> Iterator[Reranker]:
    from lookup_knowledge.adapters.reranking import CohereCompatibleReranker

    client = CohereCompatibleReranker(**reranker_options(settings))
    try:
        yield client
    finally:
        client.close()


def reranker_provider(settings: Settings) -> str:
    return settings.rag.rerank.provider.value


def judge_provider(settings: Settings) -> str:
    return settings.audit.check.judge.provider.value


def check_embedder(settings: Settings, embedder: Any) -> Any:
    return embedder if settings.audit.check.use_embedder else None


def document_source(*paths: Any, **options: Any) -> FileDocumentSource:
    from lookup_knowledge.adapters.files.loader import FileDocumentSource

    return FileDocumentSource(*paths, **options)


def chunker(settings: Settings) -> MarkdownChunker:
    from lookup_knowledge.adapters.files.chunking import MarkdownChunker

    return MarkdownChunker(
        chunk_size=settings.ingest.chunk_size, chunk_overlap=settings.ingest.chunk_overlap
    )


def ingest_settings(settings: Settings) -> IngestConfig:
    return IngestConfig(
        embed_batch_size=settings.embedder.batch_size,
        write_batch_size=settings.ingest.batch_size,
    )


def run_eval(**kwargs: Any) -> RunEval:
    """The eval harness, imported when one runs (a lookup or a read command never does)."""
    from lookup_knowledge.application.evaluation import RunEval

    return RunEval(**kwargs)


def replay(**kwargs: Any) -> Replay:
    from lookup_knowledge.application.evaluation import Replay

    return Replay(**kwargs)


def ranking_metrics() -> RankingMetrics:
    # The eval extra (ir-measures) is imported only when an eval is built.
    from lookup_knowledge.adapters.evaluation.metrics import IrMeasuresMetrics

    return IrMeasuresMetrics()


def audit_url(settings: Settings) -> str:
    return settings.audit_database_url


def configured_principals(settings: Settings) -> tuple[Principal, ...]:
    """The principals the configuration names (agent tokens, ``mcp.tenant``): a replay
    takes the groups of a recorded principal from the one whose digest matches."""
    found = [entry.principal() for entry in settings.agent_principals().values()]
    found.append(settings.mcp.principal())
    return tuple(p for p in found if p is not None)


def backend(settings: Settings) -> str:
    return settings.search.backend.value


def embedder_provider(settings: Settings) -> str:
    return settings.embedder.provider.value


def audit_mode(settings: Settings) -> str:
    return "sql" if settings.audit.enabled else "off"


def embedder_choices(settings: providers.Provider[Settings]) -> dict[str, providers.Provider[Any]]:
    # The provider names are the configuration values, which are not identifiers.
    return {
        "onnx-minilm": providers.Singleton(onnx_embedder, settings),
        "openai": providers.Singleton(openai_embedder, settings),
        "hashing": providers.Singleton(hashing_embedder, settings),
        "none": providers.Object(None),
    }
