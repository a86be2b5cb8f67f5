"""What the dense index beside Milvus Lite is made of: its rows, where it lives, the
FAISS module (imported on first use) and the small string codes of its filter columns."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: The folder inside a Milvus Lite folder that holds one dense index per collection.
DENSE_DIR = "lookup_knowledge_dense"


@dataclass(frozen=True, slots=True)
class DenseRow:
    """One chunk row as the index keeps it."""

    key: str
    doc_key: str
    vector: Sequence[float]
    category: str = ""
    tenant: str = ""
    allowed_groups: tuple[str, ...] = ()
    public: bool = False


#: Reads rows from Milvus: all of them (None) or those of the given document keys.
DenseRowReader = Callable[[Sequence[str] | None], Iterable[DenseRow]]


def dense_root(lite_path: str, collection: str) -> Path:
    return Path(lite_path) / DENSE_DIR / collection


def faiss_module() -> Any:
    """The ``faiss`` module (imported on first use; typed loosely: its stubs lag the API)."""
    import faiss

    return faiss


def available() -> bool:
    """True when FAISS can be imported (milvus-lite depends on ``faiss-cpu``)."""
    try:
        import faiss  # noqa: F401
    except ImportError:  # pragma: no cover - installed with milvus-lite
        return False
    return True


class Codes:
    """Strings as small integers (category and tenant columns)."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self._ids: dict[str, int] = {}

    def code(self, name: str) -> int:
        found = self._ids.get(name)
        if found is None:
            found = self._ids[name] = len(self.names)
            self.names.append(name)
        return found

    @classmethod
    def of(cls, names: object, codes: Iterable[Any]) -> Codes:
        """The codes a file stored: ``names`` (distinct strings) in code order;
        ``ValueError`` / ``TypeError`` when ``codes`` holds one that is not among them."""
        if type(names) is not list or not set(map(type, names)) <= {str}:
            raise TypeError("the names are not a list of strings")
        made = cls()
        made.names = list(names)
        made._ids = {name: code for code, name in enumerate(made.names)}
        if len(made._ids) != len(made.names):
            raise ValueError("a name is coded twice")
        codes = list(codes)
        if codes and (
            not set(map(type, codes)) <= {int} or min(codes) < 0 or max(codes) >= len(made.names)
        ):
            raise ValueError("a code outside the names")
        return made

    def codes(self, names: Sequence[str]) -> list[int]:
        """The code of each of ``names``; new ones are coded in the order they first
        come, as ``code`` one by one would."""
        for name in dict.fromkeys(names):
            self.code(name)
        return list(map(self._ids.__getitem__, names))

    def find(self, name: str) -> int:
        return self._ids.get(name, -1)


__all__ = [
    "DENSE_DIR",
    "Codes",
    "DenseRow",
    "DenseRowReader",
    "available",
    "dense_root",
    "faiss_module",
]
