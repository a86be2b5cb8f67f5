"""A second process on a Milvus Lite file another process holds gets one
clear line and a typed error, not a 20-line ``DataDirLockedError`` traceback. Real Milvus
Lite in two processes."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from lookup_knowledge import create_app
from lookup_knowledge.domain.errors import (
    LookupKnowledgeError,
    SearchStoreInUse,
    SearchUnavailable,
)

CLI = str(Path(sys.executable).with_name("lookup-knowledge"))
HOLDER = """
import sys, time
from lookup_knowledge import create_app
with create_app(overrides={"data-dir": sys.argv[1], "embedder.provider": "hashing"}) as app:
    app.lookup("warm up", session_id="holder")
    print("READY", flush=True)
    sys.stdin.read()
"""


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("LOOKUP_KNOWLEDGE_")}


@pytest.fixture
def held_data_dir(tmp_path: Path) -> Iterator[Path]:
    data_dir = tmp_path / "data"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(data_dir)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
    )
    try:
        assert holder.stdout is not None
        line = holder.stdout.readline()
        assert line.strip() == "READY", holder.stderr.read() if holder.stderr else ""
        yield data_dir
    finally:
        holder.communicate(input="", timeout=60)


@pytest.mark.slow
def test_second_process_gets_one_line_naming_the_busy_file(
    held_data_dir: Path,
) -> None:
    milvus_file = held_data_dir / "milvus.db"
    done = subprocess.run(
        [CLI, "--data-dir", str(held_data_dir), "lookup", "failover"],
        capture_output=True,
        text=True,
        env={**_env(), "LOOKUP_KNOWLEDGE_EMBEDDER__PROVIDER": "hashing"},
        timeout=120,
        check=False,
    )
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert f"the Milvus Lite file {milvus_file} is in use by another process" in lines[0]
    assert "Traceback" not in done.stderr
    assert "DataDirLockedError" not in done.stderr

    with create_app(
        overrides={"data-dir": str(held_data_dir), "embedder.provider": "hashing"}
    ) as app:
        result = app.lookup_result("failover", session_id="second")
        assert result.error_code == SearchStoreInUse.code
        assert "in use by another process" in result.message
        doc = held_data_dir.parent / "doc.md"
        doc.write_text("# Failover\n\nPromote the replica.\n", encoding="utf-8")
        # The write side wraps it (store.py: IngestError "search_store_in_use: ...").
        with pytest.raises(LookupKnowledgeError) as raised:
            app.ingest([doc])
        assert "in use by another process" in str(raised.value)
    assert issubclass(SearchStoreInUse, SearchUnavailable)
