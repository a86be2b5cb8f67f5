"""L0: the rule-based query transformer. Its output shapes filters and rerank only."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from lookup_knowledge.domain.model import QueryHints
from lookup_knowledge.domain.query_understanding import DomainDictionary, analyse_query


class QueryTransformer:
    """Domain dictionary (category -> keywords/aliases) in, ``QueryHints`` out."""

    def __init__(self, dictionary: DomainDictionary | Mapping[str, Iterable[str]]) -> None:
        self._dictionary = (
            dictionary
            if isinstance(dictionary, DomainDictionary)
            else DomainDictionary.from_mapping(dictionary)
        )

    @property
    def dictionary(self) -> DomainDictionary:
        return self._dictionary

    def transform(self, query: str) -> QueryHints:
        return analyse_query(query, self._dictionary)
