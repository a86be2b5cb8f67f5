"""A peer side by side: lookup-knowledge against LangChain's Milvus retriever, same data.

Same corpus (SciFact, full), same embeddings (all-MiniLM-L6-v2 ONNX, one embedder
instance shared by both), same Milvus Lite collection (the eval collection
``eval_scifact_onnx_minilm``, opened by langchain-milvus as an existing collection:
primary key ``evidence_key``, text ``text``, vector ``dense_vector``, COSINE index).
Each system returns 10 chunks per query:

- lookup-knowledge: ``LookupKnowledge.execute`` in dense mode, retrieve-k 20, return-n
  10, per-document cap 2, rule-based rerank, late materialisation; with the SQLite
  audit write (the product path) and without it;
- LangChain ``Milvus.similarity_search_with_score(k=10)`` (the vector-store retriever);
- LangChain ``max_marginal_relevance_search(k=10, fetch_k=20)``: LangChain's built-in
  answer to near-duplicate chunks (it has no node postprocessors like LlamaIndex's).

Reported per system: latency p50/p95/mean per query (embedding included, it is the same
call in all), doc-level nDCG@10 and Recall@10 (a document ranks at its best chunk,
scored with ir-measures as in the eval), and distinct documents among the 10 chunks.

LlamaIndex is not the peer: every llama-index-vector-stores-milvus release (up to
1.2.0) requires pymilvus<3, and this project needs pymilvus>=3 (see README.md).

    .venv/bin/pip install "langchain-milvus>=0.4,<0.5"     # the bench-peer extra
    .venv/bin/python benchmarks/bench_peer.py [--queries 300]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _scifact import DEFAULT_DATA_DIR, open_scifact, stats

from lookup_knowledge.adapters.evaluation.metrics import IrMeasuresMetrics
from lookup_knowledge.adapters.runtime import DisabledRecorder, InMemorySessionState
from lookup_knowledge.application.evaluation import run_scores
from lookup_knowledge.application.lookup import LookupConfig, LookupKnowledge
from lookup_knowledge.application.ports import Embedder
from lookup_knowledge.domain.projection import ProjectionBudgets
from lookup_knowledge.domain.settings import RetrievalSettings

K = 10


def langchain_embeddings(embedder: Embedder) -> Any:
    from langchain_core.embeddings import Embeddings

    class Adapter(Embeddings):
        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            return embedder.embed_documents(texts)

        def embed_query(self, text: str) -> list[float]:
            return embedder.embed_query(text)

    return Adapter()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--data-dir", type=Path, default=DEFAULT_DATA_DIR)
    args = parser.parse_args()

    from langchain_milvus import Milvus

    app, container, beir, collection = open_scifact(
        data_dir=args.data_dir,
        embedder="onnx-minilm",
        limit_queries=args.queries + args.warmup,
    )
    with app:
        embedder: Embedder = container.embedder()
        config = LookupConfig(
            retrieval=RetrievalSettings(retrieve_k=20, return_n=K, max_chunks_per_document=2),
            projection=ProjectionBudgets(max_blocks=K, max_total_chars=K * 1200),
        )
        ours: LookupKnowledge = container.lookup().with_config(config)
        ours_no_audit = LookupKnowledge(
            search=container.search(),
            transformer=container.transformer(),
            recorder=DisabledRecorder(),
            session_state=InMemorySessionState(),
            clock=container.clock(),
            embedder=embedder,
            config=config,
        )
        chunks = container.store().count()
        store = Milvus(
            embedding_function=langchain_embeddings(embedder),
            collection_name=collection,
            connection_args={"uri": app.settings.milvus_uri},
            primary_field="evidence_key",
            text_field="text",
            vector_field="dense_vector",
        )
        session = f"bench-peer-{int(time.time())}"

        def lookup(use_case: LookupKnowledge) -> Callable[[str, str], list[str]]:
            def run(qid: str, text: str) -> list[str]:
                result = use_case.execute(text, session_id=session, step_id=qid)
                return [b.document_id.rsplit("#chunk-", 1)[0] for b in result.evidence_blocks]

            return run

        def similarity(qid: str, text: str) -> list[str]:
            hits = store.similarity_search_with_score(text, k=K)
            return [str(doc.metadata["doc_id"]) for doc, _ in hits]

        def mmr(qid: str, text: str) -> list[str]:
            docs = store.max_marginal_relevance_search(text, k=K, fetch_k=2 * K)
            return [str(doc.metadata["doc_id"]) for doc in docs]

        systems: dict[str, Callable[[str, str], list[str]]] = {
            "lookup-knowledge (audit on)": lookup(ours),
            "lookup-knowledge (audit off)": lookup(ours_no_audit),
            "LangChain Milvus similarity k=10": similarity,
            "LangChain Milvus MMR k=10 fetch_k=20": mmr,
        }
        queries = list(beir.dataset.queries)
        latency: dict[str, list[float]] = {name: [] for name in systems}
        chunk_docs: dict[str, dict[str, list[str]]] = {name: {} for name in systems}
        for i, query in enumerate(queries):
            for name, system in systems.items():  # interleaved: same load for all
                t0 = time.perf_counter()
                docs = system(query.query_id, query.text)
                elapsed = (time.perf_counter() - t0) * 1000
                if i >= args.warmup:
                    latency[name].append(elapsed)
                    chunk_docs[name][query.query_id] = docs

    measured = [q.query_id for q in queries[args.warmup :]]
    qrels = {qid: dict(beir.dataset.qrels[qid]) for qid in measured}
    metrics = IrMeasuresMetrics()
    print(
        f"peer side by side: {len(measured)} SciFact train queries (after {args.warmup} "
        f"warm-up), full corpus, collection {collection} ({chunks} chunks, Milvus Lite), "
        f"all-MiniLM-L6-v2 ONNX for both, {K} chunks per result"
    )
    header = (
        f"{'system':40}{'p50 ms':>9}{'p95 ms':>9}{'mean ms':>9}"
        f"{'nDCG@10':>9}{'R@10':>8}{'docs/result':>12}"
    )
    print(header)
    for name in systems:
        run = {
            qid: run_scores(list(dict.fromkeys(docs)))
            for qid, docs in chunk_docs[name].items()
            if docs
        }
        scores = metrics.evaluate(qrels, run, ["nDCG@10", "R@10"])
        ndcg = statistics.fmean(scores[q]["nDCG@10"] for q in measured)
        recall = statistics.fmean(scores[q]["R@10"] for q in measured)
        distinct = statistics.fmean(len(set(d)) for d in chunk_docs[name].values())
        p50, p95, mean = stats(latency[name])
        print(f"{name:40}{p50:9.2f}{p95:9.2f}{mean:9.2f}{ndcg:9.4f}{recall:8.4f}{distinct:12.2f}")
    _ratio(latency, "lookup-knowledge (audit on)", "LangChain Milvus similarity k=10")
    _ratio(latency, "lookup-knowledge (audit off)", "LangChain Milvus similarity k=10")


def _ratio(latency: dict[str, list[float]], ours: str, peer: str) -> None:
    a, b = stats(latency[ours]), stats(latency[peer])
    print(f"latency ratio {ours} / {peer}: p50 {a[0] / b[0]:.2f}x, mean {a[2] / b[2]:.2f}x")


if __name__ == "__main__":
    main()
