"""What lexical (BM25) matching sees of a chunk; the analysis itself is the
``TextAnalyzer`` port (``application/ports/analysis.py``)."""

from __future__ import annotations


def lexical_text(title: str, breadcrumb: str, text: str) -> str:
    """What lexical (BM25) matching sees of a chunk before analysis: the document's
    title, the heading path and the text. A breadcrumb that starts with the title (the
    document's top heading) says it once."""
    parts = [title]
    if breadcrumb and breadcrumb != title:
        head, sep, rest = breadcrumb.partition(" > ")
        parts.append(rest if sep and head == title else breadcrumb)
    parts.append(text)
    return "\n".join(p for p in parts if p)
