"""What an index beside Milvus Lite repairs and rebuilds from, in memory: the rows the
collection holds, read all at once (None) or by document key, with the reads recorded."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Generic, Protocol, TypeVar


class _Row(Protocol):
    @property
    def key(self) -> str: ...

    @property
    def doc_key(self) -> str: ...


R = TypeVar("R", bound=_Row)


class RowsInMilvus(Generic[R]):
    """``fail_after``: the first read raises after yielding that many rows (a connection
    lost mid-read); later reads succeed."""

    def __init__(self, rows: Sequence[R] = (), *, fail_after: int | None = None) -> None:
        self.rows = {r.key: r for r in rows}
        self.reads: list[Sequence[str] | None] = []
        self._fail_after = fail_after

    def read(self, doc_keys: Sequence[str] | None) -> Iterator[R]:
        self.reads.append(doc_keys)
        wanted = None if doc_keys is None else set(doc_keys)
        found = [r for r in self.rows.values() if wanted is None or r.doc_key in wanted]
        fail_after, self._fail_after = self._fail_after, None
        return iter(found) if fail_after is None else _failing(found, fail_after)

    def count(self) -> int:
        return len(self.rows)


def _failing(rows: Sequence[R], after: int) -> Iterator[R]:
    yield from rows[:after]
    raise RuntimeError("Milvus went away mid-read")
