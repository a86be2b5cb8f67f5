"""``SnowballJiebaAnalyzer``: the product's text analysis for BM25 (and the Verifier).

Steps, the same for a document and a query:

1. Unicode NFKC normalisation (full-width letters and digits become ASCII) and case
   folding.
2. Split into runs: a run of Han characters, or a run of other letters and digits.
   Everything else (spaces, punctuation, ``_``, ``-``, symbols) separates terms, as
   Milvus' ``standard`` tokenizer does, so ``IL-10`` gives ``il`` and ``10``.
3. Han runs are segmented by jieba (``rjieba``, the jieba-rs binding) in search mode:
   a long word also yields the dictionary words inside it (``数据库`` -> ``数据``,
   ``据库``, ``数据库``), so a query for a part of a compound still matches.
   Function words (``的``, ``了``, ``怎么`` ...) are dropped.
4. Other runs: stop words are dropped (Lucene's English set, the one Elasticsearch's
   ``english`` analyzer and the published BEIR BM25 baseline use), and the rest is
   stemmed by the Snowball stemmer of the configured language (PyStemmer).

Every term is a run of letters/digits without spaces, so analysed text survives the
``standard`` tokenizer of Milvus Lite (``\\w+``) and of a Milvus server (alphanumeric
runs) unchanged: the analysis happens here, before the text reaches the BM25 function,
and works the same on every Milvus (Lite 3.x has no stemming analyzer of its own).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from functools import cache, lru_cache
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from lookup_knowledge.adapters.text.glosses import (
    MAX_SENSES,
    ChineseGlosses,
    dictionary_path,
    shared_glosses,
)
from lookup_knowledge.application.ports import TextAnalyzer
from lookup_knowledge.domain.errors import ConfigurationError
from lookup_knowledge.domain.relevance import concepts_of_terms

#: Lucene's ``EnglishAnalyzer.ENGLISH_STOP_WORDS_SET`` (also Elasticsearch ``_english_``).
ENGLISH_STOP_WORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "but",
        "by",
        "for",
        "if",
        "in",
        "into",
        "is",
        "it",
        "no",
        "not",
        "of",
        "on",
        "or",
        "such",
        "that",
        "the",
        "their",
        "then",
        "there",
        "these",
        "they",
        "this",
        "to",
        "was",
        "will",
        "with",
    ]
)

#: Chinese function words, interjections and question words that carry no topic.
CHINESE_STOP_WORDS = frozenset(
    [
        "的",
        "了",
        "是",
        "在",
        "和",
        "与",
        "及",
        "或",
        "等",
        "吗",
        "呢",
        "吧",
        "啊",
        "呀",
        "嘛",
        "着",
        "过",
        "地",
        "得",
        "之",
        "而",
        "也",
        "都",
        "就",
        "还",
        "又",
        "把",
        "被",
        "让",
        "给",
        "从",
        "向",
        "对",
        "于",
        "以",
        "为",
        "这",
        "那",
        "这个",
        "那个",
        "这些",
        "那些",
        "这样",
        "那样",
        "一个",
        "一些",
        "什么",
        "怎么",
        "怎么办",
        "怎样",
        "如何",
        "为什么",
        "哪些",
        "哪个",
        "哪里",
        "多少",
        "是否",
        "是不是",
        "可以",
        "能",
        "会",
        "要",
        "应该",
        "需要",
        "我",
        "你",
        "他",
        "她",
        "它",
        "我们",
        "你们",
        "他们",
        "请",
        "请问",
        "有",
        "没有",
        "吗",
    ]
)

# Han ideographs (URO, extension A, compatibility, extensions B+), as one class.
_HAN = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003134f"
_RUN = re.compile(rf"([{_HAN}]+)|([^\W_{_HAN}]+)")
_MAX_TERM_CHARS = 64  # longer runs (hashes, base64) are cut, not dropped
#: Most gloss terms one query gets (a long Chinese query would otherwise multiply).
MAX_GLOSS_TERMS = 64

#: Analysis languages: Snowball stemmer name and stop-word set.
LANGUAGES: dict[str, frozenset[str]] = {"english": ENGLISH_STOP_WORDS}


@cache
def _major_minor(package: str) -> str:
    """``major.minor`` of an installed package, read once per process (``version()``
    parses the package's metadata file, and the fingerprint is read per lookup)."""
    try:
        parts = version(package).split(".")
    except PackageNotFoundError:  # pragma: no cover - both are dependencies
        return "?"
    return ".".join(parts[:2])


@lru_cache(maxsize=1)
def _jieba() -> Any:
    import rjieba

    return rjieba


class SnowballJiebaAnalyzer(TextAnalyzer):
    """English (or another Snowball language) + Chinese analysis.

    ``stemming`` / ``stop_words`` False switch the step off (for measurements);
    ``language`` ``none`` keeps only normalisation, splitting and segmentation.
    """

    VERSION = 1

    def __init__(
        self,
        *,
        language: str = "english",
        stemming: bool = True,
        stop_words: bool = True,
        chinese_query_glosses: int = 3,
        glosses: ChineseGlosses | None = None,
    ) -> None:
        if language != "none" and language not in LANGUAGES:
            raise ConfigurationError(
                "rag.text-analysis.language", language, f"must be one of {[*LANGUAGES, 'none']}"
            )
        self._language = language
        self._stemming = stemming and language != "none"
        self._stop = (LANGUAGES[language] if stop_words and language != "none" else frozenset()) | (
            CHINESE_STOP_WORDS if stop_words else frozenset()
        )
        self._stop_words = stop_words
        if not 0 <= chinese_query_glosses <= MAX_SENSES:
            raise ConfigurationError(
                "rag.text-analysis.chinese-query-glosses",
                str(chinese_query_glosses),
                f"must be between 0 (off) and {MAX_SENSES}",
            )
        self._gloss_senses = chinese_query_glosses
        self._glosses: ChineseGlosses | None = None
        if chinese_query_glosses:
            self._glosses = glosses if glosses is not None else shared_glosses()
            dictionary_path()  # a missing dictionary is a configuration error now
        self._stemmer: Any = None
        if self._stemming:
            import Stemmer

            self._stemmer = Stemmer.Stemmer(language)

    @property
    def fingerprint(self) -> str:
        stem = (
            f"snowball-{self._language}@{_major_minor('PyStemmer')}" if self._stemming else "none"
        )
        stop = f"lucene-{self._language}+zh" if self._stop_words else "none"
        return (
            f"lk-analysis-v{self.VERSION}/nfkc-casefold/stem={stem}/stop={stop}"
            f"/zh=jieba-search@{_major_minor('rjieba')}"
        )

    def terms(self, text: str) -> list[str]:
        if not text:
            return []
        normalised = unicodedata.normalize("NFKC", text).casefold()
        out: list[str] = []
        words: list[str] = []  # non-Han runs, stemmed in one call
        for match in _RUN.finditer(normalised):
            han, word = match.group(1), match.group(2)
            if han is not None:
                if words:
                    out.extend(self._words(words))
                    words = []
                out.extend(self._han(han))
            elif word not in self._stop:
                words.append(word[:_MAX_TERM_CHARS])
        if words:
            out.extend(self._words(words))
        return out

    @property
    def query_expansion(self) -> str | None:
        if self._glosses is None:
            return None
        return f"zh-en-glosses/{self._glosses.name}/senses={self._gloss_senses}"

    def query_terms(self, text: str) -> list[str]:
        """``terms(text)`` and, for each Chinese word of the query (two characters or
        more, not a stop word), the analysed terms of its first English senses in
        CC-CEDICT, each term once and only if the query does not hold it already (see
        ``glosses.py``: dictionary-based query translation, so a Chinese question meets
        English documents in BM25)."""
        terms = self.terms(text)
        if self._glosses is None or not text:
            return terms
        senses: list[str] = []
        normalised = unicodedata.normalize("NFKC", text).casefold()
        for match in _RUN.finditer(normalised):
            run = match.group(1)
            if run is None:
                continue
            for word in _jieba().cut(run):
                for _part, _start, _end, glosses in self._word_glosses(word):
                    senses.extend(glosses)
        if not senses:
            return terms
        seen = set(terms)
        extra: list[str] = []
        for term in self.terms(" ".join(senses)):
            if term not in seen:
                seen.add(term)
                extra.append(term)
                if len(extra) == MAX_GLOSS_TERMS:
                    break
        return [*terms, *extra]

    def query_concepts(self, text: str) -> tuple[tuple[tuple[str, ...], ...], ...]:
        """``query_terms`` grouped by what they translate: a Chinese word of the query is
        one concept whose forms are its own pieces (``terms``: the word and the
        dictionary words inside it) and each English sense whose terms the query sends;
        every other term (English words, a query without glosses) is its own concept.
        The BM25 reference counts each concept once, in its cheapest form
        (``domain.relevance.query_reference``), so a question asked in Chinese about
        an English document is read against what an English chunk can hold."""
        sent = self.query_terms(text)
        if self._glosses is None or not text or len(sent) == len(self.terms(text)):
            return concepts_of_terms(sent)
        available = set(sent)
        concepts: list[tuple[tuple[str, ...], ...]] = []
        normalised = unicodedata.normalize("NFKC", text).casefold()
        words: list[str] = []
        for match in _RUN.finditer(normalised):
            han, word = match.group(1), match.group(2)
            if han is None:
                if word not in self._stop:
                    words.append(word[:_MAX_TERM_CHARS])
                continue
            concepts.extend(concepts_of_terms(list(self._words(words))))
            words = []
            concepts.extend(self._han_concepts(han, available))
        concepts.extend(concepts_of_terms(list(self._words(words))))
        return tuple(concepts)

    def _word_glosses(self, word: str) -> list[tuple[str, int, int, tuple[str, ...]]]:
        """The dictionary words that gloss ``word``, each with its span in ``word`` and
        its first senses: the word itself when the dictionary has it; else the longest
        dictionary words inside it, left to right, without overlap (a compound the
        dictionary lacks is translated through its parts: 健康检查 -> 健康 + 检查,
        the textbook fallback of dictionary-based query translation)."""
        if self._glosses is None or len(word) < 2 or word in self._stop:
            return []
        senses = self._glosses.senses(word, self._gloss_senses)
        if senses:
            return [(word, 0, len(word), senses)]
        parts: list[tuple[str, int, int, tuple[str, ...]]] = []
        covered = 0
        pieces = sorted(_jieba().tokenize(word, "search"), key=lambda p: (p[1], p[1] - p[2]))
        for piece, start, end in pieces:
            if start < covered or piece == word or len(piece) < 2 or piece in self._stop:
                continue
            found = self._glosses.senses(piece, self._gloss_senses)
            if found:
                parts.append((piece, start, end, found))
                covered = end
        return parts

    def _han_concepts(self, run: str, available: set[str]) -> Iterable[tuple[tuple[str, ...], ...]]:
        """Per word of a Han run (jieba's default cut): its search-mode pieces (the ones
        ``terms`` gives for the run, each given to the word that spans it) and the forms
        of its glosses whose terms are all in ``available`` (the terms the query sends).
        A word glossed through its parts gives a concept per part; its pieces that no
        part spans (the compound itself, an untranslated character's word) form one
        more concept unless the parts span every character."""
        words: list[tuple[str, int, int, list[tuple[str, int, int]]]] = [
            (word, start, end, []) for word, start, end in _jieba().tokenize(run)
        ]
        for piece, start, end in _jieba().tokenize(run, "search"):
            if not (piece.strip() and piece not in self._stop and piece.isalnum()):
                continue
            for _word, w_start, w_end, pieces in words:
                if w_start <= start and end <= w_end:
                    pieces.append((piece, start, end))
                    break
        for word, w_start, _w_end, pieces in words:
            rest = list(pieces)
            spanned: set[int] = set()
            for _part, start, end, senses in self._word_glosses(word):
                a, b = w_start + start, w_start + end
                own = [p for p in rest if a <= p[1] and p[2] <= b]
                rest = [p for p in rest if p not in own]
                spanned.update(range(start, end))
                forms = [tuple(p[0] for p in own)] if own else []
                for sense in senses:
                    form = tuple(self.terms(sense))
                    if form and available.issuperset(form):
                        forms.append(form)
                if forms:
                    yield tuple(forms)
            if rest and len(spanned) < len(word):
                yield (tuple(p[0] for p in rest),)

    def _words(self, words: list[str]) -> Iterable[str]:
        if self._stemmer is None:
            return words
        stems: list[str] = self._stemmer.stemWords(words)
        return [s for s in stems if s]

    def _han(self, run: str) -> Iterable[str]:
        pieces: list[str] = _jieba().cut_for_search(run)
        return [p for p in pieces if p.strip() and p not in self._stop and p.isalnum()]


__all__ = ["CHINESE_STOP_WORDS", "ENGLISH_STOP_WORDS", "LANGUAGES", "SnowballJiebaAnalyzer"]
