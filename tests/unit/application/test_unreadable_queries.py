"""A hybrid lookup whose query the embedder cannot read is answered from BM25 alone."""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import given
from hypothesis import strategies as st

from lookup_knowledge.adapters.embedders.onnx import reads_latin
from lookup_knowledge.application.lookup import LookupConfig, PayloadProfile
from lookup_knowledge.application.lookup.retriever import UNREADABLE_QUERY
from lookup_knowledge.domain.model import SearchMode
from tests.fakes import FakeEmbedder, FakeSearch, chunk, make_lookup


class EnglishOnly(FakeEmbedder):
    def reads(self, text: str) -> bool:
        return reads_latin(text)


def rows() -> Sequence[object]:
    return [chunk("kb/a.md", 0, 0.9), chunk("kb/b.md", 0, 0.8)]


def test_a_query_the_embedder_cannot_read_searches_bm25_only_and_says_so() -> None:
    embedder = EnglishOnly()
    fx = make_lookup(
        FakeSearch(rows()),  # type: ignore[arg-type]
        embedder=embedder,
        config=LookupConfig(mode=SearchMode.HYBRID),
    )
    result = fx.lookup.execute("数据库主从切换怎么做", session_id="s")
    assert [r.mode for r in fx.search.requests] == [SearchMode.SPARSE]
    assert embedder.queries == []  # no vector asked for
    trace = result.retrieval_trace
    assert trace["mode"] == "sparse"
    assert trace["requestedMode"] == "hybrid"
    assert trace["modeReason"] == UNREADABLE_QUERY
    agent = result.to_tool_json(PayloadProfile.AGENT)["retrievalTrace"]
    assert agent["mode"] == "sparse"
    assert agent["modeReason"] == UNREADABLE_QUERY
    assert fx.records[-1].retrieval_mode == "sparse"


def test_a_readable_query_an_explicit_mode_or_the_switch_off_keep_the_mode() -> None:
    for query, mode, switch, searched in [
        ("PgBouncer pool 大小", SearchMode.HYBRID, True, SearchMode.HYBRID),  # mostly English
        ("数据库主从切换", SearchMode.DENSE, True, SearchMode.DENSE),  # asked for dense
        ("数据库主从切换", SearchMode.HYBRID, False, SearchMode.HYBRID),  # switched off
    ]:
        fx = make_lookup(
            FakeSearch(rows()),  # type: ignore[arg-type]
            embedder=EnglishOnly(),
            config=LookupConfig(mode=mode, bm25_only_when_unreadable=switch),
        )
        result = fx.lookup.execute(query, session_id="s")
        assert [r.mode for r in fx.search.requests] == [searched], query
        assert "requestedMode" not in result.retrieval_trace
        assert result.retrieval_trace["modeReason"] is None
        assert "modeReason" not in result.to_tool_json(PayloadProfile.AGENT)["retrievalTrace"]


def test_an_embedder_that_reads_every_language_keeps_hybrid() -> None:
    fx = make_lookup(
        FakeSearch(rows()),  # type: ignore[arg-type]
        config=LookupConfig(mode=SearchMode.HYBRID),
    )
    fx.lookup.execute("数据库主从切换怎么做", session_id="s")
    assert [r.mode for r in fx.search.requests] == [SearchMode.HYBRID]


def test_what_minilm_reads() -> None:
    assert not reads_latin("数据库主从切换怎么做")
    assert not reads_latin("кэш переполнен")  # Cyrillic
    assert not reads_latin("日志 a")  # one Latin letter is not a word
    # Mixed: read while at least half the words are Latin (a Han character is half a word).
    assert reads_latin("Redis 内存")
    assert reads_latin("Kafka consumer lag 怎么办")
    assert not reads_latin("PgBouncer 连接池大小怎么调整")  # one English word of five
    assert not reads_latin("Excel кэш переполнен")
    assert reads_latin("PG-53300")
    assert reads_latin("53300")  # no letters at all: not another language
    assert reads_latin("Ça déborde")
    assert reads_latin("")


@given(st.text(alphabet=st.characters(min_codepoint=0x4E00, max_codepoint=0x9FFF), min_size=1))
def test_text_in_han_alone_is_never_read(text: str) -> None:
    assert not reads_latin(text)


_HAN = st.characters(min_codepoint=0x4E00, max_codepoint=0x9FFF)
_LATIN = st.from_regex(r"[A-Za-z]{2,8}", fullmatch=True)


@given(st.lists(_LATIN, min_size=1, max_size=6), st.data())
def test_a_text_at_least_half_in_latin_words_is_read(words: list[str], data: st.DataObject) -> None:
    han = data.draw(st.text(alphabet=_HAN, max_size=2 * len(words)))
    assert reads_latin(" ".join([*words, han]))
    assert reads_latin(" ".join([han, *words]))


@given(st.lists(_LATIN, max_size=4), st.data())
def test_a_text_mostly_in_han_is_not_read(words: list[str], data: st.DataObject) -> None:
    han = data.draw(st.text(alphabet=_HAN, min_size=2 * len(words) + 1, max_size=40))
    assert not reads_latin(" ".join([*words, han]))
