"""``TextAnalyzer``: the port that turns text into the terms lexical matching compares.

One analysis is applied to what is indexed for BM25 (title, breadcrumb and chunk text)
and to the query, so both sides meet on the same terms; the Verifier can use the same
analysis to compare an answer's wording with the evidence it was shown. ``fingerprint``
names the analysis exactly (language, stemmer, stop words, segmenter, their versions):
a collection records the fingerprint it was built with, and a search with another one
is refused instead of silently matching differently analysed terms.
"""

from __future__ import annotations

from abc import ABC, abstractmethod


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


def lexical_text(title: str, breadcrumb: str, text: str) -> str:
    """What lexical (BM25) matching sees of a chunk before analysis: the document's
    title, the heading path and the text. A breadcrumb that starts with the title (the
    document's top heading) says it once."""
    parts = [title]
    if breadcrumb and breadcrumb != title:
        head, sep, rest = breadcrumb.partition(" > ")
        parts.append(rest if sep and head == title else breadcrumb)
    parts.append(text)
    return "\n".join(p for p in parts if p)
