"""Documents from files and folders (Markdown, plain text, HTML) and their chunking."""

from __future__ import annotations

from lookup_knowledge.adapters.files.chunking import MarkdownChunker, split_sections
from lookup_knowledge.adapters.files.frontmatter import split_front_matter
from lookup_knowledge.adapters.files.html_text import html_to_markdown
from lookup_knowledge.adapters.files.loader import DEFAULT_EXTENSIONS, FileDocumentSource

__all__ = [
    "DEFAULT_EXTENSIONS",
    "FileDocumentSource",
    "MarkdownChunker",
    "html_to_markdown",
    "split_front_matter",
    "split_sections",
]
