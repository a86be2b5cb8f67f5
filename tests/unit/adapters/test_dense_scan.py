"""The float16 scan of the dense index (``adapters/milvus/dense_scan.py``): its top-k is
the exact top-k whatever the vectors, because it proves it or scores every row."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable

import faiss
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lookup_knowledge.adapters.milvus import dense_scan
from lookup_knowledge.adapters.milvus.dense_scan import SPLIT_ROWS, Scan, error_bound, exact_top

DIM = 16


def flat(vectors: np.ndarray) -> faiss.IndexFlatIP:
    index = faiss.IndexFlatIP(vectors.shape[1])
    index.add(vectors)
    return index


def unit(rows: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(rows, axis=-1, keepdims=True)
    return (rows / np.where(norms > 0, norms, 1.0)).astype(np.float32)


def expected(
    vectors: np.ndarray, query: np.ndarray, mask: np.ndarray | None, want: int
) -> list[int]:
    ids = np.flatnonzero(mask) if mask is not None else np.arange(len(vectors))
    scores = vectors[ids].astype(np.float64) @ query.astype(np.float64)
    return [int(ids[i]) for i in np.argsort(-scores, kind="stable")[:want]]


@pytest.fixture(autouse=True)
def two_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    """Split scans split on a machine of one core too."""
    monkeypatch.setattr(dense_scan, "_cores", lambda: 4)


@settings(max_examples=120, deadline=None)
@given(
    rows=st.integers(1, 400),
    want=st.integers(1, 60),
    share=st.sampled_from([None, 0.05, 0.5, 0.95]),
    clustered=st.booleans(),
    split_rows=st.sampled_from([SPLIT_ROWS, 1, 7, 90]),
    seed=st.integers(0, 2**32 - 1),
)
def test_the_scanned_top_k_is_the_exact_top_k_of_the_rows_the_mask_allows(
    rows: int, want: int, share: float | None, clustered: bool, split_rows: int, seed: int
) -> None:
    """Whole, or split into label ranges scanned at once (a few rows a range here)."""
    rng = np.random.default_rng(seed)
    if clustered:  # near-duplicates around a few centres: scores tied within float16's error
        centres = rng.standard_normal((3, DIM))
        vectors = unit(centres[rng.integers(0, 3, rows)] + 1e-4 * rng.standard_normal((rows, DIM)))
    else:
        vectors = unit(rng.standard_normal((rows, DIM)))
    query = unit(rng.standard_normal(DIM))
    mask = None if share is None else rng.random(rows) < share
    visible = rows if mask is None else int(mask.sum())
    if visible == 0:
        return
    scan = Scan(DIM, split_rows=split_rows)
    scan.extend(vectors[: rows // 2])
    scan.extend(vectors)  # appended rows are coded too, each once
    assert scan.rows == rows
    found = scan.top(query, min(want, visible), flat(vectors), mask, visible)
    truth = expected(vectors, query, mask, min(want, visible))
    exact_scores = vectors @ query
    # The same rows, each with its exact float32 score. Ties may swap places, and so may
    # rows closer than float32 can tell: the truth ranks in float64 and the index in
    # float32 (one example: rows 2.3e-8 apart, ranked the other way round).
    true_scores = vectors.astype(np.float64) @ query.astype(np.float64)
    assert np.allclose(
        np.sort(true_scores[[n for n, _s in found]]), np.sort(true_scores[truth]), rtol=0, atol=1e-6
    )
    assert [s for _n, s in found] == sorted((s for _n, s in found), reverse=True)
    assert all(abs(s - float(exact_scores[n])) < 1e-6 for n, s in found)
    assert mask is None or all(mask[n] for n, _s in found)


def test_rows_float16_cannot_tell_apart_are_ranked_exactly() -> None:
    """Scores 1e-6 apart round to one float16 score: the best codes taken are arbitrary,
    so no proof holds and every row is scored; the exact best come back."""
    rows = 400
    first = 0.5 + 1e-6 * np.arange(rows)  # the best rows have the highest labels
    vectors = np.zeros((rows, DIM), dtype=np.float32)
    vectors[:, 0] = first
    vectors[:, 1] = np.sqrt(1 - first**2)
    query = np.zeros(DIM, dtype=np.float32)
    query[0] = 1.0
    scan = Scan(DIM)
    scan.extend(vectors)
    found = scan.top(query, 5, flat(vectors), None, rows)
    assert [n for n, _s in found] == [399, 398, 397, 396, 395]


def test_the_error_bound_covers_float16_rounding_of_unit_vectors() -> None:
    rng = np.random.default_rng(7)
    for dim in (8, 384, 1024):
        vectors = unit(rng.standard_normal((2000, dim)))
        query = unit(rng.standard_normal(dim))
        rounded = vectors.astype(np.float16).astype(np.float64) @ query.astype(np.float64)
        worst = float(np.max(np.abs(rounded - vectors.astype(np.float64) @ query)))
        assert worst < error_bound(dim) / 2  # the bound keeps a factor of two to spare


def test_exact_top_orders_the_rows_the_mask_allows_best_first() -> None:
    vectors = unit(np.array([[1, 0, 0], [0.9, 0.1, 0], [0.5, 0.5, 0], [0, 1, 0]], np.float32))
    query = unit(np.array([1, 0, 0], np.float32))
    mask = np.array([False, True, True, True])
    found = exact_top(flat(vectors), query, mask, 2)
    assert [n for n, _s in found] == [1, 2]
    assert found[0][1] == float(vectors[1] @ query)
    assert [n for n, _s in exact_top(flat(vectors), query, None, 9)] == [0, 1, 2, 3]


@settings(max_examples=40, deadline=None)
@given(
    rows=st.integers(2, 300),
    fetch=st.integers(1, 80),
    split_rows=st.sampled_from([1, 7, 90]),
    share=st.sampled_from([None, 0.05, 0.5]),
    seed=st.integers(0, 2**32 - 1),
)
def test_a_split_scan_takes_the_codes_the_whole_scan_takes(
    rows: int, fetch: int, split_rows: int, share: float | None, seed: int
) -> None:
    """Not only the same answer (the exact fallback would give that too): the same best
    codes, with the same scores, so the proof holds as often as it does unsplit."""
    rng = np.random.default_rng(seed)
    vectors = unit(rng.standard_normal((rows, DIM)))
    query = unit(rng.standard_normal(DIM))
    mask = None if share is None else rng.random(rows) < share
    whole, split = Scan(DIM, split_rows=10**9), Scan(DIM, split_rows=split_rows)
    whole.extend(vectors)
    split.extend(vectors)
    whole_scores, _labels = whole._best_codes(query, fetch, mask)
    split_scores, split_labels = split._best_codes(query, fetch, mask)
    assert np.array_equal(split_scores, whole_scores)
    assert list(split_scores) == sorted(split_scores, reverse=True)
    assert sorted(set(split_labels)) == sorted(split_labels)  # each row once
    assert mask is None or all(mask[split_labels])
    every = dict(zip(*reversed(whole._best_codes(query, rows, None)), strict=True))
    assert all(
        every[label] == score for label, score in zip(split_labels, split_scores, strict=True)
    )


class QueuedThenRefused:
    """A pool whose ``submit`` queues the work, then fails to start a thread for it (as
    ``ThreadPoolExecutor.submit`` can): the work runs later, on a thread already there."""

    def __init__(self) -> None:
        self.later: list[Callable[[], object]] = []

    def submit(self, fn: Callable[..., object], *args: object) -> None:
        self.later.append(lambda: fn(*args))
        raise RuntimeError("can't start new thread")


def test_a_range_queued_when_its_thread_could_not_start_never_scans_after_the_scan_returned(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rng = np.random.default_rng(3)
    vectors = unit(rng.standard_normal((64, DIM)))
    query = unit(rng.standard_normal(DIM))
    pool = QueuedThenRefused()
    monkeypatch.setattr(dense_scan, "_workers", lambda: pool)
    scan = Scan(DIM, split_rows=8)
    scan.extend(vectors)
    found = scan.top(query, 5, flat(vectors), None, 64)  # answered by one whole scan
    assert [n for n, _s in found] == expected(vectors, query, None, 5)
    assert len(pool.later) == 1
    assert pool.later[0]() is None  # its thread came too late: it does not scan


_FORKED = """
import os
import signal
import threading
import faiss
import numpy as np
from lookup_knowledge.adapters.milvus import dense_scan

dense_scan._cores = lambda: 4
dense_scan.one_thread()  # as the dense index does: no OpenMP pool to inherit
rng = np.random.default_rng(5)
vectors = rng.standard_normal((64, 16)).astype(np.float32)
vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
flat = faiss.IndexFlatIP(16)
flat.add(vectors)

def answer():
    scan = dense_scan.Scan(16, split_rows=8)
    scan.extend(vectors)
    return [n for n, _s in scan.top(vectors[0], 5, flat, None, 64)]

parent = answer()
gate = threading.Barrier(dense_scan.MAX_PARTS)  # every thread of the pool started
held = [dense_scan._workers().submit(gate.wait) for _ in range(dense_scan.MAX_PARTS - 1)]
gate.wait()
for each in held:
    each.result()
child = os.fork()
if child == 0:
    signal.alarm(20)  # a child left waiting for a range is killed, not left behind
    os._exit(0 if answer() == parent else 3)
_pid, status = os.waitpid(child, 0)
print(os.waitstatus_to_exitcode(status))
"""


def test_a_forked_child_scans_split_with_workers_of_its_own() -> None:
    """The child inherits the parent's pool but none of its threads: a range handed to
    it would never run, and the scan would wait for ever."""
    done = subprocess.run(
        [sys.executable, "-c", _FORKED], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.stdout.strip() == "0", done.stderr
