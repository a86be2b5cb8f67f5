"""``Reranker``: the port of an optional cross-encoder that scores (query, text) pairs.

Served over HTTP by an adapter (Text Embeddings Inference ``/rerank``, a
Cohere-compatible ``/v2/rerank``); the lookup's reranker stage uses it when one is
configured and answers without it when it fails (``RerankerError``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence


class Reranker(ABC):
    @property
    @abstractmethod
    def provider(self) -> str:
        """Who scores, for the trace: the API and the model (``tei:bge-reranker-base``)."""

    @abstractmethod
    def rerank(self, query: str, texts: Sequence[str]) -> list[float]:
        """One score per text, in the order of ``texts``. Raises ``RerankerError`` when
        the server cannot give them all (unreachable, timed out, refused, misshapen)."""

    def close(self) -> None:  # noqa: B027 - adapters without a client have nothing to close
        """Release what the adapter holds (its HTTP client)."""
