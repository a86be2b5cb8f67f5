"""Folding text for comparison, with a map back to the original characters.

An answer and the evidence it cites are compared after folding: Unicode compatibility
forms (NFKC: full-width ``１`` is ``1``), case (``casefold``), accents (combining marks
dropped), typographic quotes and dashes (``’`` is ``'``, ``–`` is ``-``) and whitespace
(every run is one space). ``Folded.origin`` maps each folded character back to the index
of the source character it came from, so a match in folded text is reported as offsets
into the text the agent was really shown.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass

_TYPOGRAPHIC = str.maketrans(
    {
        "\u2018": "'",
        "\u2019": "'",
        "\u201a": "'",
        "\u201b": "'",
        "\u201c": '"',
        "\u201d": '"',
        "\u201e": '"',
        "\u2010": "-",
        "\u2011": "-",
        "\u2012": "-",
        "\u2013": "-",
        "\u2014": "-",
        "\u2212": "-",
    }
)


def _fold_char(ch: str) -> str:
    if ch.isascii():
        return ch.lower()
    piece = unicodedata.normalize("NFKC", ch).casefold()
    piece = "".join(c for c in unicodedata.normalize("NFKD", piece) if not unicodedata.combining(c))
    return piece.translate(_TYPOGRAPHIC)


@dataclass(frozen=True, slots=True)
class Folded:
    """``text`` folded; ``origin[i]`` is the source index of ``text[i]`` and
    ``origin[len(text)]`` is ``len(source)``."""

    text: str
    origin: tuple[int, ...]

    def source_span(self, start: int, end: int) -> tuple[int, int]:
        """The source span ``[a, b)`` of the folded span ``[start, end)`` (``end > start``)."""
        return self.origin[start], self.origin[end - 1] + 1


def fold(source: str) -> Folded:
    out: list[str] = []
    origin: list[int] = []
    for i, ch in enumerate(source):
        for c in _fold_char(ch):
            if c.isspace():
                if out and out[-1] != " ":
                    out.append(" ")
                    origin.append(i)
            else:
                out.append(c)
                origin.append(i)
    if out and out[-1] == " ":
        out.pop()
        origin.pop()
    origin.append(len(source))
    return Folded("".join(out), tuple(origin))


def fold_text(source: str) -> str:
    return fold(source).text


def find_folded(needle: str, haystack: Folded) -> tuple[int, int] | None:
    """Where ``needle`` occurs in the source of ``haystack`` after folding both, as source
    offsets; whitespace is ignored as a last resort (a quote joined from several text
    blocks may have lost the space between them). None when it does not occur."""
    key = fold_text(needle)
    if not key:
        return None
    at = haystack.text.find(key)
    if at >= 0:
        return haystack.source_span(at, at + len(key))
    squeezed = key.replace(" ", "")
    positions = [i for i, c in enumerate(haystack.text) if c != " "]
    compact = "".join(haystack.text[i] for i in positions)
    at = compact.find(squeezed)
    if at < 0:
        return None
    return haystack.source_span(positions[at], positions[at + len(squeezed) - 1] + 1)


def word_set(words: str) -> frozenset[str]:
    """A set of words written as one space-separated string."""
    return frozenset(words.split())
