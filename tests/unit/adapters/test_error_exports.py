"""Every error a host may catch is exported from ``lookup_knowledge``
with its stable code, and the table of them in docs/operations.md (linked from the
README) is the hierarchy in
``domain/errors.py`` (a new error, a renamed code or a moved parent fails here)."""

from __future__ import annotations

import inspect
from pathlib import Path

import lookup_knowledge
from lookup_knowledge.domain import errors

OPERATIONS = Path(__file__).resolve().parents[3] / "docs" / "operations.md"
START, END = "<!-- error-table:start -->\n", "<!-- error-table:end -->"


def hierarchy() -> list[type[errors.LookupKnowledgeError]]:
    """The project's errors, each after its parent (source order within a parent)."""
    found = [
        cls
        for _, cls in inspect.getmembers(errors, inspect.isclass)
        if issubclass(cls, errors.LookupKnowledgeError) and cls.__module__ == errors.__name__
    ]
    found.sort(key=lambda cls: inspect.getsourcelines(cls)[1])
    return found


def error_table() -> str:
    lines = ["| error | code | is a | raised when |", "|---|---|---|---|"]
    for cls in hierarchy():
        parent = cls.__mro__[1].__name__ if cls is not errors.LookupKnowledgeError else "-"
        doc = (inspect.getdoc(cls) or "").split("\n\n", 1)[0].replace("\n", " ")
        lines.append(f"| `{cls.__name__}` | `{cls.code}` | {parent} | {doc} |")
    return "\n".join(lines) + "\n"


def test_every_error_type_is_exported_with_its_code() -> None:
    codes: dict[str, str] = {}
    for cls in hierarchy():
        assert cls.__name__ in lookup_knowledge.__all__
        assert getattr(lookup_knowledge, cls.__name__) is cls
        assert cls.__doc__, f"{cls.__name__} needs a docstring for the error table"
        assert cls.code not in codes.values(), f"{cls.__name__} repeats code {cls.code}"
        codes[cls.__name__] = cls.code
    assert set(lookup_knowledge.ERROR_TYPES) == set(codes)


def test_documented_error_table_matches_the_hierarchy() -> None:
    text = OPERATIONS.read_text(encoding="utf-8")
    start = text.index(START) + len(START)
    end = text.index(END)
    assert text[start:end] == error_table()
