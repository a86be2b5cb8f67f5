"""One cited block's shown text as the checker reads it: folded once, its stemmed words,
its facts and its sentences (``PreparedEvidence``), and the span a claim is aligned to."""

from __future__ import annotations

import hashlib
from bisect import bisect_left
from dataclasses import dataclass

from lookup_knowledge.domain.answer_check.facts import (
    Fact,
    extract_facts,
)
from lookup_knowledge.domain.answer_check.sentences import sentence_spans
from lookup_knowledge.domain.answer_check.text import Folded, fold
from lookup_knowledge.domain.answer_check.words import (
    Stem,
    folded_content_words,
    stem_units,
)
from lookup_knowledge.domain.projection import ELLIPSIS

MAX_SPAN_SENTENCES = 3


def _with_parts(words: list[str]) -> list[str]:
    """Evidence words, a hyphenated one also by its parts ("aureus-infected" covers a
    claim's "infected")."""
    out = list(words)
    for w in words:
        if "-" in w or "_" in w or "." in w:
            parts = w.replace("_", "-").replace(".", "-").split("-")
            out.extend(p for p in parts if len(p) > 1 and not p.isdigit())
    return out


@dataclass(frozen=True, slots=True)
class PreparedEvidence:
    """One block's text as the agent saw it, analysed once per check."""

    document_id: str
    text: str
    folded: Folded
    units: frozenset[str]
    facts: tuple[Fact, ...]
    sentences: tuple[tuple[int, int, frozenset[str]], ...]

    @classmethod
    def of(cls, document_id: str, text: str, stem: Stem) -> PreparedEvidence:
        folded = fold(text)  # once: sentences take their folded slices through ``origin``
        spans = sentence_spans(text)
        sentences = []
        for a, b in spans:
            fa, fb = bisect_left(folded.origin, a), bisect_left(folded.origin, b)
            words = _with_parts(folded_content_words(folded.text[fa:fb]))
            sentences.append((a, b, stem_units(words, stem)))
        return cls(
            document_id=document_id,
            text=text,
            folded=folded,
            units=stem_units(_with_parts(folded_content_words(folded.text)), stem),
            # a `code span` is one identifier, and the facts inside it count too
            facts=extract_facts(text, skip_first_word=False)
            + (extract_facts(text.replace("`", " "), skip_first_word=False) if "`" in text else ()),
            sentences=tuple(sentences),
        )

    def folded_slice(self, start: int, end: int) -> str:
        """The folded text of ``text[start:end]``."""
        origin = self.folded.origin
        return self.folded.text[bisect_left(origin, start) : bisect_left(origin, end)]

    def best_span(self, units: frozenset[str]) -> tuple[int, int]:
        """The sentence, or run of up to ``MAX_SPAN_SENTENCES`` adjacent sentences,
        sharing the most units (see ``align``)."""
        return self.align(units)[:2]

    def align(self, units: frozenset[str]) -> tuple[int, int, frozenset[str], int]:
        """(start, end, units, hits) of the span that best supports a claim with these
        units: the sentence sharing the most, extended by an adjacent sentence only
        while that adds at least two more shared units (a second sentence must earn
        its place)."""
        if not self.sentences:
            return 0, len(self.text), self.units, len(units & self.units)
        best_i, best_hits = 0, -1
        for i, (_, _, own) in enumerate(self.sentences):
            hits = len(units & own)
            if hits > best_hits:
                best_i, best_hits = i, hits
        lo = hi = best_i
        covered = self.sentences[best_i][2]
        while hi - lo + 1 < MAX_SPAN_SENTENCES:
            options = []
            if lo > 0:
                options.append((len(units & (covered | self.sentences[lo - 1][2])), lo - 1))
            if hi + 1 < len(self.sentences):
                options.append((len(units & (covered | self.sentences[hi + 1][2])), hi + 1))
            if not options:
                break
            gained, at = max(options)
            if gained < len(units & covered) + 2:
                break
            covered = covered | self.sentences[at][2]
            lo, hi = min(lo, at), max(hi, at)
        a, b = self.sentences[lo][0], self.sentences[hi][1]
        while a < b and self.text[a].isspace():
            a += 1
        while b > a and self.text[b - 1].isspace():
            b -= 1
        return a, b, covered, len(units & covered)


@dataclass(frozen=True, slots=True)
class EvidenceText:
    """What the checker has of a cited block: its shown text, or why there is none."""

    document_id: str
    prepared: PreparedEvidence | None
    problem: str | None = None


def content_hash(text: str) -> str:
    """The hash the audit store keeps of a shown block (sha256 of its UTF-8 text)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def shown_text_from(current: str, expected_hash: str) -> str | None:
    """The text the agent was shown, rebuilt from a block's current full text, or None.

    A block was shown whole, stripped, or cut to a budget with an ellipsis (see
    ``domain.projection``); the one candidate whose hash is ``expected_hash`` is the text
    shown. None means the block changed since it was shown.
    """
    if content_hash(current) == expected_hash:
        return current
    stripped = current.strip()
    if content_hash(stripped) == expected_hash:
        return stripped
    for cut in range(max(len(stripped) - 1, 0), -1, -1):
        candidate = stripped[:cut] + ELLIPSIS
        if content_hash(candidate) == expected_hash:
            return candidate
    return None
