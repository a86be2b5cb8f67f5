"""The composition root: the only module that knows every concrete adapter.

Configuration goes in as a validated ``Settings``; ``Selector``s pick the search backend,
the embedder and the recorder from it; ``Resource``s own what must be closed (the Milvus
connection, the SQLAlchemy engine, the recorder and its journal); use cases are
``Factory``s. Nothing is built at import time, and tests swap any provider with
``container.<provider>.override(fake)``.
"""

from __future__ import annotations

import logging
from operator import attrgetter
from typing import TYPE_CHECKING

from dependency_injector import containers, providers

from lookup_knowledge.adapters import builders
from lookup_knowledge.adapters.audit import (
    AlembicAuditSchema,
    AuditSessionState,
    SqlAuditQueries,
)
from lookup_knowledge.adapters.audit.trail import SqlAuditTrail
from lookup_knowledge.adapters.config import Settings
from lookup_knowledge.adapters.runtime import (
    DisabledRecorder,
    InMemorySessionState,
    SystemClock,
)
from lookup_knowledge.application.access_check import CitationAccess
from lookup_knowledge.application.health import CheckHealth
from lookup_knowledge.application.ingest import IngestDocuments
from lookup_knowledge.application.lookup import LookupKnowledge
from lookup_knowledge.application.query_transformer import QueryTransformer
from lookup_knowledge.application.verify_citations import VerifyCitations

if TYPE_CHECKING:
    # Imported by the builders that make them: pymilvus brings pandas, pyarrow and gRPC
    # (~2 s cold on a small machine) and the ONNX embedder its runtime; a command that
    # only reads the audit store (``audit``, ``db``) needs none of them, nor the
    # ingest, text-analysis and telemetry adapters.
    pass

logger = logging.getLogger(__name__)

# ------------------------------------------------------------------ the container


class Container(containers.DeclarativeContainer):
    settings = providers.Dependency(instance_of=Settings)

    clock = providers.Singleton(SystemClock)
    telemetry = providers.Singleton(builders.telemetry)

    embedder = providers.Selector(
        providers.Callable(builders.embedder_provider, settings),
        **builders.embedder_choices(settings),
    )

    text_analyzer = providers.Singleton(builders.text_analyzer, settings)
    milvus_connection = providers.Resource(builders.milvus_connection, settings)
    memory_knowledge = providers.Singleton(builders.memory_knowledge, text_analyzer, settings)

    search = providers.Selector(
        providers.Callable(builders.backend, settings),
        milvus=providers.Singleton(
            builders.milvus_search, milvus_connection, text_analyzer, settings
        ),
        memory=memory_knowledge,
    )
    store = providers.Selector(
        providers.Callable(builders.backend, settings),
        milvus=providers.Singleton(
            builders.milvus_store, milvus_connection, text_analyzer, settings
        ),
        memory=memory_knowledge,
    )

    audit_database = providers.Resource(builders.audit_database, settings)
    audit_engine = providers.Callable(attrgetter("engine"), audit_database)
    audit_chain = providers.Singleton(builders.audit_chain, audit_database, settings)
    recorder = providers.Selector(
        providers.Callable(builders.audit_mode, settings),
        sql=providers.Resource(builders.sql_recorder, audit_database, settings, audit_chain),
        off=providers.Singleton(DisabledRecorder),
    )
    audit_queries = providers.Selector(
        providers.Callable(builders.audit_mode, settings),
        sql=providers.Singleton(
            SqlAuditQueries,
            audit_engine,
            barrier=providers.Callable(builders.audit_barrier, recorder),
        ),
        off=providers.Callable(builders.audit_disabled),
    )
    session_state = providers.Selector(
        providers.Callable(builders.audit_mode, settings),
        sql=providers.Singleton(AuditSessionState, audit_queries),
        off=providers.Singleton(InMemorySessionState),
    )

    transformer = providers.Singleton(
        QueryTransformer, providers.Callable(lambda s: s.domain_dictionary(), settings)
    )

    # The optional reranker stage of the lookup; off (None) unless rag.rerank.provider.
    reranker = providers.Selector(
        providers.Callable(builders.reranker_provider, settings),
        none=providers.Object(None),
        tei=providers.Resource(builders.tei_reranker, settings),
        cohere=providers.Resource(builders.cohere_reranker, settings),
    )

    # One use case per container: it holds no per-call state and is thread-safe.
    lookup = providers.Singleton(
        LookupKnowledge,
        search=search,
        transformer=transformer,
        recorder=recorder,
        session_state=session_state,
        clock=clock,
        embedder=embedder,
        config=providers.Callable(lambda s: s.to_lookup_config(), settings),
        telemetry=telemetry,
        reranker=reranker,
    )
    ingest = providers.Factory(
        IngestDocuments,
        store=store,
        chunker=providers.Singleton(builders.chunker, settings),
        clock=clock,
        embedder=embedder,
        settings=providers.Callable(builders.ingest_settings, settings),
    )
    # What the checks ask the knowledge base, started only when one asks.
    search_when_needed = providers.Singleton(builders.SearchWhenNeeded, search.provider)
    verify_citations = providers.Factory(
        VerifyCitations, audit_queries, recorder, search=search_when_needed
    )
    # Called with the paths and options of one ingest run.
    document_source = providers.Factory(builders.document_source)
    audit_schema = providers.Factory(
        AlembicAuditSchema, providers.Callable(builders.audit_url, settings)
    )

    # One per app: it remembers the checks still in flight (see CheckHealth).
    health = providers.Singleton(
        CheckHealth,
        search=search,
        recorder=recorder,
        audit=providers.Selector(
            providers.Callable(builders.audit_mode, settings),
            sql=audit_queries.provider,
            off=providers.Object(None),
        ),
    )

    # The answer checker (CheckAnswer): what the agent wrote against what it was shown.
    session_evidence = providers.Selector(
        providers.Callable(builders.audit_mode, settings),
        sql=providers.Singleton(
            builders.session_evidence,
            audit_engine,
            barrier=providers.Callable(builders.audit_barrier, recorder),
        ),
        off=providers.Callable(builders.audit_disabled),
    )
    answer_checks = providers.Selector(
        providers.Callable(builders.audit_mode, settings),
        sql=providers.Singleton(builders.answer_check_store, audit_engine, audit_chain),
        off=providers.Callable(builders.audit_disabled),
    )
    # The tamper-evident trail: verify-log, evidence bundles, prune.
    audit_trail = providers.Selector(
        providers.Callable(builders.audit_mode, settings),
        sql=providers.Singleton(
            SqlAuditTrail,
            audit_engine,
            audit_chain,
            barrier=providers.Callable(builders.audit_barrier, recorder),
        ),
        off=providers.Callable(builders.audit_disabled),
    )
    stemmer = providers.Singleton(builders.stemmer, settings)
    claim_judge = providers.Selector(
        providers.Callable(builders.judge_provider, settings),
        none=providers.Object(None),
        openai=providers.Resource(builders.judge, settings, "openai"),
        tei=providers.Resource(builders.judge, settings, "tei"),
    )
    # A block's current text by document_id, from the rows of one tenant (or none).
    chunk_text = providers.Singleton(builders.chunk_text, search_when_needed)
    check_answer = providers.Factory(
        builders.check_answer,
        evidence=session_evidence,
        store=answer_checks,
        recorder=recorder,
        clock=clock,
        stemmer=stemmer,
        chunk_text=chunk_text,
        embedder=providers.Callable(builders.check_embedder, settings, embedder),
        judge=claim_judge,
        settings=providers.Callable(lambda s: s.to_answer_check_settings(), settings),
        access=providers.Factory(CitationAccess, audit_queries, search_when_needed),
    )

    ranking_metrics = providers.Factory(builders.ranking_metrics)
    run_eval = providers.Factory(
        builders.run_eval,
        ingest=ingest,
        lookup=lookup,
        audit=audit_queries,
        recorder=recorder,
        metrics=ranking_metrics,
        clock=clock,
        # Milvus Lite searches rows still in growing segments far slower: seal first.
        after_ingest=store.provided.seal,
    )
    replay = providers.Factory(
        builders.replay,
        lookup=lookup,
        audit=audit_queries,
        recorder=recorder,
        clock=clock,
        principals=providers.Callable(builders.configured_principals, settings),
    )
