"""Properties of the token-aware chunker: every chunk fits the embedder's window with its
heading path, and no text is lost."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lookup_knowledge.adapters.files.chunking import MIN_PIECE_TOKENS, MarkdownChunker
from lookup_knowledge.application.ingest import SourceDocument, embedding_input

CHUNKER = MarkdownChunker()  # all-MiniLM-L6-v2's tokenizer and 256-token window
SMALL = MarkdownChunker(chunk_size=64, chunk_overlap=8)

WORDS = st.sampled_from(
    ["replica", "failover", "PgBouncer", "pool_size", "ERR-429", "数据库", "主从切换", "内存",
     "the", "a", "Kafka", "lag", "10.20.0.0/16", "—", "supercalifragilisticexpialidocious",
     "重试", "SELECT", "*", "x" * 40]
)  # fmt: skip
PARAGRAPH = st.lists(WORDS, min_size=1, max_size=120).map(" ".join)
SECTION = st.tuples(
    st.integers(1, 3), st.lists(WORDS, min_size=1, max_size=12).map(" ".join),
    st.lists(PARAGRAPH, min_size=1, max_size=4),
)  # fmt: skip


def _markdown(sections: list[tuple[int, str, list[str]]]) -> str:
    parts = []
    for level, title, paragraphs in sections:
        parts.append(f"{'#' * level} {title}")
        parts.extend(paragraphs)
    return "\n\n".join(parts) + "\n"


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(SECTION, min_size=1, max_size=5), st.sampled_from(["markdown", "text"]))
def test_chunks_fit_the_window_and_lose_no_text(
    sections: list[tuple[int, str, list[str]]], fmt: str
) -> None:
    text = _markdown(sections)
    doc = SourceDocument("d", text, title="Runbook", format=fmt)
    for chunker, limit in ((CHUNKER, 256), (SMALL, 64)):
        chunks = chunker.chunk(doc)
        assert [c.chunk_index for c in chunks] == list(range(len(chunks)))
        for chunk in chunks:
            assert chunker.count_tokens(chunk.text) <= limit
            # What is embedded (heading path + text) fits 256 with [CLS] and [SEP],
            # unless the heading path alone leaves less than MIN_PIECE_TOKENS of room.
            prefix = chunker.count_tokens(chunk.breadcrumb or chunk.title)
            if prefix + 2 + MIN_PIECE_TOKENS <= 256:
                assert chunker.count_tokens(embedding_input(chunk)) + 2 <= 256
        covered = " ".join(c.text for c in chunks).split()
        for word in text.split():
            assert word in covered


_TOKENIZER_SIZED: dict[tuple[str, int], object] = {}


def _tokenizer_sized(kind: str, capacity: int) -> object:
    """The splitter sized by the tokenizer's own sizer (a copy of the tokenizer each)."""
    from semantic_text_splitter import MarkdownSplitter, TextSplitter

    if (kind, capacity) not in _TOKENIZER_SIZED:
        cls = MarkdownSplitter if kind == "markdown" else TextSplitter
        _TOKENIZER_SIZED[kind, capacity] = cls.from_huggingface_tokenizer(
            CHUNKER._tokenizer, capacity, overlap=min(32, capacity // 4), trim=True
        )
    return _TOKENIZER_SIZED[kind, capacity]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(SECTION, min_size=1, max_size=4),
    st.sampled_from(["markdown", "text"]),
    st.sampled_from([MIN_PIECE_TOKENS, 48, 101, 200, 243]),
)
def test_pieces_are_cut_where_the_tokenizers_own_sizer_cuts_them(
    sections: list[tuple[int, str, list[str]]], kind: str, capacity: int
) -> None:
    """The chunker sizes its splitters by counting with its one tokenizer (no copy of the
    tokenizer per capacity): the pieces are the ones the tokenizer-sized splitter gives."""
    text = _markdown(sections)
    ours = CHUNKER._splitter(kind, capacity).chunks(text)
    assert ours == _tokenizer_sized(kind, capacity).chunks(text)  # type: ignore[attr-defined]
