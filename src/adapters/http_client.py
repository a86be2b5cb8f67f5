"""What the adapters that call a model server over HTTP share: the embedder
(``embedders.openai_compatible``), the rerankers (``reranking.http``) and the claim judges
(``answer_check.judge``, ``answer_check.nli_judge``).

- ``json_headers``: the request headers, with ``Authorization: Bearer`` when an API key
  is given or found in its environment variable (the key never appears in a message);
- ``Retries.post``: a POST whose transient failures (timeouts, connection errors,
  408/409/429/5xx) are retried with exponential backoff and jitter, honouring
  ``Retry-After``; any other status fails at once. ``httpx`` is imported only when called
  (it costs a start-up otherwise).
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import httpx

RETRYABLE_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504})


def json_headers(
    api_key: str | None, api_key_env: str | None, extra: Mapping[str, str] | None = None
) -> dict[str, str]:
    """JSON request headers (plus ``extra``), with the bearer key: ``api_key``, else the
    variable ``api_key_env`` names; none when both are empty."""
    key = api_key if api_key is not None else (os.environ.get(api_key_env or "") or None)
    headers = {"Content-Type": "application/json", **(extra or {})}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    return headers


@dataclass(frozen=True)
class Retries:
    max_retries: int
    backoff_s: float
    max_backoff_s: float
    sleep: Callable[[float], None] = field(default=time.sleep)

    def delay(self, attempt: int, response: httpx.Response | None) -> float:
        """Seconds to wait before retry ``attempt + 1``: the server's ``Retry-After`` (in
        seconds; an HTTP date falls back to the backoff), else the backoff doubled per
        attempt and jittered to 50-100 %; never more than ``max_backoff_s``."""
        if response is not None:
            retry_after = response.headers.get("Retry-After")
            if retry_after is not None:
                try:
                    seconds = float(retry_after)
                except ValueError:
                    seconds = -1.0  # an HTTP date: fall back to the backoff
                if seconds >= 0.0:
                    return min(seconds, self.max_backoff_s)
        base = min(self.backoff_s * float(1 << attempt), self.max_backoff_s)
        return base * random.uniform(0.5, 1.0)

    def post(
        self,
        client: httpx.Client,
        url: str,
        payload: dict[str, Any],
        *,
        what: str,
        error: Callable[[str], Exception],
    ) -> httpx.Response:
        """The HTTP 200 response to ``payload``; otherwise ``error(message)`` is raised,
        the message starting with ``what`` (``"<kind> request to <url>"``)."""
        import httpx

        last_problem = ""
        for attempt in range(self.max_retries + 1):
            response: httpx.Response | None = None
            cause: BaseException | None = None
            try:
                response = client.post(url, json=payload)
            except httpx.TimeoutException as timeout:
                last_problem = f"timed out ({type(timeout).__name__})"
                cause = timeout
            except httpx.TransportError as transport:
                last_problem = f"connection failed ({type(transport).__name__}: {transport})"
                cause = transport
            else:
                if response.status_code == 200:
                    return response
                body = response.text[:300].replace("\n", " ")
                last_problem = f"HTTP {response.status_code}: {body}"
                if response.status_code not in RETRYABLE_STATUS:
                    raise error(f"{what} was rejected: {last_problem}")
            if attempt == self.max_retries:
                raise error(
                    f"{what} failed after {attempt + 1} attempt(s): {last_problem}"
                ) from cause
            self.sleep(self.delay(attempt, response))
        raise AssertionError("unreachable")  # pragma: no cover
