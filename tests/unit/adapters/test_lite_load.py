"""Which file a failed Milvus Lite load may remove: only an index file of its own folder."""

from __future__ import annotations

from pathlib import Path

from lookup_knowledge.adapters.milvus.lite_load import damaged_sidecar, half_written


def _error(path: Path) -> Exception:
    return RuntimeError(
        f"Error in faiss::read_index_up: 'ret == (1)' failed: read error in {path}: 0 != 1"
    )


def test_only_an_existing_index_file_inside_the_lite_folder_is_named(tmp_path: Path) -> None:
    lite = tmp_path / "milvus.db"
    index = lite / "collections" / "kb" / "partitions" / "p" / "indexes" / "d.dense.hnsw.idx"
    index.parent.mkdir(parents=True)
    index.write_bytes(b"short")
    assert half_written(_error(index))
    assert damaged_sidecar(_error(index), str(lite)) == index.resolve()

    outside = tmp_path / "other" / "indexes" / "x.idx"
    outside.parent.mkdir(parents=True)
    outside.write_bytes(b"x")
    assert damaged_sidecar(_error(outside), str(lite)) is None  # another folder
    escape = lite / "collections" / ".." / ".." / "other" / "indexes" / "x.idx"
    assert damaged_sidecar(_error(escape), str(lite)) is None  # ".." cannot leave it
    data = lite / "collections" / "kb" / "data.idx"
    data.write_bytes(b"x")
    assert damaged_sidecar(_error(data), str(lite)) is None  # not in an indexes folder
    assert damaged_sidecar(_error(lite / "indexes" / "gone.idx"), str(lite)) is None
    assert damaged_sidecar(_error(index), None) is None  # a server: nothing to remove
    assert damaged_sidecar(RuntimeError("collection not found"), str(lite)) is None
    assert not half_written(RuntimeError("collection not found"))
