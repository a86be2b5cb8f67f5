"""Milvus Lite's flush built by Arrow's ``take`` (``adapters/milvus/lite_flush.py``) gives
the tables Lite's own value-by-value build gives, on random upserts and deletes."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lookup_knowledge.adapters.milvus import lite_flush

memtable = pytest.importorskip("milvus_lite.storage.memtable")
types = pytest.importorskip("milvus_lite.schema.types")
arrow = pytest.importorskip("milvus_lite.schema.arrow_builder")

DataType, FieldSchema = types.DataType, types.FieldSchema
SCHEMA = types.CollectionSchema(
    fields=[
        FieldSchema("pk", DataType.VARCHAR, is_primary=True, max_length=64),
        FieldSchema("vector", DataType.FLOAT_VECTOR, dim=3),
        FieldSchema("text", DataType.VARCHAR, max_length=256),
        FieldSchema(
            "groups", DataType.ARRAY, element_type=DataType.VARCHAR, max_capacity=4, max_length=16
        ),
        FieldSchema("public", DataType.BOOL),
        FieldSchema("rank", DataType.INT64, nullable=True),
        FieldSchema("sparse", DataType.SPARSE_FLOAT_VECTOR, is_function_output=True),
    ],
    enable_dynamic_field=True,
)
WAL = arrow.build_wal_data_schema(SCHEMA)
DELTA = arrow.build_wal_delta_schema(SCHEMA)

PKS = st.sampled_from([f"doc-{i}#chunk-{j}" for i in range(4) for j in range(3)])
PARTITIONS = st.sampled_from(["_default", "p1"])
ROW = st.fixed_dictionaries(
    {
        "pk": PKS,
        "vector": st.lists(st.floats(-1, 1, allow_nan=False, width=32), min_size=3, max_size=3),
        "text": st.text(max_size=20),
        "groups": st.lists(st.sampled_from(["ops", "sre", "数据"]), max_size=3),
        "public": st.booleans(),
        "rank": st.none() | st.integers(-(2**40), 2**40),
        "sparse": st.binary(max_size=16),
        "$meta": st.none() | st.just('{"k": 1}'),
    }
)
OPERATION = st.one_of(
    st.tuples(st.just("insert"), PARTITIONS, st.lists(ROW, min_size=1, max_size=6)),
    st.tuples(st.just("delete"), PARTITIONS, st.lists(PKS, min_size=1, max_size=3, unique=True)),
)


def _apply(table: Any, operations: list[tuple[str, str, list[Any]]]) -> None:
    seq = 0
    for kind, partition, items in operations:
        if kind == "insert":
            cols: dict[str, list[Any]] = {name: [] for name in WAL.names}
            for item in items:
                seq += 1
                cols["_seq"].append(seq)
                cols["_partition"].append(partition)
                for name, value in item.items():
                    cols[name].append(value)
            table.apply_insert(pa.RecordBatch.from_pydict(cols, schema=WAL))
        else:
            seq += 1
            table.apply_delete(
                pa.RecordBatch.from_pydict(
                    {
                        "pk": list(items),
                        "_seq": [seq] * len(items),
                        "_partition": [partition] * len(items),
                    },
                    schema=DELTA,
                )
            )


@settings(max_examples=60, deadline=None)
@given(st.lists(OPERATION, min_size=1, max_size=8))
def test_the_columnar_flush_gives_lites_tables_for_any_upserts_and_deletes(
    operations: list[tuple[str, str, list[Any]]],
) -> None:
    mem = memtable.MemTable(SCHEMA)
    _apply(mem, operations)
    current = memtable.MemTable._build_data_table
    lites = getattr(current, "__wrapped__", current)  # Lite's own, installed or not
    try:
        memtable.MemTable._build_data_table = lites
        expected = mem.flush(known_partitions=["_default", "p1"])
        memtable.MemTable._build_data_table = lite_flush._columnar(lites)
        got = mem.flush(known_partitions=["_default", "p1"])
    finally:
        memtable.MemTable._build_data_table = current
    assert got.keys() == expected.keys()
    for partition, (data, delta) in expected.items():
        got_data, got_delta = got[partition]
        if data is None:
            assert got_data is None
        else:
            assert got_data.schema.equals(data.schema, check_metadata=True)
            assert got_data.equals(data), partition
        assert (got_delta is None) == (delta is None)


def test_it_is_installed_on_this_lite_and_a_failed_take_falls_back_to_lites_build() -> None:
    assert lite_flush.install()
    assert lite_flush.install(), "idempotent"
    installed = memtable.MemTable._build_data_table
    assert getattr(installed, "__wrapped__", None) is not None, "this Lite's memtable is 3.2's"
    calls: list[Any] = []

    def lites(self: Any, rows: Any) -> str:
        calls.append(rows)
        return "lite's own"

    class Broken:
        _data_schema = pa.schema([pa.field("pk", pa.string())])
        _insert_batches = None  # not subscriptable: take fails

    assert lite_flush._columnar(lites)(Broken(), [(0, 0)]) == "lite's own"
    assert lite_flush._columnar(lites)(Broken(), []) == "lite's own"
    assert len(calls) == 2
