"""Heading-aware chunking: sections by Markdown heading, then size + overlap splits.

1. ``split_sections`` walks ATX headings (``#`` .. ``######``) outside fenced code
   blocks and yields sections with their heading path (the breadcrumb, e.g.
   ``Runbook > Restart > Kafka``). A heading with no body of its own is carried into
   the next section instead of becoming a chunk of one line.
2. Each section longer than ``chunk_size`` characters is split by LangChain's
   ``RecursiveCharacterTextSplitter`` (paragraphs, then lines, sentences, words) with
   ``chunk_overlap`` characters of overlap; a section never shares a chunk with
   another, so every chunk has exactly one breadcrumb. Heading lines left alone by a
   split go in front of the next piece.
3. Chunks get ``chunk_index`` 0, 1, 2, ... in document order.

Plain-text documents (``format="text"``) skip step 1: a line starting with ``#`` in a
text file is not a heading.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from lookup_knowledge.application.ports import Chunk, Chunker, SourceDocument
from lookup_knowledge.domain.errors import InvalidInputError

_HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.+?)[ \t]*(?:#+[ \t]*)?$")
_EMPTY_HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
BREADCRUMB_SEPARATOR = " > "


@dataclass(frozen=True, slots=True)
class Section:
    path: tuple[str, ...]  # heading titles from the top level down
    text: str  # includes the section's own heading line(s)

    @property
    def breadcrumb(self) -> str:
        return BREADCRUMB_SEPARATOR.join(self.path)


def _clean_title(raw: str) -> str:
    title = raw.strip()
    title = re.sub(r"[*_`]+", "", title)
    return " ".join(title.split())


def split_sections(text: str, max_level: int = 6) -> list[Section]:
    """Sections of a Markdown text, in order, each with its heading path."""
    sections: list[Section] = []
    stack: list[tuple[int, str]] = []
    current: list[str] = []
    current_path: tuple[str, ...] = ()
    carried: list[str] = []  # heading lines of sections without a body
    fence: str | None = None

    def flush(next_is_child: bool) -> None:
        nonlocal current, carried
        body = [line for line in current if not _HEADING.match(line)]
        has_body = any(line.strip() for line in body)
        if has_body:
            sections.append(Section(current_path, "".join([*carried, *current]).strip("\n")))
            carried = []
        elif next_is_child:
            carried.extend(current)
        # else: a heading without a body whose next heading is not its child carries
        # nothing a reader could use; it is dropped (its parents stay carried).
        current = []

    for line in text.splitlines(keepends=True):
        stripped = line.rstrip("\r\n")
        fence_match = _FENCE.match(stripped)
        if fence is not None:
            if (
                fence_match
                and fence_match.group(1)[0] == fence[0]
                and len(fence_match.group(1)) >= len(fence)
            ):
                fence = None
            current.append(line)
            continue
        if fence_match:
            fence = fence_match.group(1)
            current.append(line)
            continue
        heading = _HEADING.match(stripped)
        if heading and len(heading.group(1)) <= max_level and not _EMPTY_HEADING.match(stripped):
            level = len(heading.group(1))
            title = _clean_title(heading.group(2))
            previous_level = stack[-1][0] if stack else 0
            flush(next_is_child=level > previous_level and bool(current))
            while stack and stack[-1][0] >= level:
                stack.pop()
            stack.append((level, title))
            current_path = tuple(t for _, t in stack if t)
            current.append(line)
            continue
        current.append(line)
    flush(next_is_child=False)
    if carried:
        sections.append(Section(current_path, "".join(carried).strip("\n")))
    return sections


def _is_heading_only(piece: str) -> bool:
    lines = [line for line in piece.splitlines() if line.strip()]
    return bool(lines) and all(_HEADING.match(line) for line in lines)


def _attach_heading_only_pieces(pieces: list[str]) -> list[str]:
    """A split that left the section's heading lines alone (the body was one long
    paragraph) puts them in front of the next piece instead of in a chunk of their
    own; that chunk may exceed the size by the heading's length."""
    out: list[str] = []
    pending = ""
    for piece in pieces:
        if _is_heading_only(piece) and piece is not pieces[-1]:
            pending = f"{pending}\n\n{piece}" if pending else piece
            continue
        out.append(f"{pending}\n\n{piece}" if pending else piece)
        pending = ""
    return out


class MarkdownChunker(Chunker):
    def __init__(
        self, *, chunk_size: int = 1000, chunk_overlap: int = 150, max_heading_level: int = 6
    ) -> None:
        if chunk_size < 50 or chunk_size > 16000:
            raise InvalidInputError("chunk_size must be between 50 and 16000 characters")
        if chunk_overlap < 0 or chunk_overlap >= chunk_size:
            raise InvalidInputError("chunk_overlap must be >= 0 and < chunk_size")
        if not 1 <= max_heading_level <= 6:
            raise InvalidInputError("max_heading_level must be between 1 and 6")
        from langchain_text_splitters import RecursiveCharacterTextSplitter

        self._size = chunk_size
        self._overlap = chunk_overlap
        self._levels = max_heading_level
        self._splitter = RecursiveCharacterTextSplitter(
            chunk_size=chunk_size,
            chunk_overlap=chunk_overlap,
            separators=["\n\n", "\n", ". ", " ", ""],
            keep_separator="end",
            strip_whitespace=True,
        )

    @property
    def fingerprint(self) -> str:
        return f"markdown-v1/size={self._size}/overlap={self._overlap}/levels={self._levels}"

    def chunk(self, document: SourceDocument) -> list[Chunk]:
        if document.format == "markdown":
            sections = split_sections(document.text, self._levels)
        else:
            sections = [Section((), document.text)]
        chunks: list[Chunk] = []
        for section in sections:
            pieces = (
                [section.text.strip()]
                if len(section.text) <= self._size
                else self._splitter.split_text(section.text)
            )
            pieces = _attach_heading_only_pieces([p for p in pieces if p.strip()])
            for piece in pieces:
                chunks.append(
                    Chunk(
                        doc_id=document.doc_id,
                        chunk_index=len(chunks),
                        text=piece,
                        title=document.title,
                        breadcrumb=section.breadcrumb,
                    )
                )
        return chunks
