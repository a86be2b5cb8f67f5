"""Milvus Lite's flush without a Python object per stored value.

Milvus Lite (3.x) keeps the rows written since its last flush as Arrow record batches
and, to flush, builds the segment's table value by value: ``batch.column(name)[row]
.as_py()`` for every field of every live row, then ``pa.Table.from_pydict``. A 384-dim
vector becomes 384 Python floats, so flushing 16 MB of rows takes ~100 MB for a moment,
and what the interpreter's allocator got back stays resident: on the SciFact ingest that
spike was the process's peak (benchmarks/README.md, "Ingest memory").

``install`` replaces that one step (``MemTable._build_data_table``) with Arrow's own
``take`` over the same batches: the same rows in the same order, the same schema, one
columnar copy. The replacement hands any case it does not expect to Lite's own code
(a batch whose columns are not the data schema's, an error of Arrow's), and it is only
installed on a Lite whose memtable has the shape it was written against; so on another
Lite release this module does nothing rather than something different. The tests hold
its tables equal to Lite's on random sequences of upserts and deletes.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any

logger = logging.getLogger(__name__)

_lock = threading.Lock()
_installed = False


def _columnar(original: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    def build_data_table(self: Any, rows: Sequence[tuple[int, int]]) -> Any:
        try:
            table = _take(self, rows)
        except Exception:  # noqa: BLE001 - Arrow raises many types; Lite's own build decides then
            logger.debug("Milvus Lite flush: columnar build failed; Lite's own build used")
            table = None
        return original(self, rows) if table is None else table

    build_data_table.__doc__ = original.__doc__
    build_data_table.__wrapped__ = original  # type: ignore[attr-defined]
    return build_data_table


def _take(memtable: Any, rows: Sequence[tuple[int, int]]) -> Any:
    """The data table of ``rows`` (batch index, row index) by Arrow's ``take``, or None
    where Lite's own build should answer."""
    import pyarrow as pa

    schema = memtable._data_schema
    batches = memtable._insert_batches
    if not rows:
        return None
    names = schema.names
    starts: dict[int, int] = {}
    parts = []
    offset = 0
    for index in sorted({batch for batch, _row in rows}):
        batch = batches[index]
        if not set(names) <= set(batch.schema.names):
            return None
        part = batch.select(names)
        if not part.schema.equals(schema):
            part = pa.Table.from_batches([part]).cast(schema)
        else:
            part = pa.Table.from_batches([part], schema=schema)
        starts[index] = offset
        offset += part.num_rows
        parts.append(part)
    whole = pa.concat_tables(parts)
    positions = pa.array([starts[batch] + row for batch, row in rows], type=pa.int64())
    return whole.take(positions).combine_chunks()


def install() -> bool:
    """Use the columnar build for every Lite memtable of this process (idempotent);
    False when this Lite's memtable is not the one it was written for."""
    global _installed
    with _lock:
        if _installed:
            return True
        try:
            from milvus_lite.storage.memtable import MemTable
        except ImportError:  # pragma: no cover - Lite is a dependency of the embedded default
            return False
        original = getattr(MemTable, "_build_data_table", None)
        if not callable(original) or not _expected_shape(MemTable):
            logger.debug("Milvus Lite's memtable differs from 3.2's: its own flush is kept")
            return False
        MemTable._build_data_table = _columnar(original)
        _installed = True
        return True


def _expected_shape(memtable_class: type) -> bool:
    """Lite's memtable as 3.2 has it: a flush that calls ``_build_data_table`` with
    (batch, row) pairs of ``_insert_batches`` under ``_data_schema``."""
    import inspect

    try:
        flush = inspect.getsource(memtable_class.flush)  # type: ignore[attr-defined]
        build = inspect.getsource(memtable_class._build_data_table)  # type: ignore[attr-defined]
    except (OSError, TypeError, AttributeError):
        return False
    return (
        "self._build_data_table(rows)" in flush
        and "self._insert_batches[batch_idx]" in build
        and "self._data_schema" in build
        and "from_pydict" in build
    )


__all__ = ["install"]
