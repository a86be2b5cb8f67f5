"""Embedders: the ``Embedder`` port over an offline ONNX model, an OpenAI-compatible
HTTP API, and a deterministic hashing embedder for tests and smoke runs."""

from __future__ import annotations

from lookup_knowledge.adapters.embedders.hashing import HashingEmbedder
from lookup_knowledge.adapters.embedders.onnx import (
    MINILM_DIMENSION,
    MINILM_MODEL_NAME,
    OnnxMiniLMEmbedder,
    OnnxSentenceEmbedder,
)
from lookup_knowledge.adapters.embedders.openai_compatible import OpenAICompatibleEmbedder

__all__ = [
    "MINILM_DIMENSION",
    "MINILM_MODEL_NAME",
    "HashingEmbedder",
    "OnnxMiniLMEmbedder",
    "OnnxSentenceEmbedder",
    "OpenAICompatibleEmbedder",
]
