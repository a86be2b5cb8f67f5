"""The BM25 text analysis: English stemming and stop words, Chinese segmentation, mixed."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lookup_knowledge.adapters.text import SnowballJiebaAnalyzer
from lookup_knowledge.domain.errors import ConfigurationError

ANALYZER = SnowballJiebaAnalyzer()


def test_english_words_are_stemmed_and_stop_words_dropped() -> None:
    assert ANALYZER.terms("The databases are running a replication failover") == [
        "databas",
        "run",
        "replic",
        "failov",
    ]
    # A query and a document with different inflections meet on one term.
    assert ANALYZER.terms("restarting consumers") == ANALYZER.terms("restart consumer")


def test_punctuation_hyphens_and_underscores_separate_terms() -> None:
    assert ANALYZER.terms("IL-10 and FOXO3; T-cells") == ["il", "10", "foxo3", "t", "cell"]
    assert ANALYZER.terms("max_connections=400") == ["max", "connect", "400"]


def test_chinese_is_segmented_into_words_not_one_run() -> None:
    terms = ANALYZER.terms("数据库主从切换怎么做")
    assert {"数据库", "主从", "切换"} <= set(terms)
    assert "怎么" not in terms  # a question word, not a topic
    assert "数据库主从切换怎么做" not in terms


def test_a_chinese_query_word_matches_inside_a_longer_document_run() -> None:
    document = set(ANALYZER.terms("本手册用于处理生产环境Redis内存使用率过高的告警"))
    assert set(ANALYZER.terms("内存")) <= document
    assert set(ANALYZER.terms("redis 内存 告警")) <= document


def test_mixed_text_splits_at_script_changes() -> None:
    assert ANALYZER.terms("Redis内存满了") == ["redi", "内存", "满"]
    # Search-mode segmentation: the compound and the word inside it.
    assert ANALYZER.terms("PgBouncer连接池") == ["pgbouncer", "连接", "连接池"]


def test_full_width_forms_and_case_are_normalised() -> None:
    assert ANALYZER.terms("ＥＲＲ－４２９") == ANALYZER.terms("err-429") == ["err", "429"]


def test_switches_and_fingerprint() -> None:
    plain = SnowballJiebaAnalyzer(stemming=False, stop_words=False)
    assert plain.terms("The running tests") == ["the", "running", "tests"]
    assert plain.fingerprint != ANALYZER.fingerprint
    assert SnowballJiebaAnalyzer().fingerprint == ANALYZER.fingerprint
    assert ANALYZER.analyse("Running tests") == "run test"
    with pytest.raises(ConfigurationError, match="language"):
        SnowballJiebaAnalyzer(language="klingon")


@given(st.text(max_size=200))
def test_every_term_survives_a_word_tokenizer_unchanged(text: str) -> None:
    # Milvus' standard tokenizer (Lite: \w+; server: alphanumeric runs) must see each
    # analysed term as one token, or documents and queries would be split differently.
    for term in ANALYZER.terms(text):
        assert term
        assert term.isalnum()
        assert term == term.casefold()


@given(st.text(max_size=200))
def test_analysis_is_deterministic_and_analyse_joins_terms(text: str) -> None:
    assert ANALYZER.terms(text) == ANALYZER.terms(text)
    assert ANALYZER.analyse(text).split() == ANALYZER.terms(text)


def test_the_fingerprint_reads_package_versions_once_per_process(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The fingerprint is in every lookup's trace; reading a package's version parses
    its metadata file (milliseconds), so it is read once, not per lookup."""
    from lookup_knowledge.adapters.text import analysis

    calls: list[str] = []

    def counting_version(package: str) -> str:
        calls.append(package)
        return "9.8.7"

    monkeypatch.setattr(analysis, "version", counting_version)
    analysis._major_minor.cache_clear()
    try:
        analyzer = SnowballJiebaAnalyzer()
        prints = {analyzer.fingerprint for _ in range(5)}
        assert len(prints) == 1
        assert "@9.8" in prints.pop()
        assert len(calls) == len(set(calls)) == 2
    finally:
        analysis._major_minor.cache_clear()
