"""Where sentences end, in an answer and in the text it cites.

A full stop ends a sentence when whitespace (or the end, or a closing quote/bracket)
follows it, except after an abbreviation that never ends one (``e.g.``, ``i.e.``, ``vs.``,
``cf.``, ``Fig.``, ``No.`` before a number, ``et al.`` before a lower-case word), and
after a lone capital letter followed by a lower-case word (a genus, ``S. aureus``,
``C. elegans``; an initial). ``3.5`` is a decimal: no space follows its point. ``!`` and
``?`` followed by whitespace and Chinese ``。！？；`` always end one; in evidence a line
break does too, unless it only wraps a paragraph or a list item (Markdown wraps lines).
"""

from __future__ import annotations

import re

_CLOSERS = "\"'”’」』)）]】*_`"
HARD_STOPS = "。！？；!?"
# Abbreviations after which a full stop never ends a sentence.
_NEVER_FINAL = frozenset(
    {
        "e.g",
        "i.e",
        "eg",
        "ie",
        "vs",
        "cf",
        "approx",
        "fig",
        "figs",
        "ref",
        "refs",
        "eq",
        "eqs",
        "mr",
        "mrs",
        "ms",
        "dr",
        "prof",
        "st",
        "incl",
        "ca",
        "resp",
        "spp",
        "sp",
        "var",
        "subsp",
        "no",
        "nos",
        "vol",
        "pp",
        "tab",
    }
)
# Abbreviations that may end a sentence: they do not when a lower-case word follows.
_MAYBE_FINAL = frozenset({"al", "etc", "inc", "ltd", "co", "jr", "sr", "min", "max"})
_WORD_BEFORE = re.compile(r"([A-Za-z][A-Za-z.]*)$")


def _next_visible(text: str, i: int, end: int) -> str:
    while i < end and (text[i].isspace() or text[i] in _CLOSERS):
        i += 1
    return text[i] if i < end else ""


def full_stop_ends_sentence(text: str, i: int, end: int | None = None) -> bool:
    """Whether the ``.`` at ``text[i]`` ends a sentence (see the module docstring)."""
    end = len(text) if end is None else end
    if i + 1 < end and not (text[i + 1].isspace() or text[i + 1] in _CLOSERS):
        return False  # 3.5, e.g.x, a.b.c
    following = _next_visible(text, i + 1, end)
    if not following:
        return True
    found = _WORD_BEFORE.search(text[max(0, i - 24) : i])
    if found is None:
        return True
    word = found.group(1)
    key = word.lower().rstrip(".")
    if key in _NEVER_FINAL:
        return key == "no" and not following.isdigit() and following.isupper()
    lower_next = following.islower() or following.isdigit()
    if key in _MAYBE_FINAL:
        return not lower_next
    if len(word) == 1 and word.isupper():
        return not following.islower()  # "S. aureus", "J. Smith" stays; "type A. The" ends
    return True


_BLOCK_START = re.compile(r"[ \t]*(?:$|[-*+#|>•]|\d{1,3}[.)]\s|```|~~~)")
_LINE_START = re.compile(r"[ \t]*(?:[#|]|```|~~~)")


def _line_break_ends(text: str, i: int) -> bool:
    """A line break ends a sentence unless it only wraps a paragraph or a list item: the
    next line is blank or starts a list item, heading, table row, quote or fence, or this
    line is a heading, table row or fence."""
    if _BLOCK_START.match(text, i + 1):
        return True
    line_start = text.rfind("\n", 0, i) + 1
    return _LINE_START.match(text, line_start) is not None


def sentence_spans(text: str, *, line_breaks: bool = True) -> list[tuple[int, int]]:
    """The sentences of ``text`` as ``(start, end)`` offsets, whitespace trimmed, empty
    ones dropped. ``line_breaks``: a line break ends a sentence too."""
    spans: list[tuple[int, int]] = []
    start = 0
    n = len(text)
    i = 0
    while i < n:
        ch = text[i]
        stop = False
        if ch in "。！？；":
            stop = True
        elif ch == "\n":
            stop = line_breaks and _line_break_ends(text, i)
        elif ch in "!?":
            stop = i + 1 >= n or text[i + 1].isspace() or text[i + 1] in _CLOSERS
        elif ch == ".":
            stop = full_stop_ends_sentence(text, i, n)
        if stop:
            j = i + 1
            while j < n and (text[j] in _CLOSERS or text[j] in ".!?。！？"):
                j += 1
            spans.append((start, j))
            start = i = j
            continue
        i += 1
    spans.append((start, n))
    out: list[tuple[int, int]] = []
    for a, b in spans:
        while a < b and text[a].isspace():
            a += 1
        while b > a and text[b - 1].isspace():
            b -= 1
        if a < b:
            out.append((a, b))
    return out
