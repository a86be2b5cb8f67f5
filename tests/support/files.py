"""Writing small document trees for ingest tests."""

from __future__ import annotations

from pathlib import Path


def write(root: Path, relative: str, text: str) -> Path:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def long_markdown(title: str, sections: int, words: str = "lorem ipsum dolor") -> str:
    parts = [f"# {title}\n"]
    for n in range(sections):
        parts.append(f"## Section {n}\n\n" + " ".join(f"{words} {n}" for _ in range(12)) + "\n")
    return "\n".join(parts)
