"""``FakeReranker``: scores texts by a table of words, or fails as told."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from lookup_knowledge.application.ports import Reranker
from lookup_knowledge.domain.errors import RerankerError


class FakeReranker(Reranker):
    """A text's score is the highest score of the words of ``scores`` it contains
    (``default`` for none); ``failure`` is raised instead when set."""

    def __init__(
        self,
        scores: Mapping[str, float] | None = None,
        *,
        default: float = 0.0,
        failure: Exception | None = None,
        name: str = "fake:cross-encoder",
    ) -> None:
        self.scores = dict(scores or {})
        self.default = default
        self.failure = failure
        self.name = name
        self.calls: list[tuple[str, list[str]]] = []

    @property
    def provider(self) -> str:
        return self.name

    def rerank(self, query: str, texts: Sequence[str]) -> list[float]:
        self.calls.append((query, list(texts)))
        if self.failure is not None:
            raise self.failure
        return [
            max((s for w, s in self.scores.items() if w in text), default=self.default)
            for text in texts
        ]


def timed_out() -> RerankerError:
    return RerankerError("tei rerank request to http://127.0.0.1:9/rerank failed: timed out")
