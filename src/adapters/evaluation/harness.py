"""Wiring of the Eval use cases onto a configured ``LookupApp`` (its container's real
adapters: the knowledge store and search, the embedder, the audit recorder and queries).

After an ingest the eval flushes the Milvus collection: Milvus Lite answers searches over
rows still in growing (unflushed) segments far slower (measured on the SciFact
collection, 8,647 chunks: ~300-600 ms per dense search before, ~7 ms after
``flush``), and the eval measures lookups, not that transient state.
"""

from __future__ import annotations

from lookup_knowledge.adapters.api import LookupApp
from lookup_knowledge.adapters.config import SearchBackend
from lookup_knowledge.adapters.evaluation.metrics import IrMeasuresMetrics
from lookup_knowledge.adapters.milvus.errors import DRIVER_ERRORS, translate_ingest
from lookup_knowledge.application.evaluation import MEASURES, MetricsPort, Replay, RunEval


def seal_collection(app: LookupApp) -> None:
    """Flush the app's Milvus collection (seal growing segments); nothing for the
    in-memory backend."""
    settings = app.settings
    if settings.search.backend is not SearchBackend.MILVUS:
        return
    name = settings.milvus.collection
    client = app.container.milvus_connection().client()
    try:
        if client.has_collection(name):
            client.flush(name)
    except DRIVER_ERRORS as error:
        raise translate_ingest(
            error, "flush", f"{settings.milvus_uri} collection {name}"
        ) from error


def run_eval_for(
    app: LookupApp, *, metrics: MetricsPort | None = None, measures: tuple[str, ...] = MEASURES
) -> RunEval:
    container = app.container
    return RunEval(
        ingest=container.ingest(),
        lookup=container.lookup(),
        audit=app.audit,
        recorder=app.recorder,
        metrics=metrics or IrMeasuresMetrics(),
        clock=container.clock(),
        measures=measures,
        after_ingest=lambda: seal_collection(app),
    )


def replay_for(app: LookupApp) -> Replay:
    container = app.container
    return Replay(
        lookup=container.lookup(),
        audit=app.audit,
        recorder=app.recorder,
        clock=container.clock(),
    )
