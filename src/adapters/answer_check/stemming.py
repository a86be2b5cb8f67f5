"""``WordStemmer`` over PyStemmer (the Snowball stemmers, a C extension with wheels).

The same library the BM25 text analyser uses, so "the words of a claim" and "the words
of a query" are cut alike. The stemmer object is not thread-safe; each thread gets its own.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

import Stemmer

from lookup_knowledge.application.ports import WordStemmer
from lookup_knowledge.domain.errors import ConfigurationError


class SnowballStemmer(WordStemmer):
    def __init__(self, language: str = "english") -> None:
        if language not in Stemmer.algorithms():
            raise ConfigurationError(
                "audit.check.stemmer-language",
                language,
                "must be one of " + ", ".join(sorted(Stemmer.algorithms())),
            )
        self._language = language
        self._local = threading.local()

    @property
    def language(self) -> str:
        return self._language

    def stem(self, words: Sequence[str]) -> list[str]:
        stemmer = getattr(self._local, "stemmer", None)
        if stemmer is None:
            stemmer = self._local.stemmer = Stemmer.Stemmer(self._language)
        return list(stemmer.stemWords(list(words)))
