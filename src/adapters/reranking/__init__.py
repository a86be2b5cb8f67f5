"""Rerankers served over HTTP: Text Embeddings Inference and the Cohere-compatible API."""

from lookup_knowledge.adapters.reranking.http import CohereCompatibleReranker, TeiReranker

__all__ = ["CohereCompatibleReranker", "TeiReranker"]
