"""Retrieval width, return width and the per-document cap (``docs/architecture.md``, Evidence identity).

``rag.retrieve-k`` is the recall width asked of the search engine; ``rag.return-n`` the
most evidence blocks a lookup returns after post-processing. The legacy ``rag.top-k`` is
used for both only when neither new key is set.
"""

from __future__ import annotations

from dataclasses import dataclass

from lookup_knowledge.domain.errors import ConfigurationError

DEFAULT_RETRIEVE_K = 20
DEFAULT_RETURN_N = 5
DEFAULT_MAX_CHUNKS_PER_DOCUMENT = 2
MAX_RETRIEVE_K = 1000
MAX_RETURN_N = 100
MAX_CHUNKS_PER_DOCUMENT_BOUND = 100
#: Per search mode, the calibrated relevance the best hit must reach for a lookup to find
#: evidence: the 3rd percentile of the best relevance of the answerable train/dev questions
#: of Cranfield and SciFact pooled, rounded down (benchmarks/README.md, "Calibrated
#: relevance"). One relevance means one share judged relevant in every mode, but the
#: modes do not find their best hit equally well, so each keeps the answerable questions
#: it can find.
DEFAULT_MIN_RELEVANCE_DENSE = 0.02
DEFAULT_MIN_RELEVANCE_SPARSE = 0.02
DEFAULT_MIN_RELEVANCE_HYBRID = 0.03


def _whole(key: str, value: object, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigurationError(key, value, "must be a whole number")
    if not low <= value <= high:
        raise ConfigurationError(key, value, f"must be between {low} and {high}")
    return value


@dataclass(frozen=True, slots=True)
class RetrievalSettings:
    """Validated widths. ``max_chunks_per_document`` None means no cap."""

    retrieve_k: int = DEFAULT_RETRIEVE_K
    return_n: int = DEFAULT_RETURN_N
    max_chunks_per_document: int | None = DEFAULT_MAX_CHUNKS_PER_DOCUMENT
    #: ``rag.min-relevance``: one threshold for every mode when set; None = per mode.
    min_relevance: float | None = None
    min_relevance_dense: float = DEFAULT_MIN_RELEVANCE_DENSE
    min_relevance_sparse: float = DEFAULT_MIN_RELEVANCE_SPARSE
    min_relevance_hybrid: float = DEFAULT_MIN_RELEVANCE_HYBRID

    def __post_init__(self) -> None:
        _whole("rag.retrieve-k", self.retrieve_k, 1, MAX_RETRIEVE_K)
        _whole("rag.return-n", self.return_n, 1, MAX_RETURN_N)
        if self.return_n > self.retrieve_k:
            raise ConfigurationError(
                "rag.return-n",
                self.return_n,
                f"must be <= rag.retrieve-k ({self.retrieve_k})",
            )
        if self.max_chunks_per_document is not None:
            _whole(
                "rag.max-chunks-per-document",
                self.max_chunks_per_document,
                1,
                MAX_CHUNKS_PER_DOCUMENT_BOUND,
            )
        for key, mr in (
            ("rag.min-relevance", self.min_relevance),
            ("rag.relevance.min-dense", self.min_relevance_dense),
            ("rag.relevance.min-sparse", self.min_relevance_sparse),
            ("rag.relevance.min-hybrid", self.min_relevance_hybrid),
        ):
            if mr is None and key == "rag.min-relevance":
                continue
            if isinstance(mr, bool) or not isinstance(mr, int | float) or not 0.0 <= mr <= 1.0:
                raise ConfigurationError(key, mr, "must be a number in [0, 1]")

    def min_relevance_for(self, mode: str) -> float:
        """The threshold of a search mode (``dense``, ``sparse`` or ``hybrid``):
        ``rag.min-relevance`` when set, otherwise the mode's own."""
        if self.min_relevance is not None:
            return self.min_relevance
        by_mode = {
            "dense": self.min_relevance_dense,
            "sparse": self.min_relevance_sparse,
            "hybrid": self.min_relevance_hybrid,
        }
        if mode not in by_mode:
            raise ValueError(f"unknown search mode {mode!r}")
        return by_mode[mode]

    @classmethod
    def resolve(
        cls,
        *,
        retrieve_k: int | None = None,
        return_n: int | None = None,
        top_k: int | None = None,
        max_chunks_per_document: int | None = DEFAULT_MAX_CHUNKS_PER_DOCUMENT,
        min_relevance: float | None = None,
        min_relevance_dense: float = DEFAULT_MIN_RELEVANCE_DENSE,
        min_relevance_sparse: float = DEFAULT_MIN_RELEVANCE_SPARSE,
        min_relevance_hybrid: float = DEFAULT_MIN_RELEVANCE_HYBRID,
    ) -> RetrievalSettings:
        """Apply the legacy fallback, then validate.

        ``max_chunks_per_document`` of 0 turns the cap off (stored as None).
        """
        if top_k is not None and retrieve_k is None and return_n is None:
            legacy = _whole("rag.top-k", top_k, 1, MAX_RETURN_N)
            retrieve_k, return_n = legacy, legacy
        if max_chunks_per_document == 0:
            max_chunks_per_document = None
        # A key left unset follows the one that was set, so `retrieve-k=3` alone is valid.
        if retrieve_k is None and return_n is not None and isinstance(return_n, int):
            retrieve_k = max(DEFAULT_RETRIEVE_K, return_n)
        if return_n is None and retrieve_k is not None and isinstance(retrieve_k, int):
            return_n = min(DEFAULT_RETURN_N, max(retrieve_k, 1))
        return cls(
            retrieve_k=DEFAULT_RETRIEVE_K if retrieve_k is None else retrieve_k,
            return_n=DEFAULT_RETURN_N if return_n is None else return_n,
            max_chunks_per_document=max_chunks_per_document,
            min_relevance=min_relevance,
            min_relevance_dense=min_relevance_dense,
            min_relevance_sparse=min_relevance_sparse,
            min_relevance_hybrid=min_relevance_hybrid,
        )
