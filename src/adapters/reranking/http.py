"""``Reranker`` adapters over HTTP, for the two APIs rerank servers speak.

- ``TeiReranker``: Hugging Face Text Embeddings Inference, ``POST {url}/rerank`` with
  ``{"query", "texts", "raw_scores", "truncate"}``; the answer is a list of
  ``{"index", "score"}`` (plus ``text`` when asked, ignored).
- ``CohereCompatibleReranker``: ``POST {url}/v2/rerank`` (Cohere, vLLM, Infinity,
  Jina-style proxies) with ``{"model", "query", "documents", "top_n"}``; the answer is
  ``{"results": [{"index", "relevance_score"}, ...]}`` (plus ``id``, ``meta``, ``usage``
  or a ``document`` echo, ignored).

Both keep the embedder's HTTP habits (``adapters.http_client``): one
``httpx`` client with a timeout, transient failures (timeouts, connection errors,
408/409/429/5xx) retried with backoff and jitter honouring ``Retry-After``, anything else
a ``RerankerError`` at once; the API key comes from the constructor or an environment
variable and never appears in a message. Scores come back in the order of the texts
sent, whatever order the server sorted them in.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from lookup_knowledge.adapters.http_client import RETRYABLE_STATUS as RETRYABLE_STATUS
from lookup_knowledge.adapters.http_client import Retries, json_headers
from lookup_knowledge.application.ports import Reranker
from lookup_knowledge.domain.errors import RerankerError

if TYPE_CHECKING:
    import httpx


class _HttpReranker(Reranker):
    api = ""
    path = ""

    def __init__(
        self,
        *,
        url: str,
        model: str = "",
        api_key: str | None = None,
        api_key_env: str | None = "RERANK_API_KEY",
        timeout_s: float = 10.0,
        max_retries: int = 1,
        backoff_s: float = 0.2,
        max_backoff_s: float = 2.0,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if not url.startswith(("http://", "https://")):
            raise RerankerError(f"reranker URL must be http(s)://...; got {url!r}")
        if max_retries < 0 or timeout_s <= 0 or backoff_s < 0:
            raise RerankerError("max_retries >= 0, timeout_s > 0, backoff_s >= 0 required")
        base = url.rstrip("/")
        self._url = base if base.endswith(self.path) else base + self.path
        self._model = model
        headers = json_headers(api_key, api_key_env)
        self._retries = Retries(max_retries, backoff_s, max_backoff_s, sleep)
        import httpx  # only when a reranker is configured (it costs a start-up otherwise)

        self._client = httpx.Client(
            timeout=httpx.Timeout(timeout_s), headers=headers, transport=transport
        )

    @property
    def provider(self) -> str:
        return f"{self.api}:{self._model}" if self._model else self.api

    def close(self) -> None:
        self._client.close()

    #: Texts per request (TEI refuses more than its ``--max-client-batch-size``, 32 by
    #: default); None: all in one.
    batch_size: int | None = None

    def rerank(self, query: str, texts: Sequence[str]) -> list[float]:
        step = self.batch_size or max(len(texts), 1)
        scores: list[float] = []
        for start in range(0, len(texts), step):
            batch = list(texts[start : start + step])
            by_index = self._scores(self._request(self._payload(query, batch)))
            for i in range(len(batch)):
                score = by_index.get(i)
                if score is None:
                    raise RerankerError(
                        f"{self.api} rerank response from {self._url} has no score for text "
                        f"{start + i} of {len(texts)}"
                    )
                scores.append(score)
        return scores

    # ------------------------------------------------------------------ per API

    def _payload(self, query: str, texts: list[str]) -> dict[str, Any]:
        raise NotImplementedError

    def _items(self, body: Any) -> Any:
        raise NotImplementedError

    score_field = "score"

    # ------------------------------------------------------------------ HTTP

    def _scores(self, body: Any) -> dict[int, float]:
        try:
            items = self._items(body)
            if not isinstance(items, list):
                raise TypeError("the results are not a list")
            out: dict[int, float] = {}
            for item in items:
                index = item["index"]
                if isinstance(index, bool) or not isinstance(index, int):
                    raise TypeError(f"index {index!r} is not an integer")
                score = float(item[self.score_field])
                if not math.isfinite(score):
                    raise ValueError(f"score {score!r} is not finite")
                out[index] = score
        except (KeyError, TypeError, ValueError) as error:
            raise RerankerError(
                f"{self.api} rerank response from {self._url} is not shaped as expected: "
                f"{type(error).__name__}: {error}"
            ) from error
        return out

    def _request(self, payload: dict[str, Any]) -> Any:
        response = self._retries.post(
            self._client,
            self._url,
            payload,
            what=f"{self.api} rerank request to {self._url}",
            error=RerankerError,
        )
        try:
            return response.json()
        except ValueError as error:
            raise RerankerError(
                f"{self.api} rerank response from {self._url} is not JSON"
            ) from error


class TeiReranker(_HttpReranker):
    """Text Embeddings Inference serving a cross-encoder (``--model-id BAAI/bge-reranker-base``).

    ``raw_scores``: ask for the logits instead of the sigmoid (then set ``rag.rerank.logits``);
    ``truncate``: texts longer than the model's window are cut by the server, not refused.
    """

    api = "tei"
    path = "/rerank"

    def __init__(self, *, raw_scores: bool = False, batch_size: int = 32, **options: Any) -> None:
        super().__init__(**options)
        if batch_size < 1:
            raise RerankerError("batch_size must be >= 1")
        self._raw_scores = raw_scores
        self.batch_size = batch_size

    def _payload(self, query: str, texts: list[str]) -> dict[str, Any]:
        return {
            "query": query,
            "texts": texts,
            "raw_scores": self._raw_scores,
            "truncate": True,
        }

    def _items(self, body: Any) -> Any:
        # TEI answers a bare list; tolerate a proxy that wraps it.
        return body.get("results", body) if isinstance(body, dict) else body


class CohereCompatibleReranker(_HttpReranker):
    """The Cohere v2 rerank API as vLLM (``vllm serve --task score``), Infinity and
    others serve it. ``top_n`` is the number of texts: every text gets its score."""

    api = "cohere"
    path = "/v2/rerank"
    score_field = "relevance_score"

    def _payload(self, query: str, texts: list[str]) -> dict[str, Any]:
        return {"model": self._model, "query": query, "documents": texts, "top_n": len(texts)}

    def _items(self, body: Any) -> Any:
        if not isinstance(body, dict):
            raise TypeError("the response is not a JSON object")
        return body["results"]
