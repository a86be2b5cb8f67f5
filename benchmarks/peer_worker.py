"""One system of ``bench_peer.py``, run as a worker process in that system's own venv.

    <venv>/bin/python benchmarks/peer_worker.py SYSTEM --data DIR --work DIR

The worker builds its own store from the prepared chunks (``DIR/chunks.jsonl``: id,
doc_id, text per line; ``DIR/vectors.npy``: their float32 vectors, same order;
``DIR/meta.json``: dimension, index and search parameters, result size), prints one JSON
line ``{"ready": ...}`` on stdout, then answers one query per stdin line
``{"text": ..., "vector": [...]}`` with ``{"ms": ..., "docs": [doc ids, best first]}``.
``ms`` times the system's own search call only: the query vector arrives with the
request, and the systems that take text (LangChain ``similarity_search``, the LlamaIndex
retriever, the Haystack pipeline, lookup-knowledge) get it from a fixed embedder that
returns that vector, so query embedding is excluded everywhere. Anything a library
prints goes to stderr; stdout carries the protocol only.

Only the standard library is imported here at module level: each system's imports run
inside its builder, in its own venv (see ``PEERS`` in bench_peer.py for the pins).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

Search = Callable[[str, list[float]], list[str]]

COLLECTION = "bench_peer"
BATCH = 1000
#: Run at the end (stdin closed): e.g. closing the LookupApp, which drains its audit.
CLEANUP: list[Callable[[], object]] = []


class Current:
    """The query vector of the request being served (what the fixed embedders return)."""

    vector: ClassVar[list[float]] = []


def load(data: Path) -> tuple[dict[str, Any], list[dict[str, str]], Any]:
    import numpy as np

    meta = json.loads((data / "meta.json").read_text(encoding="utf-8"))
    with (data / "chunks.jsonl").open(encoding="utf-8") as lines:
        chunks = [json.loads(line) for line in lines]
    vectors = np.load(data / "vectors.npy")
    if len(chunks) != len(vectors):
        raise SystemExit(f"{data}: {len(chunks)} chunks but {len(vectors)} vectors")
    return meta, chunks, vectors


def hnsw(meta: dict[str, Any]) -> dict[str, Any]:
    return {"M": meta["index_m"], "efConstruction": meta["index_ef_construction"]}


def seal(client: Any, collection: str) -> None:
    """What lookup-knowledge's ``seal()`` does after an ingest on Lite: flush, then
    release and load so every segment is indexed before the first search (unflushed
    rows are searched far slower; an unindexed segment is searched exactly)."""
    client.flush(collection)
    client.release_collection(collection)
    client.load_collection(collection)
    for name in client.list_indexes(collection):  # the log shows each store's index
        print(f"index {name}: {client.describe_index(collection, name)}", file=sys.stderr)


# --------------------------------------------------------------------------- floor


def build_numpy(
    meta: dict[str, Any], chunks: list[dict[str, str]], vectors: Any, work: Path
) -> Search:
    import numpy as np

    matrix = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    doc_ids = [c["doc_id"] for c in chunks]
    k = int(meta["k"])

    def search(text: str, vector: list[float]) -> list[str]:
        scores = matrix @ np.asarray(vector, dtype=np.float32)
        top = np.argpartition(-scores, k)[:k]
        return [doc_ids[i] for i in top[np.argsort(-scores[top])]]

    return search


def build_pymilvus(
    meta: dict[str, Any], chunks: list[dict[str, str]], vectors: Any, work: Path
) -> Search:
    from pymilvus import DataType, MilvusClient

    client = MilvusClient(str(work / "milvus.db"))
    schema = client.create_schema(auto_id=False)
    schema.add_field("id", DataType.VARCHAR, is_primary=True, max_length=2200)
    schema.add_field("doc_id", DataType.VARCHAR, max_length=2048)
    schema.add_field("text", DataType.VARCHAR, max_length=65535)
    schema.add_field("vector", DataType.FLOAT_VECTOR, dim=int(meta["dimension"]))
    index = client.prepare_index_params()
    index.add_index(field_name="vector", index_type="HNSW", metric_type="COSINE", params=hnsw(meta))
    client.create_collection(COLLECTION, schema=schema, index_params=index)
    for start in range(0, len(chunks), BATCH):
        rows = [
            {"id": c["id"], "doc_id": c["doc_id"], "text": c["text"], "vector": v.tolist()}
            for c, v in zip(
                chunks[start : start + BATCH], vectors[start : start + BATCH], strict=True
            )
        ]
        client.insert(COLLECTION, rows)
    seal(client, COLLECTION)
    params = {"metric_type": "COSINE", "params": {"ef": int(meta["ef"])}}
    k = int(meta["k"])

    def search(text: str, vector: list[float]) -> list[str]:
        hits = client.search(
            COLLECTION,
            [vector],
            limit=k,
            output_fields=["doc_id", "text"],
            search_params=params,
        )[0]
        return [str(hit["entity"]["doc_id"]) for hit in hits]

    return search


# --------------------------------------------------------------------------- LangChain


def build_langchain(
    meta: dict[str, Any], chunks: list[dict[str, str]], vectors: Any, work: Path
) -> Search:
    from langchain_core.embeddings import Embeddings
    from langchain_milvus import Milvus

    class Fixed(Embeddings):
        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            raise RuntimeError("documents arrive with their vectors")

        def embed_query(self, text: str) -> list[float]:
            return Current.vector

    store = Milvus(
        embedding_function=Fixed(),
        collection_name=COLLECTION,
        connection_args={"uri": str(work / "milvus.db")},
        index_params={"index_type": "HNSW", "metric_type": "COSINE", "params": hnsw(meta)},
        search_params={"metric_type": "COSINE", "params": {"ef": int(meta["ef"])}},
        auto_id=False,
        drop_old=True,
    )
    for start in range(0, len(chunks), BATCH):
        part = chunks[start : start + BATCH]
        store.add_embeddings(
            texts=[c["text"] for c in part],
            embeddings=[v.tolist() for v in vectors[start : start + BATCH]],
            metadatas=[{"doc_id": c["doc_id"]} for c in part],
            ids=[c["id"] for c in part],
        )
    seal(store.client, COLLECTION)
    k = int(meta["k"])

    def search(text: str, vector: list[float]) -> list[str]:
        return [str(doc.metadata["doc_id"]) for doc in store.similarity_search(text, k=k)]

    return search


# --------------------------------------------------------------------------- LlamaIndex


def build_llamaindex(
    meta: dict[str, Any], chunks: list[dict[str, str]], vectors: Any, work: Path
) -> Search:
    from llama_index.core import Settings, VectorStoreIndex
    from llama_index.core.embeddings import BaseEmbedding
    from llama_index.core.schema import TextNode
    from llama_index.vector_stores.milvus import MilvusVectorStore

    class Fixed(BaseEmbedding):
        def _get_query_embedding(self, query: str) -> list[float]:
            return Current.vector

        async def _aget_query_embedding(self, query: str) -> list[float]:
            return Current.vector

        def _get_text_embedding(self, text: str) -> list[float]:
            raise RuntimeError("documents arrive with their vectors")

    Settings.llm = None
    Settings.embed_model = Fixed()
    store = MilvusVectorStore(
        uri=str(work / "milvus.db"),
        collection_name=COLLECTION,
        dim=int(meta["dimension"]),
        overwrite=True,
        similarity_metric="COSINE",
        index_config={"index_type": "HNSW", **hnsw(meta)},
        # passed to MilvusClient.search as its search_params, as is
        search_config={"metric_type": "COSINE", "params": {"ef": int(meta["ef"])}},
    )
    for start in range(0, len(chunks), BATCH):
        store.add(
            [
                TextNode(
                    id_=c["id"],
                    text=c["text"],
                    embedding=v.tolist(),
                    metadata={"doc_id": c["doc_id"]},
                )
                for c, v in zip(
                    chunks[start : start + BATCH], vectors[start : start + BATCH], strict=True
                )
            ]
        )
    seal(store.client, COLLECTION)
    retriever = VectorStoreIndex.from_vector_store(
        store, embed_model=Settings.embed_model
    ).as_retriever(similarity_top_k=int(meta["k"]))

    def search(text: str, vector: list[float]) -> list[str]:
        return [str(hit.node.metadata["doc_id"]) for hit in retriever.retrieve(text)]

    return search


# --------------------------------------------------------------------------- Haystack


def _haystack_store(
    meta: dict[str, Any], chunks: list[dict[str, str]], vectors: Any, work: Path
) -> Any:
    from haystack import Document
    from milvus_haystack import MilvusDocumentStore

    store = MilvusDocumentStore(
        connection_args={"uri": str(work / "milvus.db")},
        collection_name=COLLECTION,
        drop_old=True,
        index_params={"index_type": "HNSW", "metric_type": "COSINE", "params": hnsw(meta)},
        search_params={"metric_type": "COSINE", "params": {"ef": int(meta["ef"])}},
    )
    for start in range(0, len(chunks), BATCH):
        store.write_documents(
            [
                Document(
                    id=c["id"],
                    content=c["text"],
                    embedding=v.tolist(),
                    meta={"doc_id": c["doc_id"]},
                )
                for c, v in zip(
                    chunks[start : start + BATCH], vectors[start : start + BATCH], strict=True
                )
            ]
        )
    seal(store.client, COLLECTION)
    return store


def build_haystack(
    meta: dict[str, Any], chunks: list[dict[str, str]], vectors: Any, work: Path
) -> Search:
    from milvus_haystack import MilvusEmbeddingRetriever

    retriever = MilvusEmbeddingRetriever(
        document_store=_haystack_store(meta, chunks, vectors, work), top_k=int(meta["k"])
    )

    def search(text: str, vector: list[float]) -> list[str]:
        return [str(d.meta["doc_id"]) for d in retriever.run(query_embedding=vector)["documents"]]

    return search


def build_haystack_pipeline(
    meta: dict[str, Any], chunks: list[dict[str, str]], vectors: Any, work: Path
) -> Search:
    """Text in, documents out, as a Haystack user wires it: a text embedder component
    (here one returning the request's vector) feeding the retriever."""
    from haystack import Pipeline, component
    from milvus_haystack import MilvusEmbeddingRetriever

    @component
    class FixedTextEmbedder:
        @component.output_types(embedding=list[float])
        def run(self, text: str) -> dict[str, list[float]]:
            return {"embedding": Current.vector}

    pipeline = Pipeline()
    pipeline.add_component("embedder", FixedTextEmbedder())
    pipeline.add_component(
        "retriever",
        MilvusEmbeddingRetriever(
            document_store=_haystack_store(meta, chunks, vectors, work), top_k=int(meta["k"])
        ),
    )
    pipeline.connect("embedder.embedding", "retriever.query_embedding")

    def search(text: str, vector: list[float]) -> list[str]:
        out = pipeline.run({"embedder": {"text": text}})
        return [str(d.meta["doc_id"]) for d in out["retriever"]["documents"]]

    return search


# --------------------------------------------------------------------------- lookup-knowledge


def _lookup_knowledge(audit: bool) -> Callable[..., Search]:
    def build(
        meta: dict[str, Any], chunks: list[dict[str, str]], vectors: Any, work: Path
    ) -> Search:
        """lookup-knowledge through its public API (``create_app`` -> ``LookupApp``) on a
        copy of the collection its own ingest built (the chunks the peers get are exported
        from it), with the container's embedder replaced by one returning the request's
        vector (``create_app(container=...)`` is the documented way to swap adapters)."""
        from dependency_injector import providers

        from lookup_knowledge.adapters.api import create_app
        from lookup_knowledge.adapters.config import load_settings
        from lookup_knowledge.adapters.container import Container
        from lookup_knowledge.application.ports import Embedder, EmbedderIdentity

        identity = EmbedderIdentity(**meta["identity"])

        class Fixed(Embedder):
            @property
            def dimension(self) -> int:
                return identity.dimension

            @property
            def name(self) -> str:
                return identity.model

            @property
            def identity(self) -> EmbedderIdentity:
                return identity

            def embed_query(self, text: str) -> list[float]:
                return Current.vector

            def embed_documents(self, texts: Any) -> list[list[float]]:
                raise RuntimeError("the collection is built already")

        source = Path(meta["lookup_knowledge_milvus"])
        milvus = work / "milvus.db"
        shutil.copytree(source, milvus, ignore=shutil.ignore_patterns("LOCK"))
        k = int(meta["k"])
        settings = load_settings(
            overrides={
                "data-dir": str(work),
                "milvus.uri": str(milvus),
                "milvus.collection": meta["collection"],
                "milvus.index.m": meta["index_m"],
                "milvus.index.ef-construction": meta["index_ef_construction"],
                "milvus.search-ef": meta["ef"],
                "audit.enabled": audit,
                "rag.search-mode": "dense",
                "rag.retrieve-k": meta["retrieve_k"],
                "rag.return-n": k,
                "rag.max-chunks-per-document": 2,
                "rag.projection.max-blocks": k,
                "rag.projection.max-total-chars": k * 1200,
            }
        ).settings
        container = Container(settings=settings)
        container.embedder.override(providers.Object(Fixed()))
        app = create_app(settings, container=container)
        CLEANUP.append(app.close)
        session = f"bench-peer-{os.getpid()}"
        step = iter(range(1, 1 << 62))

        def search(text: str, vector: list[float]) -> list[str]:
            result = app.lookup_result(text, session_id=session, step_id=str(next(step)))
            return [b.document_id.rsplit("#chunk-", 1)[0] for b in result.evidence_blocks]

        return search

    return build


BUILDERS: dict[str, Callable[..., Search]] = {
    "numpy": build_numpy,
    "pymilvus": build_pymilvus,
    "langchain": build_langchain,
    "llamaindex": build_llamaindex,
    "haystack": build_haystack,
    "haystack-pipeline": build_haystack_pipeline,
    "lookup-knowledge-audit-on": _lookup_knowledge(audit=True),
    "lookup-knowledge-audit-off": _lookup_knowledge(audit=False),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("system", choices=sorted(BUILDERS))
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--work", type=Path, required=True)
    args = parser.parse_args()

    # The protocol owns the real stdout; whatever a library prints goes to stderr.
    protocol = os.fdopen(os.dup(1), "w", encoding="utf-8", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr

    def send(message: dict[str, Any]) -> None:
        protocol.write(json.dumps(message) + "\n")
        protocol.flush()

    if args.work.exists():
        shutil.rmtree(args.work)
    args.work.mkdir(parents=True)
    started = time.perf_counter()
    meta, chunks, vectors = load(args.data)
    try:
        search = BUILDERS[args.system](meta, chunks, vectors, args.work)
    except Exception as error:
        send(
            {"error": f"{args.system}: building the store failed: {type(error).__name__}: {error}"}
        )
        raise
    send({"ready": True, "build_s": round(time.perf_counter() - started, 2), "pid": os.getpid()})
    for line in sys.stdin:
        request = json.loads(line)
        Current.vector = request["vector"]
        try:
            t0 = time.perf_counter()
            docs = search(request["text"], Current.vector)
            ms = (time.perf_counter() - t0) * 1000
        except Exception as error:
            send({"error": f"{args.system}: {type(error).__name__}: {error}"})
            raise
        send({"ms": ms, "docs": docs})
    for cleanup in CLEANUP:
        cleanup()


if __name__ == "__main__":
    main()
