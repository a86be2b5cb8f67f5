"""What the package creates is its owner's only (folders 0700, files
0600) whatever the umask: the data dir, the SQLite audit file and its -wal/-shm, the
journal folder and files, the Milvus Lite folder. Real adapters: Milvus Lite, SQLite."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from lookup_knowledge import create_app
from lookup_knowledge.adapters.audit.journal import Journal
from lookup_knowledge.adapters.durable_files import DurableFiles
from tests.support.audit_data import invocation


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture(params=[0o022, 0o000], ids=["umask022", "umask000"])
def umask(request: pytest.FixtureRequest) -> Iterator[int]:
    previous = os.umask(request.param)
    try:
        yield request.param
    finally:
        os.umask(previous)


@pytest.mark.slow
def test_created_files_and_folders_are_private(tmp_path: Path, umask: int) -> None:
    data_dir = tmp_path / "new" / "data"
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# Failover\n\nPromote the replica.\n", encoding="utf-8")
    with create_app(overrides={"data-dir": str(data_dir), "embedder.provider": "hashing"}) as app:
        app.ingest([docs], root=docs)
        app.lookup("failover", session_id="perm")
        assert app.flush("perm")
        audit = data_dir / "audit.db"
        created = {
            data_dir: 0o700,
            data_dir.parent: 0o700,  # a missing parent it had to create
            data_dir / "milvus.db": 0o700,
            data_dir / "audit-journal": 0o700,
            audit: 0o600,
            Path(f"{audit}-wal"): 0o600,
            Path(f"{audit}-shm"): 0o600,
        }
        for path, expected in created.items():
            assert path.exists(), path
            assert _mode(path) == expected, f"{path}: {oct(_mode(path))}"


def test_journal_files_are_private(tmp_path: Path, umask: int) -> None:
    journal = Journal(tmp_path / "journal", files=DurableFiles(enabled=False))
    try:
        journal.append(invocation("perm-journal", documents=["a.md#chunk-0"]))
        journal.reject("not a journal line\n", "test", "unit")
        journal.compact()
        assert _mode(journal.directory) == 0o700
        assert _mode(journal.path) == 0o600
        assert _mode(journal.rejected_path) == 0o600
    finally:
        journal.close()
