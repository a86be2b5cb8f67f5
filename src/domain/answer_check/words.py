"""Content words and lexical coverage.

Latin-script text is split into words, stop words dropped, and the rest stemmed by the
caller's stemmer (a function: the stemmer library is an adapter's business). Chinese (and
other CJK) text has no spaces: each run of ideographs becomes its character bigrams (a
single character stands alone), the usual unit for matching Chinese without a segmenter.
Coverage is the share of a claim's distinct units that occur in the evidence.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence

from lookup_knowledge.domain.answer_check.text import fold_text, word_set

Stem = Callable[[Sequence[str]], Sequence[str]]

_TOKEN = re.compile(r"[a-z0-9]+(?:['_.-][a-z0-9]+)*|[\u3400-\u9fff\uf900-\ufaff]+", re.ASCII)
_CJK_RUN = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]+")

STOP_WORDS = word_set(
    "a about above after again against all also am an and any are aren't as at be because "
    "been before being below between both but by can cannot could did do does doing done "
    "down during each either else etc few for from further had has have having he her here "
    "hers herself him himself his how however i if in into is isn't it it's its itself just "
    "least less let like may me might more most must my myself no nor not now of off on "
    "once only or other otherwise our ours ourselves out over own per same shall she should "
    "since so some such than that that's the their theirs them themselves then there these "
    "they this those though through thus to too under until up upon us very via was we were "
    "what when where whether which while who whom whose why will with within without would "
    "yet you your yours yourself yourselves "
    # answer boilerplate: says nothing about the evidence
    "according answer based document documentation docs evidence knowledge base kb "
    "mentioned mentions note noted per said says source sources state stated states "
    "cited cite cites shown shows show see"
)
CJK_STOP_CHARS = frozenset("的了是在和与及或也都就而且被把对从这那个之其所为以于")


def _cjk_units(run: str) -> list[str]:
    chars = [c for c in run if c not in CJK_STOP_CHARS] if len(run) > 2 else list(run)
    if len(chars) <= 1:
        return chars
    return [chars[i] + chars[i + 1] for i in range(len(chars) - 1)]


def content_words(text: str) -> list[str]:
    """Folded content tokens of ``text`` (unstemmed): Latin words minus stop words, and
    CJK bigrams, in order, repeats kept."""
    return folded_content_words(fold_text(text))


def folded_content_words(folded: str) -> list[str]:
    """``content_words`` of a text that is already folded."""
    out: list[str] = []
    for token in _TOKEN.findall(folded):
        if _CJK_RUN.fullmatch(token):
            out.extend(_cjk_units(token))
        elif token not in STOP_WORDS and not token.isdigit() and len(token) > 1:
            out.append(token)
    return out


def stem_units(words: Iterable[str], stem: Stem) -> frozenset[str]:
    """Stemmed units: Latin words go through ``stem``, CJK bigrams stay as they are."""
    latin: list[str] = []
    units: set[str] = set()
    for word in words:
        if word.isascii():
            latin.append(word)
        else:
            units.add(word)
    units.update(stem(latin) if latin else ())
    return frozenset(units)


def coverage(claim: frozenset[str], evidence: frozenset[str]) -> float:
    """Share of the claim's units found in the evidence; 1.0 for a claim without any."""
    if not claim:
        return 1.0
    return len(claim & evidence) / len(claim)


def identity_stem(words: Sequence[str]) -> list[str]:
    """No stemming (tests, and a fallback that only costs recall)."""
    return list(words)
