"""An embedder over any OpenAI-compatible ``POST {base_url}/embeddings`` endpoint.

Works with OpenAI, Azure-style proxies, DashScope (compatible mode), vLLM, Ollama
(``/v1``) and Hugging Face TEI. Texts are sent in batches; transient failures
(timeouts, connection errors, 408/409/429/5xx) are retried with exponential backoff
and jitter, honouring ``Retry-After``; anything else is an ``EmbeddingError`` at once.
The API key comes from the constructor or an environment variable and never appears
in an error message.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from lookup_knowledge.adapters.http_client import RETRYABLE_STATUS as RETRYABLE_STATUS
from lookup_knowledge.adapters.http_client import Retries, json_headers
from lookup_knowledge.application.ports import Embedder, EmbedderIdentity
from lookup_knowledge.domain.errors import EmbeddingError

if TYPE_CHECKING:
    import httpx


class OpenAICompatibleEmbedder(Embedder):
    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        api_key: str | None = None,
        api_key_env: str | None = "OPENAI_API_KEY",
        dimension: int | None = None,
        request_dimensions: bool = False,
        batch_size: int = 64,
        timeout_s: float = 30.0,
        max_retries: int = 3,
        backoff_s: float = 0.5,
        max_backoff_s: float = 8.0,
        normalize: bool = True,
        headers: Mapping[str, str] | None = None,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise EmbeddingError(f"embedder base URL must be http(s)://...; got {base_url!r}")
        if not model.strip():
            raise EmbeddingError("embedder model must not be empty")
        if dimension is not None and dimension < 1:
            raise EmbeddingError("embedder dimension must be >= 1")
        if request_dimensions and dimension is None:
            raise EmbeddingError("request_dimensions needs an explicit dimension")
        if batch_size < 1 or max_retries < 0 or timeout_s <= 0 or backoff_s < 0:
            raise EmbeddingError(
                "batch_size >= 1, max_retries >= 0, timeout_s > 0, backoff_s >= 0 required"
            )
        self._url = base_url.rstrip("/") + "/embeddings"
        self._model = model
        self._dimension = dimension
        self._request_dimensions = request_dimensions
        self._batch_size = batch_size
        self._retries = Retries(max_retries, backoff_s, max_backoff_s, sleep)
        self._normalize = normalize
        self._lock = threading.Lock()
        all_headers = json_headers(api_key, api_key_env, headers)
        import httpx  # only when this embedder is configured (it costs a start-up otherwise)

        self._client = httpx.Client(
            timeout=httpx.Timeout(timeout_s), headers=all_headers, transport=transport
        )

    @property
    def name(self) -> str:
        return f"openai-compatible:{self._model}"

    @property
    def identity(self) -> EmbedderIdentity:
        return EmbedderIdentity("openai", self._model, self.dimension, self._normalize)

    @property
    def dimension(self) -> int:
        if self._dimension is None:
            with self._lock:
                if self._dimension is None:
                    probe = self._request(["dimension probe"])
                    self._dimension = len(probe[0])
        return self._dimension

    def close(self) -> None:
        self._client.close()

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        for text in texts:
            if not isinstance(text, str):
                raise EmbeddingError(f"cannot embed {type(text).__name__}; expected str")
        out: list[list[float]] = []
        for start in range(0, len(texts), self._batch_size):
            batch = list(texts[start : start + self._batch_size])
            vectors = self._request(batch)
            if self._dimension is None:
                with self._lock:
                    self._dimension = self._dimension or len(vectors[0])
            for vector in vectors:
                if len(vector) != self._dimension:
                    raise EmbeddingError(
                        f"{self.name} returned a {len(vector)}-dim vector; expected "
                        f"{self._dimension}"
                    )
            out.extend(vectors)
        return out

    # ------------------------------------------------------------------ HTTP

    def _payload(self, batch: list[str]) -> dict[str, Any]:
        payload: dict[str, Any] = {"model": self._model, "input": batch, "encoding_format": "float"}
        if self._request_dimensions:
            payload["dimensions"] = self._dimension
        return payload

    def _request(self, batch: list[str]) -> list[list[float]]:
        response = self._retries.post(
            self._client,
            self._url,
            self._payload(batch),
            what=f"embedding request to {self._url} (model {self._model})",
            error=EmbeddingError,
        )
        return self._parse(response, len(batch))

    def _parse(self, response: httpx.Response, expected: int) -> list[list[float]]:
        try:
            body = response.json()
            items = body["data"]
            if not isinstance(items, list):
                raise TypeError("data is not a list")
            if all(isinstance(i, dict) and "index" in i for i in items):
                items = sorted(items, key=lambda i: int(i["index"]))
            vectors = [[float(x) for x in item["embedding"]] for item in items]
        except (ValueError, KeyError, TypeError) as error:
            raise EmbeddingError(
                f"embedding response from {self._url} is not OpenAI-shaped: {error}"
            ) from error
        if len(vectors) != expected:
            raise EmbeddingError(
                f"embedding response from {self._url} has {len(vectors)} vectors for "
                f"{expected} inputs"
            )
        out: list[list[float]] = []
        for vector in vectors:
            if not vector or not all(math.isfinite(x) for x in vector):
                raise EmbeddingError(f"embedding response from {self._url} has an invalid vector")
            if self._normalize:
                norm = math.sqrt(sum(x * x for x in vector))
                if norm > 0:
                    vector = [x / norm for x in vector]
            out.append(vector)
        return out
