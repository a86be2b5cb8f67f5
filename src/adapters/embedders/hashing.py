"""A deterministic feature-hashing embedder: no model, no network, stable across runs.

Each lower-cased word (and each word bigram) is hashed with blake2b into one of
``dimension`` buckets with a sign; the vector is L2-normalised. Texts that share words
are closer than texts that do not, which is enough for tests, smoke runs and
benchmarks that must exclude the cost of a real model. It is not a semantic model.
"""

from __future__ import annotations

import hashlib
import itertools
import math
import re
from collections.abc import Sequence

from lookup_knowledge.application.ports import Embedder, EmbedderIdentity
from lookup_knowledge.domain.errors import EmbeddingError

_WORD = re.compile(r"\w+", re.UNICODE)


class HashingEmbedder(Embedder):
    def __init__(self, dimension: int = 64, *, bigrams: bool = True) -> None:
        if dimension < 2:
            raise EmbeddingError("HashingEmbedder dimension must be >= 2")
        self._dimension = dimension
        self._bigrams = bigrams

    @property
    def dimension(self) -> int:
        return self._dimension

    @property
    def name(self) -> str:
        return f"hashing-{self._dimension}{'-bigrams' if self._bigrams else ''}"

    @property
    def identity(self) -> EmbedderIdentity:
        return EmbedderIdentity("hashing", self.name, self._dimension, normalised=True)

    def _features(self, text: str) -> list[str]:
        words = [w.lower() for w in _WORD.findall(text)]
        features = list(words)
        if self._bigrams:
            features.extend(f"{a} {b}" for a, b in itertools.pairwise(words))
        return features

    def _embed(self, text: str) -> list[float]:
        if not isinstance(text, str):
            raise EmbeddingError(f"cannot embed {type(text).__name__}; expected str")
        vector = [0.0] * self._dimension
        for feature in self._features(text):
            digest = hashlib.blake2b(feature.encode("utf-8"), digest_size=8).digest()
            value = int.from_bytes(digest, "little")
            bucket = value % self._dimension
            sign = 1.0 if (value >> 63) & 1 else -1.0
            vector[bucket] += sign
        norm = math.sqrt(sum(v * v for v in vector))
        if norm == 0.0:
            # No word at all: a fixed unit vector keeps cosine defined.
            vector[0] = 1.0
            return vector
        return [v / norm for v in vector]

    def embed_query(self, text: str) -> list[float]:
        return self._embed(text)

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        return [self._embed(t) for t in texts]
