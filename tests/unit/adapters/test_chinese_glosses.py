"""English glosses of Chinese query words (CC-CEDICT) for cross-language BM25 queries."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lookup_knowledge.adapters.text import SnowballJiebaAnalyzer
from lookup_knowledge.adapters.text.glosses import (
    MAX_SENSES,
    ChineseGlosses,
    dictionary_path,
    parse,
)
from lookup_knowledge.domain.errors import ConfigurationError

LINES = [
    "# CC-CEDICT\n",
    "#! version=1\n",
    "日誌 日志 [ri4 zhi4] /journal/log (computing)/\n",
    "磁盤 磁盘 [ci2 pan2] /(computer) disk/CL:張|张[zhang1]/\n",
    "回滾 回滚 [hui2 gun3] /(computing) to roll back/rollback/\n",
    "北京 北京 [Bei3 jing1] /Beijing, capital of the People's Republic of China/\n",
    "滿 满 [man3] /to fill/full/\n",
    "過期 过期 [guo4 qi1] /to be overdue/to exceed the time limit/variant of 過期/\n",
    "做法 做法 [zuo4 fa3] /way of handling sth/method for making/work method/recipe/practice/\n",
]
TABLE = parse(LINES)


def test_the_table_keeps_cleaned_senses_of_words_of_two_characters_or_more() -> None:
    assert TABLE["日志"] == ("journal", "log")
    assert TABLE["日誌"] == ("journal", "log")  # the traditional form too
    assert TABLE["磁盘"] == ("disk",)  # notes and classifiers are dropped
    assert TABLE["回滚"] == ("roll back", "rollback")  # "to " is dropped
    assert TABLE["过期"] == ("be overdue",)  # "exceed the time limit": > 3 words
    assert "北京" not in TABLE  # a proper name (capitalised pinyin)
    assert "满" not in TABLE  # one character: too ambiguous to gloss
    # "way of handling sth" has four words: dropped; at most `limit` senses.
    assert ChineseGlosses(TABLE).senses("做法", 2) == ("method for making", "work method")
    assert ChineseGlosses(TABLE).senses("没有这个词", 3) == ()


def test_the_bundled_dictionary_is_read_from_its_package() -> None:
    assert dictionary_path().is_file()
    glosses = ChineseGlosses()
    assert "database" in glosses.senses("数据库", 3)
    assert glosses.senses("证书", 3)[:2] == ("credentials", "certificate")


def test_a_chinese_query_gets_the_english_terms_of_its_words() -> None:
    analyzer = SnowballJiebaAnalyzer(chinese_query_glosses=3, glosses=ChineseGlosses(TABLE))
    query = "日志服务器磁盘满了怎么办"
    terms = analyzer.query_terms(query)
    base = analyzer.terms(query)
    assert terms[: len(base)] == base  # the Chinese terms first, unchanged
    assert set(terms[len(base) :]) == {"journal", "log", "disk"}
    assert analyzer.analyse_query(query) == " ".join(terms)
    assert analyzer.query_expansion == "zh-en-glosses/cc-cedict/senses=3"


def test_documents_english_queries_and_the_switch_off_are_untouched() -> None:
    on = SnowballJiebaAnalyzer(chinese_query_glosses=3, glosses=ChineseGlosses(TABLE))
    off = SnowballJiebaAnalyzer(chinese_query_glosses=0)
    assert on.terms("日志服务器磁盘满了") == off.terms("日志服务器磁盘满了")  # documents
    assert on.fingerprint == off.fingerprint  # query side only: no re-ingest
    assert on.query_terms("the disk of the log host is full") == on.terms(
        "the disk of the log host is full"
    )
    assert off.query_terms("日志服务器磁盘满了") == off.terms("日志服务器磁盘满了")
    assert off.query_expansion is None


def test_a_gloss_term_the_query_holds_already_is_not_added_twice() -> None:
    analyzer = SnowballJiebaAnalyzer(chinese_query_glosses=3, glosses=ChineseGlosses(TABLE))
    terms = analyzer.query_terms("disk 磁盘 日志 回滚")
    assert terms.count("disk") == 1
    assert terms.count("log") == 1
    assert terms.count("rollback") == 1


def test_the_number_of_senses_is_bounded() -> None:
    with pytest.raises(ConfigurationError, match="chinese-query-glosses"):
        SnowballJiebaAnalyzer(chinese_query_glosses=6)
    with pytest.raises(ConfigurationError):
        SnowballJiebaAnalyzer(chinese_query_glosses=-1)
    one = SnowballJiebaAnalyzer(chinese_query_glosses=1, glosses=ChineseGlosses(TABLE))
    assert one.query_terms("日志") == [*one.terms("日志"), "journal"]


@given(st.text(alphabet=st.sampled_from("日志服务器磁盘满了回滚做法北京 disk,Log-3"), max_size=40))
def test_query_terms_extend_terms_and_survive_a_word_tokenizer(text: str) -> None:
    analyzer = SnowballJiebaAnalyzer(chinese_query_glosses=3, glosses=ChineseGlosses(TABLE))
    terms = analyzer.query_terms(text)
    base = analyzer.terms(text)
    assert terms[: len(base)] == base
    assert all(t.isalnum() and " " not in t for t in terms)
    added = terms[len(base) :]
    assert len(added) == len(set(added))
    assert not set(added) & set(base)


def test_a_long_chinese_query_gets_a_bounded_number_of_gloss_terms() -> None:
    from lookup_knowledge.adapters.text.analysis import MAX_GLOSS_TERMS

    analyzer = SnowballJiebaAnalyzer(chinese_query_glosses=5)
    query = "数据库服务器日志磁盘证书账户删除保留发布回滚工程师事故等级定义交接班" * 20
    terms = analyzer.query_terms(query)
    assert 0 < len(terms) - len(analyzer.terms(query)) <= MAX_GLOSS_TERMS


def test_the_lazy_dictionary_gives_every_word_the_senses_the_full_parse_gives() -> None:
    """The bundled dictionary is read as lines plus an index of their words, and a word's
    senses are parsed on look-up; for every word of the real dictionary that is the same
    senses, in the same order, as parsing every line, and nothing for any other word."""
    full = parse()
    lazy = ChineseGlosses()
    assert all(lazy.senses(word, MAX_SENSES) == senses for word, senses in full.items())
    assert lazy.senses("没有这个词", 3) == ()
    assert lazy.senses("数据库", 1) == full["数据库"][:1]
    indexed = lazy._index
    assert indexed is not None
    assert "没有这个词" not in indexed._senses  # a word outside the dictionary is not cached
    others = [word for word in indexed._index if word not in full]
    assert others  # one-sense-less and proper-name lines are indexed but give nothing
    assert all(lazy.senses(word, MAX_SENSES) == () for word in others)


def test_a_compound_the_dictionary_lacks_is_glossed_through_its_parts() -> None:
    """健康检查 (health check) is not in CC-CEDICT; its parts 健康 and 检查 are."""
    analyzer = SnowballJiebaAnalyzer(chinese_query_glosses=3)
    terms = analyzer.query_terms("HAProxy 健康检查的配置")
    assert {"health", "inspect", "configur"} <= set(terms)
    concepts = analyzer.query_concepts("HAProxy 健康检查的配置")
    assert (("haproxi",),) in concepts
    assert any(("健康",) in forms and ("health",) in forms for forms in concepts)
    assert any(("检查",) in forms and ("inspect",) in forms for forms in concepts)


def test_each_glossed_word_is_one_concept_whose_forms_are_the_word_and_its_senses() -> None:
    analyzer = SnowballJiebaAnalyzer(chinese_query_glosses=3, glosses=ChineseGlosses(TABLE))
    concepts = analyzer.query_concepts("rollback 日志磁盘满了")
    assert concepts[0] == (("rollback",),)
    assert (("日志",), ("journal",), ("log",)) in concepts
    assert (("磁盘",), ("disk",)) in concepts
    # a query without glosses: every term is its own concept of one form
    assert analyzer.query_concepts("the disk is full") == tuple(
        ((t,),) for t in analyzer.query_terms("the disk is full")
    )


@given(
    st.text(
        alphabet=st.sampled_from("日志服务器磁盘满了回滚做法北京健康检查 disk,Log-3"), max_size=40
    )
)
def test_every_form_of_a_concept_is_made_of_terms_the_query_sends(text: str) -> None:
    analyzer = SnowballJiebaAnalyzer(chinese_query_glosses=3)
    sent = set(analyzer.query_terms(text))
    concepts = analyzer.query_concepts(text)
    assert all(form and set(form) <= sent for forms in concepts for form in forms)
    # every term the query's own words give is counted in some concept, unless it is a
    # compound's whole-word piece beside parts that gloss every character of it
    counted = {t for forms in concepts for form in forms for t in form}
    assert all(t.isascii() or t in counted or len(t) > 2 for t in analyzer.terms(text))
