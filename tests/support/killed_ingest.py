"""An ingest killed (SIGKILL) after Milvus Lite took a batch's rows and before an index
beside the file applied them: what a crash between the two writes leaves behind."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

_SCRIPT = textwrap.dedent(
    """
    import os, signal, sys
    from lookup_knowledge.adapters.embedders import HashingEmbedder
    from lookup_knowledge.adapters.files import FileDocumentSource, MarkdownChunker
    from lookup_knowledge.adapters.milvus import MilvusConnection, MilvusKnowledgeStore
    from lookup_knowledge.adapters.runtime import SystemClock
    from lookup_knowledge.application.ingest import IngestDocuments
    from {module} import {index}

    uri, collection, kb = sys.argv[1:4]
    store = MilvusKnowledgeStore(MilvusConnection(uri, timeout_s=30.0), collection=collection)
    ingest = IngestDocuments(
        store=store, chunker=MarkdownChunker(chunk_size=200, chunk_overlap=30),
        clock=SystemClock(), embedder=HashingEmbedder(64),
    )

    def die(self, rows):  # after Milvus took the rows, before the index applies them
        store._connection.client().flush(collection)
        os.kill(os.getpid(), signal.SIGKILL)

    {index}.upsert = die
    ingest.execute(FileDocumentSource(kb), sync=True)
    """
)


def ingest_killed_before_index(
    index: type, lite_uri: str, collection: str, kb: Path, folder: Path
) -> None:
    """Run that ingest of ``kb`` in a child process (it opens the Lite file itself, so the
    caller has closed its connection) and check the child died by SIGKILL."""
    script = folder / "killed_ingest.py"
    source = _SCRIPT.format(module=index.__module__, index=index.__name__)
    script.write_text(source, encoding="utf-8")
    child = subprocess.run(
        [sys.executable, str(script), lite_uri, collection, str(kb)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(Path.cwd())},
    )
    assert child.returncode == -9, child.stderr[-2000:]
