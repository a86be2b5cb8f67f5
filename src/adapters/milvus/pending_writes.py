"""The journal an index beside Milvus Lite keeps of the documents a Milvus write is about
to touch (``pending.jsonl``: one JSON list of document keys per line, fsync'd before the
write): what a crash or a failed write leaves for the next open to re-read from Milvus.
Shared by the full-text index (``fulltext.py``) and the dense index (``dense_index.py``)."""

from __future__ import annotations

import json
import threading
from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
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


class JournalledIndex(ABC):
    """The write protocol an index beside Lite follows with Milvus: ``mark`` the documents
    (journalled, fsync'd) before the Milvus write, ``failed`` when that write failed (the
    next use repairs from Milvus), ``settle`` once Milvus has flushed (persist, then clear
    the journal)."""

    _lock: threading.RLock
    _pending: PendingWrites
    _needs_repair: bool

    @abstractmethod
    def _ensure_open(self) -> None: ...

    @abstractmethod
    def _is_open(self) -> bool:
        """Opened in this process (an index never opened is checked by its next open)."""

    @abstractmethod
    def _repair(self, doc_keys: Sequence[str]) -> None: ...

    @abstractmethod
    def _persist(self) -> None:
        """Make what is applied in memory durable (before the journal is cleared)."""

    def mark(self, doc_keys: Iterable[str]) -> None:
        """Journal ``doc_keys`` (fsync'd) before Milvus writes them."""
        unique = list(dict.fromkeys(doc_keys))
        if unique:  # no document, nothing to open or journal
            self._ensure_open()
            with self._lock:
                self._pending.append(unique)

    def failed(self) -> None:
        """A Milvus write failed after ``mark``: repair from Milvus before the next use."""
        self._needs_repair = True

    def settle(self) -> None:
        """Milvus has flushed: persist what is applied, then clear the journal."""
        with self._lock:
            if not self._is_open():
                return  # never opened in this process: the next open checks
            if self._needs_repair:
                self._repair(self._pending.doc_keys())
                return
            self._persist()
            self._pending.clear()


__all__ = ["JOURNAL_FILE", "JournalledIndex", "PendingWrites"]
