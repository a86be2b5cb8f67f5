"""L0 query understanding: domain hints, matched keywords and entities. Hints only.

Matching rules, chosen so that English and Chinese queries both work:
- a keyword made of ASCII letters/digits matches case-insensitively on ASCII word
  boundaries (``db`` does not match ``feedback``), even inside Chinese text
  (``数据库报错ORA-00942`` still yields ``ORA-00942``);
- any other keyword (Chinese, mixed) matches as a case-insensitive substring, since
  Chinese has no spaces between words.
The filter candidate is set only when exactly one domain matched.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from lookup_knowledge.domain.model import QueryHints

_A = r"(?<![A-Za-z0-9_])"  # ASCII-only word boundaries: CJK characters count as a boundary
_Z = r"(?![A-Za-z0-9_])"

# Ordered: earlier patterns win where spans overlap.
ENTITY_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("ip", re.compile(_A + r"(?:\d{1,3}\.){3}\d{1,3}(?::\d{1,5})?" + _Z)),
    ("ipv6", re.compile(_A + r"(?:[0-9a-fA-F]{1,4}:){2,7}[0-9a-fA-F]{1,4}" + _Z)),
    ("http_status", re.compile(_A + r"HTTP[ -]?[1-5]\d\d" + _Z, re.IGNORECASE)),
    ("code", re.compile(_A + r"[A-Z][A-Z0-9]*(?:[-_][A-Z0-9]+)*[-_]\d{2,}" + _Z)),
    ("code", re.compile(_A + r"[A-Z]{1,5}\d{3,}" + _Z)),
    (
        "hostname",
        re.compile(_A + r"(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?\.)+[a-zA-Z]{2,}" + _Z),
    ),
    ("version", re.compile(_A + r"v?\d+(?:\.\d+){1,3}(?:-[0-9A-Za-z.]+)?" + _Z)),
    ("identifier", re.compile(_A + r"[A-Za-z][A-Za-z0-9]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*\(\)")),
    ("identifier", re.compile(_A + r"[a-z][a-z0-9]*(?:_[a-z0-9]+)+" + _Z)),
    ("identifier", re.compile(_A + r"[a-z]+[0-9]*(?:[A-Z][a-z0-9]+)+" + _Z)),
    ("identifier", re.compile(_A + r"[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]+)+" + _Z)),
    ("identifier", re.compile(_A + r"[a-z][a-z0-9]*(?:-[a-z0-9]+)+-\d+" + _Z)),
)


def extract_entities(text: str) -> tuple[str, ...]:
    """Entities in order of appearance, each once; overlapping matches keep the first kind."""
    taken: list[tuple[int, int, str]] = []
    for _kind, pattern in ENTITY_PATTERNS:
        for match in pattern.finditer(text):
            start, end = match.span()
            if any(start < e and s < end for s, e, _ in taken):
                continue
            taken.append((start, end, match.group(0)))
    taken.sort()
    seen: set[str] = set()
    ordered: list[str] = []
    for _, _, value in taken:
        if value not in seen:
            seen.add(value)
            ordered.append(value)
    return tuple(ordered)


def _is_ascii_word(keyword: str) -> bool:
    return keyword.isascii()


def keyword_in(keyword: str, text: str) -> bool:
    key = keyword.strip()
    if not key:
        return False
    if _is_ascii_word(key):
        return re.search(_A + re.escape(key) + _Z, text, re.IGNORECASE) is not None
    return key.casefold() in text.casefold()


_EMPTY: Mapping[str, tuple[str, ...]] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class DomainDictionary:
    """category -> keywords and aliases (the category name itself always counts)."""

    categories: Mapping[str, tuple[str, ...]] = field(default_factory=lambda: _EMPTY)

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Iterable[str]]) -> DomainDictionary:
        cleaned: dict[str, tuple[str, ...]] = {}
        for category, words in raw.items():
            name = category.strip()
            if not name:
                raise ValueError("a domain dictionary category name must not be blank")
            unique: list[str] = []
            for word in (name, *words):
                w = word.strip()
                if w and w not in unique:
                    unique.append(w)
            cleaned[name] = tuple(unique)
        return cls(MappingProxyType(cleaned))


def analyse_query(query: str, dictionary: DomainDictionary) -> QueryHints:
    matched_by_domain: dict[str, list[str]] = {}
    for category, words in dictionary.categories.items():
        hits = [w for w in words if keyword_in(w, query)]
        if hits:
            matched_by_domain[category] = hits
    domains = tuple(sorted(matched_by_domain, key=lambda d: (-len(matched_by_domain[d]), d)))
    keywords: list[str] = []
    for domain in domains:
        for word in matched_by_domain[domain]:
            if word not in keywords:
                keywords.append(word)
    return QueryHints(
        query=query,
        domains=domains,
        matched_keywords=tuple(keywords),
        entities=extract_entities(query),
        filter_candidate=domains[0] if len(domains) == 1 else None,
    )
