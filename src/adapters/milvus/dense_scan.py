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

A large scan is split into contiguous label ranges of at least ``SPLIT_ROWS`` rows, one
per core this process may run on (at most ``MAX_PARTS``), scanned at once (FAISS lets go
of the GIL) and merged: one query on one core is bound by decoding the codes, so two
cores halve it (100,000 rows: 8.2 -> 4.6 ms with the cache cold, benchmarks/README.md).
The merge keeps each range's best codes, so the best codes of all of them, and the proof
reads the merged list as it read the single scan's.
"""

from __future__ import annotations

import functools
import itertools
import os
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Any

import numpy as np

from lookup_knowledge.adapters.cpus import usable_cores
from lookup_knowledge.adapters.milvus.dense_rows import faiss_module

#: Codes taken per requested hit before the exact re-rank.
OVERFETCH = 4
#: The fewest rows a range of a split scan holds (below twice this, no split).
SPLIT_ROWS = 32_768
#: The most ranges a scan is split into, whatever the cores.
MAX_PARTS = 4

_pool_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None


def _cores() -> int:
    return usable_cores()  # the affinity, capped by a cgroup CPU quota


def _workers() -> ThreadPoolExecutor:
    """The threads that scan the ranges past the first (the caller scans that one);
    shared by every index of the process, made on first use (again in a forked child,
    which inherits the pool but not its threads)."""
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(
                max_workers=MAX_PARTS - 1,
                thread_name_prefix="lk-dense-scan",
                initializer=one_thread,
            )
        return _pool


def _forget_workers() -> None:
    global _pool, _pool_lock
    _pool, _pool_lock = None, threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_workers)


class _Ranges:
    """The ranges one split scan handed to the workers. ``close`` returns once none of
    them runs and lets none start after it: what they read (the codes, the filter's
    bitmap) may change or be freed once the scan returns, and a range can be queued
    without being handed back (``submit`` queues before it starts a thread, which can
    fail)."""

    def __init__(self) -> None:
        self._state = threading.Condition()
        self._running = 0
        self._closed = False

    def run(self, scan: Callable[[], Any]) -> Any:
        with self._state:
            if self._closed:
                return None
            self._running += 1
        try:
            return scan()
        finally:
            with self._state:
                self._running -= 1
                self._state.notify_all()

    def close(self) -> None:
        with self._state:
            self._closed = True
            self._state.wait_for(lambda: self._running == 0)


def error_bound(dimension: int) -> float:
    """How far a float16 inner product of unit vectors can be from the float32 one, with
    a factor of two to spare: storing a component rounds it by at most 2**-11 of itself
    (2**-25 absolutely below float16's normal range), so the sum is off by at most
    2**-11 * |q| |x| = 2**-11, plus float32 accumulation (2**-24 per term, both sums)."""
    return 2.0 * (2.0**-11 + dimension * (2.0**-25 + 2.0 * 2.0**-24))


class Scan:
    """Float16 codes of the index's rows, in label order. Not thread-safe: the dense
    index calls it under its lock."""

    def __init__(self, dimension: int, *, split_rows: int = SPLIT_ROWS) -> None:
        faiss = faiss_module()
        self._dimension = dimension
        self._split_rows = split_rows
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
        fetch = min(visible, OVERFETCH * want)
        coded, taken = self._best_codes(query, fetch, mask)
        exact = flat_rows(flat)[taken] @ query
        order = np.argsort(-exact, kind="stable")[:want]
        if len(taken) < visible and (  # rows were left out: the k-th must beat them all
            len(taken) < fetch  # (the mask and ``visible`` disagree)
            or len(order) < want
            or exact[order[-1]] < float(coded[fetch - 1]) + self._bound
        ):  # ties within float16's error: no proof, so every allowed row is scored
            return exact_top(flat, query, mask, want)
        return [(int(taken[i]), float(exact[i])) for i in order]

    def _best_codes(
        self, query: np.ndarray, fetch: int, mask: np.ndarray | None
    ) -> tuple[np.ndarray, np.ndarray]:
        """The (at most) ``fetch`` best float16 scores among the rows ``mask`` allows, best
        first, and their labels: one FAISS scan, or one per label range at once."""
        faiss = faiss_module()
        parts = max(1, min(_cores(), MAX_PARTS, self.rows // max(self._split_rows, 1)))
        allowed = None
        if mask is not None:  # ``packed`` is what the selector reads: alive until we return
            packed = np.packbits(mask, bitorder="little")
            allowed = faiss.IDSelectorBitmap(len(mask), faiss.swig_ptr(packed))
        one = query.reshape(1, -1)
        if parts == 1:
            return self._whole(one, fetch, allowed)
        return self._split(one, fetch, allowed, parts)

    def _whole(self, one: np.ndarray, fetch: int, allowed: Any) -> tuple[np.ndarray, np.ndarray]:
        params = None if allowed is None else faiss_module().SearchParameters(sel=allowed)
        coded, labels = self._codes.search(one, fetch, params=params)
        found = labels[0] >= 0
        return coded[0][found], labels[0][found]

    def _split(
        self, one: np.ndarray, fetch: int, allowed: Any, parts: int
    ) -> tuple[np.ndarray, np.ndarray]:
        faiss = faiss_module()
        rows = self.rows
        bounds = [rows * n // parts for n in range(parts + 1)]
        selectors: list[Any] = []  # what FAISS reads, held here until no range runs
        params: list[Any] = []
        for low, high in itertools.pairwise(bounds):
            selector: Any = faiss.IDSelectorRange(low, high)
            selectors.append(selector)
            if allowed is not None:
                selector = faiss.IDSelectorAnd(allowed, selector)
                selectors.append(selector)
            params.append(faiss.SearchParameters(sel=selector))
        ranges = _Ranges()
        pending: list[Future[Any]] = []
        try:
            try:
                for each in params[1:]:
                    scan = functools.partial(self._codes.search, one, fetch, params=each)
                    pending.append(_workers().submit(ranges.run, scan))
            except RuntimeError:  # no thread for a range: shutting down, or none could start
                ranges.close()
                return self._whole(one, fetch, allowed)
            try:
                first = self._codes.search(one, fetch, params=params[0])
            finally:
                wait(pending)  # not closed yet: each range handed back has run
            results = [first, *(each.result() for each in pending)]
        finally:  # after it, no range reads ``selectors`` or the codes
            ranges.close()
        coded = np.concatenate([scores[0] for scores, _labels in results])
        labels = np.concatenate([found[0] for _scores, found in results])
        found = labels >= 0
        coded, labels = coded[found], labels[found]
        best = np.argsort(-coded, kind="stable")[:fetch]
        return coded[best], labels[best]


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
