"""``ClaimJudge`` over a natural-language-inference classifier served by Hugging Face Text
Embeddings Inference (TEI): ``POST {base_url}/predict`` with the pair (evidence span,
claim) as ``{"inputs": [premise, hypothesis], "truncate": true}``.

TEI answers with every label of the model and its score (``[{"label": "entailment",
"score": 0.91}, ...]``; a batch-shaped ``[[...]]`` is read too); the best label is the
opinion. Labels are read case-insensitively: ``entailment``/``entailed``,
``neutral``, ``contradiction``/``contradicted`` (as cross-encoder NLI models name them).
Every failure is a ``JudgeError``; the API key never appears in a message.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from lookup_knowledge.adapters.answer_check.judge import bounded_evidence, post_to_judge
from lookup_knowledge.adapters.http_client import json_headers
from lookup_knowledge.application.ports import ClaimJudge, JudgeOpinion
from lookup_knowledge.domain.errors import JudgeError

if TYPE_CHECKING:
    import httpx

_LABELS = {
    "entailment": "entailed",
    "entailed": "entailed",
    "neutral": "neutral",
    "contradiction": "contradicted",
    "contradicted": "contradicted",
}


class TeiNliClaimJudge(ClaimJudge):
    def __init__(
        self,
        *,
        base_url: str,
        model: str = "nli",
        api_key: str | None = None,
        api_key_env: str | None = None,
        timeout_s: float = 30.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise JudgeError(f"judge base URL must be http(s)://...; got {base_url!r}")
        headers = json_headers(api_key, api_key_env)
        self._url = base_url.rstrip("/") + "/predict"
        self._model = model
        import httpx  # only when a judge is configured

        self._client = httpx.Client(headers=headers, timeout=timeout_s, transport=transport)

    def close(self) -> None:
        self._client.close()

    def judge(self, claim: str, evidence: Sequence[str]) -> JudgeOpinion:
        body = {"inputs": [bounded_evidence(evidence), claim], "truncate": True}
        response = post_to_judge(self._client, self._url, body)
        try:
            return self._opinion(response.json())
        except (KeyError, IndexError, TypeError, ValueError) as error:
            raise JudgeError(f"claim judge reply is not TEI's /predict answer: {error}") from error

    def _opinion(self, data: Any) -> JudgeOpinion:
        if isinstance(data, list) and data and isinstance(data[0], list):
            data = data[0]
        if not isinstance(data, list) or not data:
            raise ValueError("expected a list of {label, score}")
        best = max(data, key=lambda item: float(item["score"]))
        raw = str(best["label"]).strip().lower()
        if raw not in _LABELS:
            raise ValueError(f"unknown label {raw!r}")
        score = float(best["score"])
        if not 0.0 <= score <= 1.0:
            raise ValueError("score must be between 0 and 1")
        label = _LABELS[raw]
        return JudgeOpinion(
            label=label, score=score, model=self._model, reason=f"NLI: {raw} ({score:.2f})"
        )
