"""The float16 scan of the dense index (``adapters/milvus/dense_scan.py``): its top-k is
the exact top-k whatever the vectors, because it proves it or scores every row."""

from __future__ import annotations

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
    # The same rows (ties may swap places), each with its exact float32 score.
    assert sorted(exact_scores[[n for n, _s in found]]) == sorted(exact_scores[truth])
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
