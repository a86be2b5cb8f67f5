"""The HNSW index of Milvus Lite's dense path on its own (``adapters/milvus/dense_index.py``):
filtered top-k equal to exact search, replace and deletes, the journal and the repairs
and rebuilds on open."""

from __future__ import annotations

import json
import logging
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lookup_knowledge.adapters.milvus import dense_index as dense_index_module
from lookup_knowledge.adapters.milvus.dense_index import DenseIndex, DenseRow
from lookup_knowledge.adapters.milvus.dense_scan import Scan
from lookup_knowledge.domain.access import (
    AccessMode,
    AccessScope,
    DocumentAccess,
    Principal,
    can_see,
    storage_key,
)
from tests.support.lite_rows import RowsInMilvus

DIM = 8


def row(
    doc: str,
    chunk: int,
    vector: Sequence[float],
    *,
    category: str = "ops",
    tenant: str = "",
    groups: Sequence[str] = (),
    public: bool = False,
) -> DenseRow:
    return DenseRow(
        key=storage_key(tenant, f"{doc}#chunk-{chunk}"),
        doc_key=storage_key(tenant, doc),
        vector=list(vector),
        category=category,
        tenant=tenant,
        allowed_groups=tuple(groups),
        public=public,
    )


def axis(i: int, scale: float = 1.0) -> list[float]:
    out = [0.0] * DIM
    out[i % DIM] = scale
    return out


Milvus = RowsInMilvus[DenseRow]


def open_index(
    root: Path, milvus: Milvus, *, exact_rows: int = 0, scan_rows: int = 0, m: int = 16
) -> DenseIndex:
    """By default every search goes through the HNSW graph (no exact or scanned path)."""
    return DenseIndex(
        root,
        dimension=DIM,
        read_rows=milvus.read,
        count_rows=milvus.count,
        m=m,
        exact_rows=exact_rows,
        scan_rows=scan_rows,
    )


def keys(found: list[tuple[str, float]]) -> list[str]:
    return [key for key, _score in found]


def test_search_returns_the_nearest_rows_by_cosine_best_first(tmp_path: Path) -> None:
    rows = [
        row("a.md", 0, axis(0)),
        row("b.md", 0, axis(1)),
        row("c.md", 0, [1, 1, 0, 0, 0, 0, 0, 0]),
    ]
    milvus = Milvus(rows)
    index = open_index(tmp_path / "dense", milvus)
    index.upsert(rows)
    found = index.search(axis(0, 5.0), 2, ef=16)  # the query's length does not matter
    assert keys(found) == ["a.md#chunk-0", "c.md#chunk-0"]
    assert found[0][1] == pytest.approx(1.0)
    assert found[1][1] == pytest.approx(2**-0.5)
    assert keys(index.search(axis(1), 10, ef=16, where={"category": "other"})) == []
    with pytest.raises(ValueError, match="8-dim"):
        index.search([1.0, 0.0], 1, ef=16)
    index.close()


def test_replace_and_deletes_of_a_reingested_document_reach_the_index(tmp_path: Path) -> None:
    milvus = Milvus()
    index = open_index(tmp_path / "dense", milvus)
    index.upsert([row("a.md", i, axis(i)) for i in range(4)] + [row("b.md", 0, axis(5))])
    index.upsert([row("a.md", 0, axis(6))])  # replaced by key: the old vector is gone
    assert keys(index.search(axis(6), 1, ef=16)) == ["a.md#chunk-0"]
    assert "a.md#chunk-0" not in keys(index.search(axis(0), 1, ef=16))
    # The re-ingest keeps chunks 0 and 1 of a.md and deletes the rest.
    index.delete_except(["a.md"], ["a.md#chunk-0", "a.md#chunk-1"])
    assert sorted(keys(index.search(axis(0), 10, ef=16))) == [
        "a.md#chunk-0",
        "a.md#chunk-1",
        "b.md#chunk-0",
    ]
    index.delete_documents(["a.md"])
    assert keys(index.search(axis(0), 10, ef=16)) == ["b.md#chunk-0"]
    assert index.count() == 1
    index.close()


def test_a_row_written_again_as_it_is_adds_no_graph_node_and_a_changed_one_replaces_it(
    tmp_path: Path,
) -> None:
    """Ingest writes a new document's chunk 0 twice (pending, then final) with the same
    vector: the second write must not leave a dead node behind for settle to rebuild."""
    milvus = Milvus()
    index = open_index(tmp_path / "dense", milvus)
    acme = {"tenant": "acme", "groups": ["ops"]}
    index.upsert([row("a.md", 0, axis(0)), row("b.md", 0, axis(1), **acme)])
    nodes = index._index.ntotal
    index.upsert([row("a.md", 0, axis(0, 3.0)), row("b.md", 0, axis(1), **acme)])
    assert index._index.ntotal == nodes, "the same rows again: no new node"
    index.upsert([row("b.md", 0, axis(1), tenant="acme", groups=["ops", "sre"])])  # ACL changed
    index.upsert([row("a.md", 0, axis(2))])  # the vector changed
    assert index._index.ntotal == nodes + 2
    assert index.count() == 2
    assert keys(index.search(axis(2), 1, ef=16)) == ["a.md#chunk-0"]
    assert index.scores(axis(0), ["a.md#chunk-0"]) == {"a.md#chunk-0": pytest.approx(0.0)}
    sre = AccessScope(AccessMode.ENFORCED, Principal("acme", "u", frozenset({"sre"})))
    assert keys(index.search(axis(1), 5, ef=16, access=sre)) == [
        storage_key("acme", "b.md#chunk-0")
    ]
    index.close()


def test_settle_writes_the_index_and_a_reopen_reads_it_without_milvus(tmp_path: Path) -> None:
    rows = [row(f"d{i}.md", 0, axis(i)) for i in range(6)]
    milvus = Milvus(rows)
    index = open_index(tmp_path / "dense", milvus)
    index.upsert(rows)
    index.delete_documents(["d0.md"])  # a tombstone, compacted away by settle
    milvus.rows.pop("d0.md#chunk-0")
    index.settle()
    index.close()
    reads = len(milvus.reads)
    reopened = open_index(tmp_path / "dense", milvus)
    assert reopened.count() == 5
    assert keys(reopened.search(axis(3), 1, ef=16)) == ["d3.md#chunk-0"]
    assert "d0.md#chunk-0" not in keys(reopened.search(axis(0), 10, ef=16))
    assert len(milvus.reads) == reads  # nothing re-read: the file matched the collection
    reopened.close()


def test_warm_reads_the_file_and_codes_the_rows_for_the_scan_before_the_first_search(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    coded: list[int] = []

    class CountingScan(Scan):
        def extend(self, vectors: np.ndarray) -> None:
            before = self.rows
            super().extend(vectors)
            coded.append(self.rows - before)

    monkeypatch.setattr(dense_index_module, "Scan", CountingScan)
    rng = np.random.default_rng(3)
    rows = [row(f"d{i}.md", 0, rng.standard_normal(DIM).tolist()) for i in range(40)]
    milvus = Milvus(rows)
    root = tmp_path / "dense"
    index = open_index(root, milvus)
    index.upsert(rows)
    index.settle()
    index.close()
    reads = len(milvus.reads)

    small = open_index(root, milvus, exact_rows=40, scan_rows=1000)
    small.warm()  # every row is scored exactly: nothing to code
    assert coded == []
    small.close()
    large = open_index(root, milvus, exact_rows=10, scan_rows=20)
    large.warm()  # the graph answers an unfiltered search: nothing to code yet
    assert coded == []
    large.close()

    warmed = open_index(root, milvus, exact_rows=10, scan_rows=1000)
    warmed.warm()
    assert coded == [40]
    (root / "index.bin").unlink()  # what the first search would read is already held
    query = rng.standard_normal(DIM).tolist()
    assert keys(warmed.search(query, 5, ef=16)) == keys(warmed.exact(query, 5))
    assert coded == [40, 0]  # the search coded nothing more
    assert len(milvus.reads) == reads  # and nothing was rebuilt from Milvus
    warmed.close()


def test_an_open_whose_rebuild_failed_is_opened_and_rebuilt_again_by_the_next_call(
    tmp_path: Path,
) -> None:
    rows = [row(f"d{i}.md", 0, axis(i)) for i in range(30)]

    index = open_index(tmp_path / "dense", Milvus(rows, fail_after=10))  # no file: rebuilt on open
    with pytest.raises(RuntimeError, match="mid-read"):
        index.count()
    assert index.count() == len(rows)  # not the ten read before the failure
    assert len(index.search(axis(0), 100, ef=64)) == len(rows)
    index.close()


def test_a_journal_left_by_a_crash_is_replayed_from_milvus_on_open(tmp_path: Path) -> None:
    root = tmp_path / "dense"
    milvus = Milvus([row("a.md", 0, axis(0)), row("b.md", 0, axis(1))])
    index = open_index(root, milvus)
    index.upsert(list(milvus.rows.values()))
    index.settle()
    index.mark(["a.md"])  # the process journals a.md, Milvus takes the new rows ...
    milvus.rows["a.md#chunk-0"] = row("a.md", 0, axis(2))
    milvus.rows["a.md#chunk-1"] = row("a.md", 1, axis(3))
    index.close()  # ... and dies before the index hears of them

    assert json.loads((root / "pending.jsonl").read_text().splitlines()[0]) == ["a.md"]
    reopened = open_index(root, milvus)
    assert keys(reopened.search(axis(2), 1, ef=16)) == ["a.md#chunk-0"]
    assert keys(reopened.search(axis(3), 1, ef=16)) == ["a.md#chunk-1"]
    assert reopened.count() == 3
    assert milvus.reads[-1] == ["a.md"]  # only the journalled document was re-read
    assert not (root / "pending.jsonl").exists()
    reopened.close()


@pytest.mark.parametrize("damage", ["missing", "truncated", "other-parameters", "count"])
def test_an_index_that_does_not_match_the_collection_is_rebuilt_from_milvus(
    tmp_path: Path, damage: str
) -> None:
    root = tmp_path / "dense"
    milvus = Milvus([row("a.md", 0, axis(0)), row("b.md", 0, axis(1))])
    index = open_index(root, milvus)
    index.upsert(list(milvus.rows.values()))
    index.settle()
    index.close()
    m = 16
    if damage == "missing":
        shutil.rmtree(root)
    elif damage == "truncated":
        data = (root / "index.bin").read_bytes()
        (root / "index.bin").write_bytes(data[: len(data) - 40])
    elif damage == "other-parameters":
        m = 8
    else:
        milvus.rows["c.md#chunk-0"] = row("c.md", 0, axis(2))  # written by another tool
    reopened = open_index(root, milvus, m=m)
    assert reopened.count() == len(milvus.rows)
    assert milvus.reads[-1] is None  # a full read
    expected = ["c.md#chunk-0"] if damage == "count" else ["a.md#chunk-0"]
    assert keys(reopened.search(axis(2) if damage == "count" else axis(0), 1, ef=16)) == expected
    reopened.close()


def test_a_new_collection_starts_its_index_quietly_and_a_lost_one_is_rebuilt_aloud(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    milvus = Milvus([])
    with caplog.at_level(logging.WARNING):
        index = open_index(tmp_path / "new", milvus)
        index.upsert([row("a.md", 0, axis(0))])
        milvus.rows["a.md#chunk-0"] = row("a.md", 0, axis(0))
        assert keys(index.search(axis(0), 1, ef=16)) == ["a.md#chunk-0"]
        index.close()
    assert not [r for r in caplog.records if "rebuilding" in r.getMessage()]

    shutil.rmtree(tmp_path / "new")  # the index is lost; the collection still holds a row
    with caplog.at_level(logging.WARNING):
        reopened = open_index(tmp_path / "new", milvus)
        assert reopened.count() == 1
        reopened.close()
    assert [r for r in caplog.records if "no usable dense index" in r.getMessage()]


def test_a_write_that_failed_is_repaired_before_the_next_search(tmp_path: Path) -> None:
    milvus = Milvus([row("a.md", 0, axis(0))])
    index = open_index(tmp_path / "dense", milvus)
    index.upsert(list(milvus.rows.values()))
    index.mark(["a.md"])
    milvus.rows["a.md#chunk-0"] = row("a.md", 0, axis(4))  # Milvus wrote, then the call failed
    index.failed()
    assert keys(index.search(axis(4), 1, ef=16)) == ["a.md#chunk-0"]
    index.close()


# ---------------------------------------------------------------------- filters

_TENANTS = st.sampled_from(["t1", "t2"])
_GROUPS = st.frozensets(st.sampled_from(["g1", "g2", "g3"]), max_size=2)
_CATEGORIES = st.sampled_from(["ops", "billing", "hr"])
_DOC = st.tuples(
    st.builds(
        lambda tenant, groups, public: DocumentAccess(
            tenant, groups if tenant else frozenset(), public
        ),
        st.one_of(st.just(""), _TENANTS),
        _GROUPS,
        st.booleans(),
    ),
    _CATEGORIES,
    st.integers(1, 4),  # chunks
)
_SCOPES = st.one_of(
    st.just(AccessScope(AccessMode.OFF)),
    st.just(AccessScope(AccessMode.ENFORCED, None)),
    st.builds(
        lambda tenant, groups: AccessScope(AccessMode.ENFORCED, Principal(tenant, "u", groups)),
        _TENANTS,
        _GROUPS,
    ),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    docs=st.lists(_DOC, min_size=1, max_size=40),
    scope=_SCOPES,
    category=st.one_of(st.none(), _CATEGORIES),
    deleted=st.sets(st.integers(0, 39), max_size=5),
    limit=st.integers(1, 30),
    path=st.sampled_from(["graph", "scan", "exact"]),
    seed=st.integers(0, 2**32 - 1),
)
def test_the_filtered_top_k_equals_exact_search_over_the_rows_the_filter_allows(
    docs: list[tuple[DocumentAccess, str, int]],
    scope: AccessScope,
    category: str | None,
    deleted: set[int],
    limit: int,
    path: str,
    seed: int,
) -> None:
    """Through the HNSW graph with the filter as its id set, through the float16 scan
    with the filter as its id set, and exactly over the filtered rows: no hit outside the filter (category, tenant,
    groups, public, deleted documents) and every one of the best ``limit`` inside it."""
    rng = np.random.default_rng(seed)
    root = Path(tempfile.mkdtemp(prefix="dense-filter-"))
    try:
        rows: list[tuple[DenseRow, DocumentAccess]] = []
        for d, (access, cat, chunks) in enumerate(docs):
            for c in range(chunks):
                vector = rng.standard_normal(DIM).tolist()
                rows.append(
                    (
                        row(
                            f"d{d}.md",
                            c,
                            vector,
                            category=cat,
                            tenant=access.tenant,
                            groups=sorted(access.allowed_groups),
                            public=access.public,
                        ),
                        access,
                    )
                )
        exact_rows = 10_000 if path == "exact" else 0
        scan_rows = 0 if path == "graph" else 10_000
        index = open_index(root, Milvus(), exact_rows=exact_rows, scan_rows=scan_rows)
        index.upsert([r for r, _a in rows])
        gone = [storage_key(docs[d][0].tenant, f"d{d}.md") for d in deleted if d < len(docs)]
        index.delete_documents(gone)
        query = rng.standard_normal(DIM)
        where = {"category": category} if category is not None else None
        found = index.search(query.tolist(), limit, ef=512, where=where, access=scope)

        allowed = [
            r
            for r, access in rows
            if r.doc_key not in gone
            and (category is None or r.category == category)
            and can_see(scope.principal, access, scope.mode)
        ]
        unit = query / np.linalg.norm(query)
        scored = sorted(
            ((float(np.dot(unit, r.vector) / np.linalg.norm(r.vector)), r.key) for r in allowed),
            reverse=True,
        )
        assert keys(found) == [key for _score, key in scored[:limit]]
        assert [s for _k, s in found] == pytest.approx([s for s, _k in scored[:limit]], abs=1e-5)
        # Any rows' scores (a fused hit's dense evidence): exact, and only inside the filter.
        asked = [*[r.key for r, _a in rows][::2], "unknown#chunk-0"]
        exact = {key: score for score, key in scored}
        got = index.scores(query.tolist(), asked, where=where, access=scope)
        assert sorted(got) == sorted(key for key in asked if key in exact)
        assert got == pytest.approx({key: exact[key] for key in got}, abs=1e-5)
        index.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)


NAMES = st.sampled_from(["", "ops", "hr", "数据", "a,b"])
FILE_ROWS = st.lists(
    st.tuples(
        st.sampled_from([f"k{i}" for i in range(12)]),  # keys repeat: replaced rows
        st.sampled_from(["d1", "d2", "d3", "t\x1fd1"]),
        NAMES,
        NAMES,
        st.lists(NAMES, max_size=3),
        st.booleans(),
        st.booleans(),
    ).map(list),
    max_size=30,
)


def columns(index: DenseIndex) -> dict[str, object]:
    return {
        "keys": index._keys,
        "doc_keys": index._doc_keys,
        "categories": (index._categories.names, index._category),
        "tenants": (index._tenants.names, index._tenant),
        "groups": (index._groups.names, index._row_groups),
        "public": index._public,
        "live": index._live,
        "by_key": index._by_key,
        "by_doc": index._docs(),
    }


@given(FILE_ROWS)
def test_the_rows_read_from_the_file_a_column_at_a_time_are_those_made_row_by_row(
    rows: list[list[object]],
) -> None:
    milvus = Milvus()
    by_column = open_index(Path("/nonexistent"), milvus)
    by_row = open_index(Path("/nonexistent"), milvus)
    by_column._columns_from(rows)
    for fields in rows:
        by_row._append(*fields)  # type: ignore[arg-type]
    assert columns(by_column) == columns(by_row)


@pytest.mark.parametrize(
    "rows", [[["k", "d", "", "", [], False]], [["k", "d", "", "", [], False, True], ["k"]], {}]
)
def test_a_file_whose_rows_are_malformed_is_refused(rows: object) -> None:
    index = open_index(Path("/nonexistent"), Milvus())
    with pytest.raises((ValueError, TypeError)):
        index._columns_from(rows)  # type: ignore[arg-type]


@given(FILE_ROWS)
def test_the_columns_the_file_stores_read_back_as_the_rows_that_made_them(
    rows: list[list[object]],
) -> None:
    milvus = Milvus()
    made = open_index(Path("/nonexistent"), milvus)
    for fields in rows:
        made._append(*fields)  # type: ignore[arg-type]
    read = open_index(Path("/nonexistent"), milvus)
    read._columns_of(orjson.loads(orjson.dumps(made._stored_columns())))
    # A write first (the documents' labels are made on first use), then the columns.
    for index in (made, read):
        if rows:
            index._kill(len(rows) // 2)
        index._append("k-new", "d1", "ops", "", ["sre"], True, True)
    assert columns(read) == columns(made)


def stored(**changes: object) -> dict[str, object]:
    base: dict[str, object] = {
        "key": ["a", "b"],
        "docKey": ["d", "d"],
        "categoryNames": ["ops"],
        "category": [0, 0],
        "tenantNames": [""],
        "tenant": [0, 0],
        "groupNames": ["sre"],
        "groups": [[], [0]],
        "public": [False, True],
        "live": [True, True],
    }
    return {**base, **changes}


@pytest.mark.parametrize(
    "bad",
    [
        {"key": ["a"]},  # shorter than the other columns
        {"category": [0, 1]},  # a code no name has
        {"groups": [[], [-1]]},
        {"tenant": [0, "0"]},
        {"categoryNames": ["ops", "ops"], "category": [0, 1]},  # one name coded twice
        {"groupNames": "sre"},
        {"key": ["a", 7]},
        {"live": None},
    ],
)
def test_stored_columns_that_are_not_one_set_of_rows_are_refused(bad: dict[str, object]) -> None:
    index = open_index(Path("/nonexistent"), Milvus())
    index._columns_of(stored())  # the base is sound
    with pytest.raises((ValueError, TypeError)):
        open_index(Path("/nonexistent"), Milvus())._columns_of(stored(**bad))


def test_an_index_file_of_the_row_format_is_read_and_rewritten_in_columns(tmp_path: Path) -> None:
    rows = [row(f"d{i}.md", 0, axis(i), groups=("sre",) if i % 2 else ()) for i in range(6)]
    milvus = Milvus(rows)
    index = open_index(tmp_path / "dense", milvus)
    index.upsert(rows)
    index.settle()
    expected = columns(index)
    index.close()
    # The same file as format 1 wrote it: the header's rows as lists of names.
    path = tmp_path / "dense" / "index.bin"
    data = path.read_bytes()
    magic, size = data[:8], int.from_bytes(data[8:16], "little")
    header = orjson.loads(data[16 : 16 + size])
    c = header.pop("columns")
    header["format"] = 1
    header["rows"] = [
        [
            c["key"][i],
            c["docKey"][i],
            c["categoryNames"][c["category"][i]],
            c["tenantNames"][c["tenant"][i]],
            [c["groupNames"][g] for g in c["groups"][i]],
            c["public"][i],
            c["live"][i],
        ]
        for i in range(len(c["key"]))
    ]
    old = json.dumps(header, ensure_ascii=False, separators=(",", ":")).encode()
    path.write_bytes(magic + len(old).to_bytes(8, "little") + old + data[16 + size :])
    reads = len(milvus.reads)
    reopened = open_index(tmp_path / "dense", milvus)
    assert reopened.count() == 6
    assert columns(reopened) == expected
    assert keys(reopened.search(axis(3), 1, ef=16)) == ["d3.md#chunk-0"]
    assert len(milvus.reads) == reads  # read, not rebuilt from Milvus
    reopened.upsert([row("d9.md", 0, axis(2))])
    reopened.settle()
    reopened.close()
    data = path.read_bytes()
    header = orjson.loads(data[16 : 16 + int.from_bytes(data[8:16], "little")])
    assert header["format"] == 2
    assert "rows" not in header
