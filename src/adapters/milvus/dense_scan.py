"""A half-precision scan of every vector with an exact re-rank: the dense index's path
between the rows it scores in float32 (``EXACT_ROWS``) and those it leaves to the graph.

Why: past a few ten thousand rows HNSW misses part of the exact top-k on near-uniform
vectors (recall@50 0.75 at 100k synthetic chunks), while a scan of float16 codes reads
half the bytes of float32 and is as fast as the graph there (benchmarks/README.md,
``bench_dense_libraries.py``). The scan is not approximate in what it returns: each
float16 score is within ``error_bound`` of the exact cosine (unit vectors), so once the
exact re-rank of the ``OVERFETCH * k`` best codes puts its k-th score at least the bound
above the last code taken, no row left out can beat it. When that proof fails (many rows
tied within the bound), ``top`` scores every allowed row exactly.

The codes are a cache of the float32 rows: appended as rows are, rebuilt after a reset
(``Scan.extend``); they are never written to disk.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from lookup_knowledge.adapters.milvus.dense_rows import faiss_module

#: Codes taken per requested hit before the exact re-rank.
OVERFETCH = 4


def error_bound(dimension: int) -> float:
    """How far a float16 inner product of unit vectors can be from the float32 one, with
    a factor of two to spare: storing a component rounds it by at most 2**-11 of itself
    (2**-25 absolutely below float16's normal range), so the sum is off by at most
    2**-11 * |q| |x| = 2**-11, plus float32 accumulation (2**-24 per term, both sums)."""
    return 2.0 * (2.0**-11 + dimension * (2.0**-25 + 2.0 * 2.0**-24))


class Scan:
    """Float16 codes of the index's rows, in label order. Not thread-safe: the dense
    index calls it under its lock."""

    def __init__(self, dimension: int) -> None:
        faiss = faiss_module()
        self._dimension = dimension
        self._bound = error_bound(dimension)
        self._codes: Any = faiss.IndexScalarQuantizer(
            dimension, faiss.ScalarQuantizer.QT_fp16, faiss.METRIC_INNER_PRODUCT
        )

    @property
    def rows(self) -> int:
        return int(self._codes.ntotal)

    def extend(self, vectors: np.ndarray) -> None:
        """Code the rows past those already coded (``vectors``: every row, by label)."""
        if len(vectors) > self.rows:
            self._codes.add(np.ascontiguousarray(vectors[self.rows :], dtype=np.float32))

    def top(
        self,
        query: np.ndarray,
        want: int,
        flat: Any,
        mask: np.ndarray | None,
        visible: int,
    ) -> list[tuple[int, float]]:
        """The ``want`` labels nearest ``query`` (unit, float32) among those ``mask``
        allows (None: every row; ``visible`` of them), exact cosine (the float32 rows of
        the flat index ``flat``, the ones coded), best first; scored
        exactly over every allowed row when the float16 scores cannot prove that top
        complete."""
        faiss = faiss_module()
        fetch = min(visible, OVERFETCH * want)
        if mask is None:
            params = None
        else:
            packed = np.packbits(mask, bitorder="little")
            selector = faiss.IDSelectorBitmap(len(mask), faiss.swig_ptr(packed))
            params = faiss.SearchParameters(sel=selector)
        coded, labels = self._codes.search(query.reshape(1, -1), fetch, params=params)
        taken = labels[0][labels[0] >= 0]
        exact = flat_rows(flat)[taken] @ query
        order = np.argsort(-exact, kind="stable")[:want]
        if len(taken) < visible and (  # rows were left out: the k-th must beat them all
            len(taken) < fetch  # (the mask and ``visible`` disagree)
            or len(order) < want
            or exact[order[-1]] < float(coded[0][fetch - 1]) + self._bound
        ):  # ties within float16's error: no proof, so every allowed row is scored
            return exact_top(flat, query, mask, want)
        return [(int(taken[i]), float(exact[i])) for i in order]


def flat_rows(flat: Any) -> np.ndarray:
    """The float32 rows of a FAISS flat index, as a view (no copy)."""
    faiss = faiss_module()
    total = int(flat.ntotal)
    if total == 0:
        return np.empty((0, flat.d), dtype=np.float32)
    rows: np.ndarray = np.asarray(faiss.rev_swig_ptr(flat.get_xb(), total * flat.d))
    return rows.reshape(total, flat.d)


def exact_top(
    flat: Any, query: np.ndarray, mask: np.ndarray | None, want: int
) -> list[tuple[int, float]]:
    """The ``want`` rows of the FAISS flat index ``flat`` nearest ``query`` by inner
    product among those ``mask`` allows (None: all), best first."""
    faiss = faiss_module()
    params = None
    if mask is not None:
        packed = np.packbits(mask, bitorder="little")
        params = faiss.SearchParameters(
            sel=faiss.IDSelectorBitmap(len(mask), faiss.swig_ptr(packed))
        )
    scores, labels = flat.search(query.reshape(1, -1), want, params=params)
    return [(int(n), float(s)) for n, s in zip(labels[0], scores[0], strict=True) if n >= 0]


def one_thread() -> None:
    """FAISS' parallel loops started from the calling thread run on it alone: one query
    gains nothing from more threads, and on a busy machine OpenMP's extra threads cost
    several times the search (benchmarks/README.md). OpenMP keeps this per thread."""
    faiss_module().omp_set_num_threads(1)


__all__ = ["OVERFETCH", "Scan", "error_bound", "exact_top", "one_thread"]
