"""Wiring of the Eval use cases onto a configured ``LookupApp`` (its container's real
adapters: the knowledge store and search, the embedder, the audit recorder and queries).

Before the first lookup the eval seals the store (``KnowledgeStore.seal``; Milvus:
flush): Milvus Lite answers searches over rows still in growing segments far slower
(SciFact, 8,647 chunks: ~300-600 ms per dense search before, ~7 ms after), and the eval
measures lookups, not that transient state.
"""

from __future__ import annotations

from lookup_knowledge.adapters.api import LookupApp
from lookup_knowledge.application.evaluation import MEASURES, Replay, RunEval
from lookup_knowledge.application.ports import RankingMetrics


def seal_collection(app: LookupApp) -> None:
    """Seal the app's knowledge store before measuring: ingest seals what it writes, but
    a collection left by an interrupted run (or reused with --skip-ingest) may not be."""
    app.seal_knowledge_store()


def run_eval_for(
    app: LookupApp, *, metrics: RankingMetrics | None = None, measures: tuple[str, ...] = MEASURES
) -> RunEval:
    return app.eval_runner(measures)


def replay_for(app: LookupApp) -> Replay:
    return app.replayer()
