"""Polarity and direction: does a claim say the opposite of the span it is aligned to?

Both texts are read as folded word tokens and stemmed by the caller's stemmer.

Negation. A cue (``not``, ``no``, ``never``, ``without``, ``neither``/``nor``, ``none``,
``cannot``, any ``n't``, ``failed to``, ``lack of``, ``unable to``, ``no longer``; not
``not only``, ``whether or not``) negates the next content words of its clause (up to
``SCOPE`` of them; ``,`` ``;`` ``:`` and ``but``/``whereas``/``although`` end a clause).
A negation is *relevant* when one of its first two scoped words (its head) occurs in the
other text. A word with a negating prefix (``un-``, ``in-``, ``im-``, ``ir-``, ``il-``,
``non-``, ``dis-``) whose remainder occurs in the other text, while the prefixed word does
not, is a relevant negation too (``unaffected`` against ``affected``). The claim
contradicts its span when exactly one of them holds a relevant negation.

Direction. ``DIRECTION_GROUPS`` pairs two poles of one scale (amount: increase/decrease,
higher/lower, enhance/suppress, up-/down-regulate, gain/loss; quality: improve/worsen;
sign: positive/negative; ...). Each pole is a list of word beginnings, so a root covers
its inflections and derivations (``increas`` is increase, increased, increasing; ``inhibit``
is inhibits, inhibition, inhibitor). The opposite prefixes ``up-``/``down-``,
``over-``/``under-``, ``hyper-``/``hypo-`` on the same remainder are a pair by morphology,
whatever the word. A claim word of one pole (flipped when negated) contradicts the span
when the span has no word of its root nor of its pole, but one of the opposite pole.

No lexical resource that ships its data in a package was available (WordNet readers
download theirs at run time); the list is short, documented, and generalises by roots.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from lookup_knowledge.domain.answer_check.text import fold_text, word_set
from lookup_knowledge.domain.answer_check.words import STOP_WORDS, Stem

SCOPE = 3
_TOKEN = re.compile(r"[a-z0-9]+(?:['-][a-z0-9]+)*|[,;:()]", re.ASCII)
_CUES = word_set("not no never without neither nor none nothing cannot nobody")
_TWO_WORD_CUES = {
    ("failed", "to"),
    ("fail", "to"),
    ("fails", "to"),
    ("failure", "to"),
    ("lack", "of"),
    ("failure", "of"),
    ("lack",),
    ("lacks",),
    ("lacked",),
    ("lacking",),
    ("unable", "to"),
    ("no", "longer"),
}
_NOT_A_CUE = {("not", "only"), ("or", "not"), ("not", "necessarily")}
_CLAUSE_END = word_set("but whereas although though however while yet")
_FUNCTION = STOP_WORDS | word_set(
    "significantly statistically significant markedly substantially also further"
)
_NEGATING_PREFIXES = ("non-", "non", "un", "in", "im", "ir", "il")
# Words that begin like a negated form and are not one (in+formation, ir+radiation).
_FALSE_PREFIXED = word_set("information intake insight irradiation irradiated inform informed")

# (scale, pole A roots, pole B roots)
DIRECTION_GROUPS: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...] = (
    (
        "amount",
        (
            "increas",
            "elevat",
            "raise",
            "raised",
            "raising",
            "rise",
            "rises",
            "rising",
            "rose",
            "risen",
            "higher",
            "highest",
            "greater",
            "more",
            "augment",
            "boost",
            "enhanc",
            "amplif",
            "stimulat",
            "promot",
            "potentiat",
            "activat",
            "induc",
            "accelerat",
            "exacerbat",
            "overexpress",
            "upregul",
            "up-regul",
            "gain",
            "gains",
            "gained",
            "excess",
            "enrich",
            "high",
            "prolong",
            "longer",
            "strengthen",
            "stronger",
            "strongly",
        ),
        (
            "decreas",
            "reduc",
            "lower",
            "lowest",
            "low",
            "less",
            "fewer",
            "smaller",
            "diminish",
            "declin",
            "drop",
            "fell",
            "fall",
            "attenuat",
            "suppress",
            "inhibit",
            "repress",
            "block",
            "impair",
            "abolish",
            "abrogat",
            "lessen",
            "slow",
            "delay",
            "deplet",
            "loss",
            "lose",
            "lost",
            "losing",
            "prevent",
            "inactivat",
            "deactivat",
            "downregul",
            "down-regul",
            "silenc",
            "knockdown",
            "knock-down",
            "knockout",
            "deficien",
            "shorter",
            "shorten",
            "weaken",
            "weaker",
            "weakly",
        ),
    ),
    (
        "quality",
        (
            "improv",
            "better",
            "benefi",
            "amelior",
            "allevia",
            "good",
            "well",
            "favorabl",
            "favourabl",
        ),
        (
            "worsen",
            "worse",
            "deteriorat",
            "harm",
            "aggravat",
            "poor",
            "unfavorabl",
            "unfavourabl",
            "impair",
        ),
    ),
    ("sign", ("positiv",), ("negativ",)),
    ("response", ("sensitiv", "suscept"), ("resist", "insensitiv")),
    ("action", ("agonist",), ("antagonist",)),
)
_NOT_DIRECTIONAL = word_set("promoter promoters highly lowly goods wells")
_OPPOSITE_PREFIXES = (("up", "down"), ("over", "under"), ("hyper", "hypo"))


@dataclass(frozen=True, slots=True)
class Contradiction:
    """Why a claim contradicts its span: the claim's words and the span's, as written."""

    claim_words: str
    span_words: str
    kind: str  # "negation" | "direction"

    def describe(self) -> str:
        return f'the claim says "{self.claim_words}" where the evidence says "{self.span_words}"'


@dataclass(frozen=True, slots=True)
class _Token:
    text: str  # folded
    stem: str
    content: bool


@dataclass(frozen=True, slots=True)
class _Negation:
    cue: str
    heads: tuple[_Token, ...]


def _tokens(text: str, stem: Stem) -> list[_Token]:
    raw = _TOKEN.findall(fold_text(text).replace("\u2019", "'"))
    words = [t for t in raw if t[0].isalnum()]
    stems = iter(stem(words) if words else [])
    out: list[_Token] = []
    for t in raw:
        if not t[0].isalnum():
            out.append(_Token(t, t, False))
            continue
        s = next(stems)
        out.append(_Token(t, s, t not in _FUNCTION and not t.isdigit() and len(t) > 1))
    return out


def _cue_length(tokens: Sequence[_Token], i: int) -> int:
    t = tokens[i].text
    nxt = tokens[i + 1].text if i + 1 < len(tokens) else ""
    prev = tokens[i - 1].text if i else ""
    if (t, nxt) in _NOT_A_CUE or (prev, t) in _NOT_A_CUE:
        return 0
    if (t, nxt) in _TWO_WORD_CUES:
        return 2
    if (t,) in _TWO_WORD_CUES or t in _CUES or t.endswith("n't"):
        return 1
    return 0


def _negations(tokens: Sequence[_Token]) -> tuple[list[_Negation], set[int]]:
    """Each cue with the heads of its scope, and the indexes of every scoped token."""
    found: list[_Negation] = []
    scoped: set[int] = set()
    i = 0
    while i < len(tokens):
        n = _cue_length(tokens, i)
        if not n:
            i += 1
            continue
        cue = " ".join(t.text for t in tokens[i : i + n])
        heads: list[_Token] = []
        j = i + n
        count = 0
        while j < len(tokens) and count < SCOPE:
            t = tokens[j]
            if not t.text[0].isalnum() or t.text in _CLAUSE_END or _cue_length(tokens, j):
                break
            scoped.add(j)
            if t.content:
                count += 1
                if len(heads) < 2:
                    heads.append(t)
            j += 1
        found.append(_Negation(cue, tuple(heads)))
        i += n
    return found, scoped


def _prefix_negations(tokens: Sequence[_Token], other: Sequence[_Token]) -> list[tuple[str, str]]:
    """(prefixed word, the other text's plain word) for ``unaffected`` against ``affected``."""
    other_words = {t.text for t in other}
    other_stems = {t.stem: t.text for t in other if t.content}
    out: list[tuple[str, str]] = []
    for t in tokens:
        if not t.content or t.text in other_words or t.text in _FALSE_PREFIXED:
            continue
        for prefix in _NEGATING_PREFIXES:
            rest = t.text[len(prefix) :].lstrip("-")
            if t.text.startswith(prefix) and len(rest) >= 4 and rest in other_words:
                out.append((t.text, rest))
                break
            if t.text.startswith(prefix) and len(rest) >= 4:
                for s, word in other_stems.items():
                    if len(s) >= 4 and rest.startswith(s) and not t.stem.startswith(s):
                        out.append((t.text, word))
                        break
                else:
                    continue
                break
    return out


def _relevant(negations: Sequence[_Negation], other_stems: set[str]) -> _Negation | None:
    for n in negations:
        if any(h.stem in other_stems for h in n.heads):
            return n
    return None


def _phrase(n: _Negation) -> str:
    return " ".join([n.cue, *(h.text for h in n.heads[:1])])


def negation_conflict(claim: str, span: str, stem: Stem) -> Contradiction | None:
    return _negation_conflict(_tokens(claim, stem), _tokens(span, stem))


def _negation_conflict(c: Sequence[_Token], s: Sequence[_Token]) -> Contradiction | None:
    c_stems = {t.stem for t in c if t.content}
    s_stems = {t.stem for t in s if t.content}
    c_neg, _ = _negations(c)
    s_neg, _ = _negations(s)
    in_claim = _relevant(c_neg, s_stems)
    in_span = _relevant(s_neg, c_stems)
    if in_claim is not None and in_span is None:
        head = in_claim.heads[0]
        if head.stem not in s_stems:
            head = next(h for h in in_claim.heads if h.stem in s_stems)
        said = next(t.text for t in s if t.stem == head.stem)
        return Contradiction(" ".join([in_claim.cue, head.text]), said, "negation")
    if in_span is not None and in_claim is None:
        head = next((h for h in in_span.heads if h.stem in c_stems), in_span.heads[0])
        word = next((t.text for t in c if t.stem == head.stem), head.text)
        return Contradiction(word, _phrase(in_span), "negation")
    if in_claim is None and in_span is None:
        flipped = _prefix_negations(c, s)
        if flipped and not _prefix_negations(s, c):
            return Contradiction(flipped[0][0], flipped[0][1], "negation")
        flipped = _prefix_negations(s, c)
        if flipped:
            return Contradiction(flipped[0][1], flipped[0][0], "negation")
    return None


def _poles(word: str) -> list[tuple[str, int, str]]:
    """(scale, pole 0/1, root) of each scale a directional word belongs to."""
    if word in _NOT_DIRECTIONAL:
        return []
    out = []
    for scale, a, b in DIRECTION_GROUPS:
        for pole, roots in ((0, a), (1, b)):
            root = next(
                (
                    r
                    for r in roots
                    if word.startswith(r) and (len(r) >= 5 or len(word) <= len(r) + 3)
                ),
                None,
            )
            if root is not None:
                out.append((scale, pole, root))
    return out


def _pole(word: str) -> tuple[str, int, str] | None:
    found = _poles(word)
    return found[0] if found else None


_WINDOW = 3


def _context(tokens: Sequence[_Token], i: int) -> set[str]:
    """Stems of the content words within ``_WINDOW`` tokens of ``tokens[i]``."""
    lo, hi = max(0, i - _WINDOW), min(len(tokens), i + _WINDOW + 1)
    return {t.stem for j, t in enumerate(tokens[lo:hi], lo) if j != i and t.content}


@dataclass(frozen=True, slots=True)
class _Direction:
    scale: str
    pole: int
    root: str
    word: str
    context: frozenset[str]


def _directions(tokens: Sequence[_Token]) -> list[_Direction]:
    """Each directional word with its scale and pole (flipped when negated) and the
    stems around it."""
    _, scoped = _negations(tokens)
    out: list[_Direction] = []
    for i, t in enumerate(tokens):
        if not t.text[0].isalpha():
            continue
        for scale, pole, root in _poles(t.text):
            context = frozenset(_context(tokens, i))
            out.append(_Direction(scale, pole ^ (i in scoped), root, t.text, context))
    return out


def _prefix_pair(c: Sequence[_Token], s: Sequence[_Token]) -> Contradiction | None:
    s_words = {t.text for t in s}
    for t in c:
        if t.text in s_words:
            continue
        for p, q in _OPPOSITE_PREFIXES:
            for mine, theirs in ((p, q), (q, p)):
                if not t.text.startswith(mine):
                    continue
                rest = t.text[len(mine) :].lstrip("-")
                if len(rest) < 3:
                    continue
                for w in s_words:
                    if w.startswith(theirs) and w[len(theirs) :].lstrip("-")[:5] == rest[:5]:
                        return Contradiction(t.text, w, "direction")
    return None


def direction_conflict(claim: str, span: str, stem: Stem) -> Contradiction | None:
    return _direction_conflict(_tokens(claim, stem), _tokens(span, stem))


def is_directional(word: str) -> bool:
    """Whether a (folded) word belongs to a pole of ``DIRECTION_GROUPS``."""
    return _pole(word) is not None


def _direction_conflict(c: Sequence[_Token], s: Sequence[_Token]) -> Contradiction | None:
    claim_dirs = _directions(c)
    span_all = _directions(s)
    # a span word the claim repeats about the same things ("weight gain" in both) is
    # accounted for by its best match in the claim and says nothing about the others
    accounted: set[int] = set()
    for o in claim_dirs:
        same = [(len(o.context & d.context), i) for i, d in enumerate(span_all) if d.root == o.root]
        same = [x for x in same if x[0] and x[1] not in accounted]
        if same:
            accounted.add(max(same)[1])
    for mine in claim_dirs:
        others = [d for i, d in enumerate(span_all) if d.root == mine.root or i not in accounted]
        scale = [d for d in others if d.scale == mine.scale]
        # the span's words about the same things as the claim's word decide: those whose
        # surroundings share the most with the claim word's
        best = max((len(d.context & mine.context) for d in scale), default=0)
        near = [d for d in scale if len(d.context & mine.context) == best] if best else scale
        if any(d.root == mine.root and d.pole == mine.pole for d in near):
            continue
        if any(d.pole == mine.pole for d in near):
            continue
        opposite = [d for d in near if d.pole != mine.pole]
        if opposite:
            return Contradiction(mine.word, opposite[0].word, "direction")
    return _prefix_pair(c, s)


# Chinese: a negation cue negates the two characters after it; direction words by pole.
_ZH_NEGATIONS = ("没有", "并未", "未能", "不能", "无法", "不", "未", "没", "非")
_ZH_NOT_NEGATION = ("不仅", "不同", "不断", "不超过", "不少于", "不低于", "不高于", "无论", "非常")
_ZH_DIRECTIONS = (
    (
        (
            "增加",
            "增长",
            "提高",
            "升高",
            "上升",
            "增强",
            "高于",
            "多于",
            "延长",
            "扩大",
            "改善",
            "促进",
        ),
        ("减少", "下降", "降低", "减弱", "低于", "少于", "缩短", "缩小", "恶化", "抑制"),
    ),
)
_CJK = re.compile(r"[\u3400-\u9fff]")


def _zh_negated(text: str) -> list[tuple[str, str]]:
    """(cue, the two characters it negates) of each Chinese negation in ``text``."""
    out = []
    i = 0
    while i < len(text):
        if any(text.startswith(n, i) for n in _ZH_NOT_NEGATION):
            i += 2
            continue
        cue = next((n for n in _ZH_NEGATIONS if text.startswith(n, i)), None)
        if cue is None:
            i += 1
            continue
        head = text[i + len(cue) : i + len(cue) + 2]
        if len(head) == 2 and _CJK.fullmatch(head[0]) and _CJK.fullmatch(head[1]):
            out.append((cue, head))
        i += len(cue)
    return out


# A rule stated with a condition ("不能超过…，否则返回" / "超过…时返回") keeps its negation
# in one wording and not the other: negation is not compared then.
_ZH_CONDITIONAL = ("否则", "如果", "若是", "假如", "一旦")


def _zh_conflict(claim: str, span: str) -> Contradiction | None:
    conditional = any(m in claim or m in span for m in _ZH_CONDITIONAL)
    c_neg = [(cue, h) for cue, h in _zh_negated(claim) if h in span and not conditional]
    s_neg = [(cue, h) for cue, h in _zh_negated(span) if h in claim and not conditional]
    if c_neg and not s_neg:
        return Contradiction(c_neg[0][0] + c_neg[0][1], c_neg[0][1], "negation")
    if s_neg and not c_neg:
        return Contradiction(s_neg[0][1], s_neg[0][0] + s_neg[0][1], "negation")
    for up, down in _ZH_DIRECTIONS:
        for mine, theirs in ((up, down), (down, up)):
            said = [w for w in mine if w in claim and w not in span]
            if said and not any(w in span for w in mine):
                opposite = [w for w in theirs if w in span and w not in claim]
                if opposite:
                    return Contradiction(said[0], opposite[0], "direction")
    return None


def contradiction(claim: str, span: str, stem: Stem) -> Contradiction | None:
    """The first conflict between a claim and its aligned span: negation, then direction
    (Chinese text by its own cues and direction words)."""
    if _CJK.search(claim):
        return _zh_conflict(fold_text(claim), fold_text(span))
    c, s = _tokens(claim, stem), _tokens(span, stem)
    return _negation_conflict(c, s) or _direction_conflict(c, s)
