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


# Rare content words. The collection's document frequency is not available to the checker
# (the knowledge store exposes no term statistics), so the fallback is a fixed list of the
# general vocabulary that paraphrases swap freely (reporting verbs, quantities, study and
# measurement words): a claim word of at least four letters outside it, and not written
# with a digit, is taken to name something (an organism, organ, disease, drug, gene) that
# the cited span must contain.
COMMON_WORDS = word_set(
    "ability able absence accompanied account achieve across act action actual addition "
    "additional adult affect affected affects age aged ages aim almost alone along already "
    "although amount analyses analysis another apparent appear appears applied approach "
    "area areas around aspect assess assessed associated association associations author "
    "available average baseline basis become began begin behind believe best better beyond "
    "big body bring broad called candidate capable care carried case cases cause caused "
    "causes causing central certain change changed changes changing characterized clear "
    "clearly close cohort combined common commonly compared comparison complete completely "
    "condition conditions confirm confirmed consequence consider considered consistent "
    "contain contained contains context contrast contribute contributes control controlled "
    "controls correlated correlation could current currently data day days decrease "
    "decreased decreases demonstrate demonstrated demonstrates depend dependent describe "
    "described detected determine determined develop developed development did differ "
    "difference differences different directly display displayed displays distinct does "
    "drive driven drives due during early effect effective effects either elevated "
    "enhanced entire especially essential establish established estimate estimated even "
    "event events evidence examine examined example exhibit exhibited exhibits exist "
    "experiment experimental experiments explain exposure express expressed expression "
    "extent factor factors fail failed far feature features find finding findings first "
    "follow followed following form forms found four frequency frequent frequently full "
    "fully function functional functions further general generally given good great group "
    "groups half happen help high higher highly however human humans identified identify "
    "impact important improve improved include included includes including increase "
    "increased increases increasing independent independently indicate indicated indicates "
    "individual individuals induce induced induces influence involve involved involves "
    "key known lack large largely larger last late later lead leading leads least led "
    "less level levels likely limited linked little long low lower main mainly major "
    "majority make makes many marked markedly may mean measure measured measures mechanism "
    "mechanisms might model models moreover much multiple need needed new normal notably "
    "novel number numbers observe observed obtained occur occurred occurs often one ones "
    "outcome outcomes overall part participant participants particular particularly "
    "patient patients people percent performed period persons play plays point population "
    "populations possible potential potentially present presented presence previous "
    "previously primary probably process produce produced produces production promote "
    "proportion provide provided provides rate rates rather reach reached reduce reduced "
    "reduces reducing reduction regarding related relation relationship relative relatively "
    "remain remained remains report reported reports represent represents require required "
    "requires research response responses result resulted resulting results reveal "
    "revealed reveals rise risk role roles sample samples second seen several show showed "
    "shown significant significantly similar similarly simple since single small smaller "
    "specific strong strongly studied studies study subject subjects substantial "
    "substantially suggest suggested suggesting suggests support supported supports "
    "suppress suppressed take taken term test tested testing tests therefore three thus "
    "time times total towards treat treated treatment treatments trial trials two type "
    "types typically underlying unclear understanding unknown use used useful uses using "
    "usually value values various versus way ways well whole widely within work year years "
    "young "
    # answer boilerplate
    "guide manual paper article authors abstract passage page section text writes wrote "
    "explains explained describes notes recommends recommended write "
    # general words paraphrases use
    "hard easy move moves moved needed kept keep keeps run runs get gets give gives made"
)


def is_rare_word(word: str) -> bool:
    """A content word that names something (see ``COMMON_WORDS``): Latin, four letters or
    more, not common, not written with a digit (numbers and codes are facts already)."""
    return (
        word.isascii()
        and len(word) >= 4
        and word.isalpha()
        and word not in COMMON_WORDS
        and word not in STOP_WORDS
    )


def swapped_words(claim: Sequence[str], span: Sequence[str], stem: Stem) -> list[tuple[str, str]]:
    """(claim word, span word) pairs where the claim puts a word the span does not have in
    the place of one the claim does not have: the neighbours agree and the word between
    differs ("myocarditis in rats" against "myocarditis in mice"). Content words, in order."""
    if not claim or not span:
        return []
    c_stems = list(stem(list(claim)))
    s_stems = list(stem(list(span)))
    in_span, in_claim = set(s_stems), set(c_stems)
    out: list[tuple[str, str]] = []
    for i, (word, st) in enumerate(zip(claim, c_stems, strict=True)):
        if st in in_span or not word.isalpha():
            continue
        before = c_stems[i - 1] if i > 0 and c_stems[i - 1] in in_span else None
        after = c_stems[i + 1] if i + 1 < len(c_stems) and c_stems[i + 1] in in_span else None
        for j, s in enumerate(s_stems):
            if before is not None and s == before and j + 1 < len(span):
                other = s_stems[j + 1]
                if other not in in_claim and span[j + 1].isalpha():
                    out.append((word, span[j + 1]))
                    break
            if after is not None and s == after and j > 0:
                other = s_stems[j - 1]
                if other not in in_claim and span[j - 1].isalpha():
                    out.append((word, span[j - 1]))
                    break
    return out


# Lowercase technical terms, known by their morphology: the stems of international
# nonproprietary drug names (sorafenib, rituximab, olanzapine, metformin, ...) and the
# endings of disease, tumour and enzyme names (myocarditis, lymphoma, fibrosis, kinase).
TECHNICAL_ENDINGS = (
    "mab",
    "nib",
    "pril",
    "sartan",
    "olol",
    "azole",
    "mycin",
    "cillin",
    "cycline",
    "statin",
    "vir",
    "apine",
    "azepam",
    "oxetine",
    "parin",
    "floxacin",
    "platin",
    "taxel",
    "rubicin",
    "formin",
    "gliptin",
    "glitazone",
    "triptan",
    "setron",
    "prazole",
    "dronate",
    "oma",
    "omas",
    "itis",
    "osis",
    "emia",
    "aemia",
    "pathy",
    "plasia",
    "kinase",
    "kinases",
    "phatase",
    "phatases",
)


def is_technical_term(word: str) -> bool:
    """A lowercase word that names a drug, disease or enzyme by its ending (see
    ``TECHNICAL_ENDINGS``), six letters or more."""
    return (
        len(word) >= 6
        and word.isascii()
        and word.isalpha()
        and word not in COMMON_WORDS
        and word.endswith(TECHNICAL_ENDINGS)
    )
