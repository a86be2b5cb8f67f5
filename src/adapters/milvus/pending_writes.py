"""The journal an index beside Milvus Lite keeps of the documents a Milvus write is about
to touch (``pending.jsonl``: one JSON list of document keys per line, fsync'd before the
write): what a crash or a failed write leaves for the next open to re-read from Milvus.
Shared by the full-text index (``fulltext.py``) and the dense index (``dense_index.py``)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from lookup_knowledge.adapters.durable_files import DurableFiles

JOURNAL_FILE = "pending.jsonl"


class PendingWrites:
    def __init__(self, root: Path, files: DurableFiles) -> None:
        self._path = root / JOURNAL_FILE
        self._files = files

    def doc_keys(self) -> list[str]:
        """Every document key journalled and not cleared, first seen first."""
        try:
            lines = self._path.read_text(encoding="utf-8").splitlines()
        except FileNotFoundError:
            return []
        out: dict[str, None] = {}
        for line in lines:
            try:
                entry = json.loads(line)
            except ValueError:
                continue  # a line torn by the crash: its write never reached Milvus
            if isinstance(entry, list):
                out.update((str(d), None) for d in entry)
        return list(out)

    def append(self, doc_keys: Iterable[str]) -> None:
        """Journal ``doc_keys`` (one line, fsync'd); nothing for none."""
        unique = list(dict.fromkeys(doc_keys))
        if unique:
            line = json.dumps(unique, ensure_ascii=False) + "\n"
            self._files.append_line(self._path, line.encode("utf-8"))

    def clear(self) -> None:
        self._files.remove(self._path)


__all__ = ["JOURNAL_FILE", "PendingWrites"]
