"""``TextAnalyzer``: the port that turns text into the terms lexical matching compares.

One analysis is applied to what is indexed for BM25 (title, breadcrumb and chunk text)
and to the query, so both sides meet on the same terms; the Verifier can use the same
analysis to compare an answer's wording with the evidence it was shown. ``fingerprint``
names the analysis exactly (language, stemmer, stop words, segmenter, their versions):
a collection records the fingerprint it was built with, and a search with another one
is refused instead of silently matching differently analysed terms. A query may get
terms of its own on top (``query_terms``): they change what is searched for, not how
documents were indexed, so they are named apart (``query_expansion``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod

from lookup_knowledge.domain.relevance import concepts_of_terms


class TextAnalyzer(ABC):
    @property
    @abstractmethod
    def fingerprint(self) -> str:
        """A stable name of this analysis; a different analysis has a different one."""

    @abstractmethod
    def terms(self, text: str) -> list[str]:
        """The analysed terms of ``text`` in order (repeats kept: they are term frequency).

        Every term is a non-empty run of letters and digits (``str.isalnum``), lower
        case, with no spaces, so a term survives any word tokenizer unchanged."""

    def analyse(self, text: str) -> str:
        """The terms joined by single spaces: what a BM25 input field holds."""
        return " ".join(self.terms(text))

    def query_terms(self, text: str) -> list[str]:
        """The terms a BM25 *query* for ``text`` searches: ``terms(text)``, plus what
        an analyzer adds on the query side only (e.g. English glosses of Chinese
        words). Documents are analysed by ``terms`` alone, so query-side additions
        never need a re-ingest."""
        return self.terms(text)

    def query_concepts(self, text: str) -> tuple[tuple[tuple[str, ...], ...], ...]:
        """What the BM25 query for ``text`` asks for, as its relevance reference counts
        it (``domain.relevance.query_reference``): per concept of the query, the forms a
        chunk can hold it in, each the analysed terms of ``query_terms`` that match it.
        An analyzer that adds alternatives (glosses) groups them with the word they
        translate; without additions every query term is a concept of one form."""
        return concepts_of_terms(self.query_terms(text))

    def analyse_query(self, text: str) -> str:
        return " ".join(self.query_terms(text))

    @property
    def query_expansion(self) -> str | None:
        """A name of the query-side additions (for the retrieval trace), None if none."""
        return None
