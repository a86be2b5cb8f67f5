"""Heading-aware, token-aware chunking: sections by Markdown heading, then token splits.

1. ``split_sections`` finds the headings with a CommonMark parser (``markdown-it-py``:
   ATX ``#`` and setext ``===``/``---`` headings; ``#`` lines in fenced code, lists or
   block quotes are not headings) and yields sections with their heading path (the
   breadcrumb, e.g. ``Runbook > Restart > Kafka``). A heading with no body of its own is
   carried into the next section instead of becoming a chunk of one line.
2. Each section is split by ``semantic-text-splitter`` (Markdown-aware: it prefers
   heading, paragraph, list and sentence boundaries) into pieces counted in tokens of
   the embedder's tokenizer, with ``chunk_overlap`` tokens of overlap. The budget of a
   piece is what the embedder can see: its window (256 tokens for all-MiniLM-L6-v2)
   minus the special tokens and the heading path or title that is embedded in front
   of the text (``embedding_input``), and at most ``chunk_size``. So no chunk has an
   unembedded tail. A section never shares a chunk with another, so every chunk has
   exactly one breadcrumb; the section's heading lines stay in front of its first piece.
3. Chunks get ``chunk_index`` 0, 1, 2, ... in document order.

Plain-text documents (``format="text"``) skip step 1 and split as plain text: a line
starting with ``#`` in a text file is not a heading.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from lookup_knowledge.application.ingest import embedding_input
from lookup_knowledge.application.ports import Chunk, Chunker, SourceDocument
from lookup_knowledge.domain.errors import InvalidInputError

BREADCRUMB_SEPARATOR = " > "
#: all-MiniLM-L6-v2's max sequence length (the ONNX embedder truncates there).
DEFAULT_WINDOW_TOKENS = 256
#: A piece never gets fewer tokens than this, even under a very long heading path.
MIN_PIECE_TOKENS = 32


@dataclass(frozen=True, slots=True)
class Heading:
    level: int
    title: str
    first_line: int  # 0-based, inclusive
    end_line: int  # exclusive (a setext heading spans two lines)


@dataclass(frozen=True, slots=True)
class Section:
    path: tuple[str, ...]  # heading titles from the top level down
    text: str  # includes the section's own heading line(s)
    heading_lines: int = 0  # how many of the first lines are (carried) heading lines

    @property
    def breadcrumb(self) -> str:
        return BREADCRUMB_SEPARATOR.join(self.path)


@lru_cache(maxsize=1)
def _parser() -> Any:
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark")


def _clean_title(raw: str) -> str:
    title = re.sub(r"[*_`]+", "", raw.strip())
    return " ".join(title.split())


def markdown_headings(text: str) -> list[Heading]:
    """The document's top-level headings (not those inside lists or block quotes)."""
    tokens = _parser().parse(text)
    headings: list[Heading] = []
    for i, token in enumerate(tokens):
        if token.type != "heading_open" or token.level != 0 or token.map is None:
            continue
        inline = tokens[i + 1] if i + 1 < len(tokens) else None
        raw = ""
        if inline is not None and inline.type == "inline":
            raw = "".join(
                child.content
                for child in (inline.children or [])
                if child.type in ("text", "code_inline", "softbreak")
            )
        headings.append(Heading(int(token.tag[1]), _clean_title(raw), token.map[0], token.map[1]))
    return headings


def first_title(text: str) -> str | None:
    """The first level-1 heading's text, ATX or setext (a document's title)."""
    for heading in markdown_headings(text):
        if heading.level == 1 and heading.title:
            return heading.title
    return None


def split_sections(text: str, max_level: int = 6) -> list[Section]:
    """Sections of a Markdown text, in order, each with its heading path."""
    lines = text.splitlines(keepends=True)
    headings = [h for h in markdown_headings(text) if h.level <= max_level]
    sections: list[Section] = []
    preamble_end = headings[0].first_line if headings else len(lines)
    preamble = "".join(lines[:preamble_end]).strip("\n")
    if preamble.strip():
        sections.append(Section((), preamble))
    stack: list[tuple[int, str]] = []
    carried: list[str] = []  # heading lines of sections without a body
    path: tuple[str, ...] = ()
    for n, heading in enumerate(headings):
        following = headings[n + 1] if n + 1 < len(headings) else None
        while stack and stack[-1][0] >= heading.level:
            stack.pop()
        stack.append((heading.level, heading.title))
        path = tuple(t for _, t in stack if t)
        own = lines[heading.first_line : heading.end_line]
        body = lines[heading.end_line : following.first_line if following else len(lines)]
        if any(line.strip() for line in body):
            heading_text = "".join([*carried, *own]).rstrip("\n")
            section_text = "".join([*carried, *own, *body]).strip("\n")
            sections.append(Section(path, section_text, heading_text.count("\n") + 1))
            carried = []
        elif following is not None and following.level > heading.level:
            carried.extend([*own, *body])  # body: blank lines only
        # else: a heading without a body whose next heading is not its child carries
        # nothing a reader could use; it is dropped (its parents stay carried).
    if carried:
        rest = "".join(carried).strip("\n")
        sections.append(Section(path, rest, rest.count("\n") + 1))
    return sections


@lru_cache(maxsize=4)
def _shipped_tokenizer() -> Any:
    from tokenizers import Tokenizer

    from lookup_knowledge.adapters.embedders.minilm_tokenizer import tokenizer_path

    tokenizer = Tokenizer.from_file(str(tokenizer_path()))
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return tokenizer


class MarkdownChunker(Chunker):
    """Chunks of at most ``chunk_size`` tokens that fit the embedder's window.

    ``tokenizer``: a ``tokenizers.Tokenizer`` (the embedder's); by default the shipped
    all-MiniLM-L6-v2 tokenizer. ``window_tokens``: the embedder's max sequence length.
    """

    def __init__(
        self,
        *,
        chunk_size: int = DEFAULT_WINDOW_TOKENS,
        chunk_overlap: int = 32,
        max_heading_level: int = 6,
        window_tokens: int = DEFAULT_WINDOW_TOKENS,
        tokenizer: Any = None,
        tokenizer_name: str = "all-MiniLM-L6-v2",
    ) -> None:
        if chunk_size < MIN_PIECE_TOKENS or chunk_size > 8192:
            raise InvalidInputError(
                f"chunk_size must be between {MIN_PIECE_TOKENS} and 8192 tokens"
            )
        if chunk_overlap < 0 or chunk_overlap >= chunk_size // 2:
            raise InvalidInputError("chunk_overlap must be >= 0 and < half of chunk_size")
        if not 1 <= max_heading_level <= 6:
            raise InvalidInputError("max_heading_level must be between 1 and 6")
        if window_tokens < 2 * MIN_PIECE_TOKENS:
            raise InvalidInputError(f"window_tokens must be >= {2 * MIN_PIECE_TOKENS}")
        self._size = chunk_size
        self._overlap = chunk_overlap
        self._levels = max_heading_level
        self._window = window_tokens
        self._tokenizer = tokenizer if tokenizer is not None else _shipped_tokenizer()
        self._tokenizer_name = tokenizer_name
        self._specials = len(self._tokenizer.encode("", add_special_tokens=True).ids)
        self._splitters: dict[tuple[str, int], Any] = {}

    @property
    def fingerprint(self) -> str:
        return (
            f"markdown-v2/tokens={self._tokenizer_name}/size={self._size}"
            f"/overlap={self._overlap}/window={self._window}/levels={self._levels}"
        )

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` without special tokens."""
        return len(self._tokenizer.encode(text, add_special_tokens=False).ids)

    def _splitter(self, kind: str, capacity: int) -> Any:
        key = (kind, capacity)
        splitter = self._splitters.get(key)
        if splitter is None:
            from semantic_text_splitter import MarkdownSplitter, TextSplitter

            cls = MarkdownSplitter if kind == "markdown" else TextSplitter
            overlap = min(self._overlap, capacity // 4)
            # Sized by this chunker's one tokenizer: ``from_huggingface_tokenizer`` copies
            # the tokenizer into each splitter (~6.5 MB and ~22 ms for MiniLM's), and the
            # capacity differs with each title's length, so an ingest of many documents
            # held dozens of copies (+235 MB for 625 SciFact documents). The count is the
            # one that splitter makes (tokens without special tokens).
            splitter = cls.from_callback(self.count_tokens, capacity, overlap=overlap, trim=True)
            self._splitters[key] = splitter
        return splitter

    def _budget(self, prefix: str) -> int:
        room = self._window - self._specials - (self.count_tokens(prefix) if prefix else 0)
        return max(MIN_PIECE_TOKENS, min(self._size, room))

    def _pieces(self, section: Section, kind: str, capacity: int) -> list[str]:
        text = section.text.strip()
        if self.count_tokens(text) <= capacity:
            return [text] if text else []
        lines = text.splitlines(keepends=True)
        head = "".join(lines[: section.heading_lines]).strip()
        body = "".join(lines[section.heading_lines :]).strip()
        if not head:
            return [p for p in self._splitter(kind, capacity).chunks(body) if p.strip()]
        # The heading lines go in front of the first piece: the body is split to the
        # room the heading leaves (newlines between them are no tokens).
        room = capacity - self.count_tokens(head)
        if room < MIN_PIECE_TOKENS:  # a heading too long to share: pieces of its own
            heads = (
                [head]
                if room >= 0
                else [p for p in self._splitter("text", capacity).chunks(head) if p.strip()]
            )
            return [*heads, *self._splitter(kind, capacity).chunks(body)]
        pieces = [p for p in self._splitter(kind, room).chunks(body) if p.strip()]
        if not pieces:
            return [head]
        return [f"{head}\n\n{pieces[0]}", *pieces[1:]]

    def chunk(self, document: SourceDocument) -> list[Chunk]:
        if document.format == "markdown":
            sections = split_sections(document.text, self._levels)
            kind = "markdown"
        else:
            sections = [Section((), document.text)]
            kind = "text"
        chunks: list[Chunk] = []
        for section in sections:
            probe = Chunk(document.doc_id, 0, "", document.title, section.breadcrumb)
            prefix = embedding_input(probe).rstrip("\n")
            for piece in self._pieces(section, kind, self._budget(prefix)):
                if not piece.strip():
                    continue
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
