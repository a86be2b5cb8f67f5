"""``ClaimJudge`` over an OpenAI-compatible ``POST {base_url}/chat/completions`` endpoint.

Any chat model (a hosted one, vLLM, Ollama, llama.cpp's server) is asked whether the
evidence (the claim's aligned span, bounded to about 512 tokens) entails, contradicts or
is neutral to the claim, and must answer with one JSON object ``{"label": ..., "score":
..., "reason": ...}``. With ``audit.check.judge.mode`` ``signal`` the opinion is recorded
beside the verdict; with ``veto`` it can overturn a ``supported`` verdict. Every failure (transport, status, a reply that is
not the JSON asked for) is a ``JudgeError``; the API key never appears in a message.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from lookup_knowledge.adapters.http_client import json_headers
from lookup_knowledge.application.ports import ClaimJudge, JudgeOpinion
from lookup_knowledge.domain.errors import JudgeError

if TYPE_CHECKING:
    import httpx

LABELS = ("entailed", "contradicted", "neutral")
_ALIASES = {"entailment": "entailed", "contradiction": "contradicted", "supported": "entailed"}
#: The judge sees the claim's aligned span, cut to about 512 tokens (4 characters each).
MAX_EVIDENCE_CHARS = 2_048


def bounded_evidence(evidence: Sequence[str], limit: int = MAX_EVIDENCE_CHARS) -> str:
    """The evidence a judge is given: the spans joined, cut at a word to ``limit``."""
    shown = "\n\n---\n\n".join(e.strip() for e in evidence)
    if len(shown) <= limit:
        return shown
    cut = shown[:limit]
    space = cut.rfind(" ")
    return (cut[:space] if space > limit // 2 else cut) + " …"


def post_to_judge(client: httpx.Client, url: str, body: dict[str, Any]) -> httpx.Response:
    """The judge's HTTP 200 response to ``body``, asked once (a judge is not retried);
    otherwise a ``JudgeError`` naming only the kind of failure."""
    import httpx

    try:
        response = client.post(url, json=body)
    except httpx.HTTPError as error:
        raise JudgeError(f"claim judge unreachable: {type(error).__name__}") from error
    if response.status_code != 200:
        raise JudgeError(f"claim judge answered HTTP {response.status_code}")
    return response


SYSTEM_PROMPT = (
    "You check whether evidence supports a claim. Read the evidence and the claim. "
    'Reply with one JSON object only: {"label": "entailed" | "contradicted" | "neutral", '
    '"score": a number from 0 to 1 for your confidence, "reason": one short sentence}. '
    '"entailed": the evidence states the claim; "contradicted": the evidence states '
    'something incompatible; "neutral": neither. Judge only from the evidence.'
)


class OpenAICompatibleClaimJudge(ClaimJudge):
    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        api_key: str | None = None,
        api_key_env: str | None = "OPENAI_API_KEY",
        timeout_s: float = 30.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise JudgeError(f"judge base URL must be http(s)://...; got {base_url!r}")
        if not model.strip():
            raise JudgeError("judge model must not be empty")
        headers = json_headers(api_key, api_key_env)
        self._url = base_url.rstrip("/") + "/chat/completions"
        self._model = model
        import httpx  # only when a judge is configured (it costs a start-up otherwise)

        self._client = httpx.Client(headers=headers, timeout=timeout_s, transport=transport)

    def close(self) -> None:
        self._client.close()

    def judge(self, claim: str, evidence: Sequence[str]) -> JudgeOpinion:
        shown = bounded_evidence(evidence)
        body = {
            "model": self._model,
            "temperature": 0,
            "messages": [
                {"role": "system", "content": SYSTEM_PROMPT},
                {"role": "user", "content": f"Evidence:\n{shown}\n\nClaim:\n{claim}"},
            ],
        }
        response = post_to_judge(self._client, self._url, body)
        try:
            content = response.json()["choices"][0]["message"]["content"]
            return self._opinion(content)
        except (KeyError, IndexError, TypeError, ValueError) as error:
            raise JudgeError(f"claim judge reply is not the JSON asked for: {error}") from error

    def _opinion(self, content: Any) -> JudgeOpinion:
        if not isinstance(content, str):
            raise ValueError("message content is not text")
        text = content.strip()
        if text.startswith("```"):  # some models fence their JSON
            text = text.strip("`").removeprefix("json").strip()
        start, end = text.find("{"), text.rfind("}")
        data = json.loads(text[start : end + 1] if start >= 0 else text)
        label = str(data["label"]).strip().lower()
        label = _ALIASES.get(label, label)
        if label not in LABELS:
            raise ValueError(f"unknown label {label!r}")
        score = data.get("score")
        if score is not None:
            score = float(score)
            if not 0.0 <= score <= 1.0:
                raise ValueError("score must be between 0 and 1")
        reason = data.get("reason")
        return JudgeOpinion(
            label=label,
            score=score,
            model=self._model,
            reason=reason.strip()[:300] if isinstance(reason, str) else "",
        )
