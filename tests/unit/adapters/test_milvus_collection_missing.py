"""When the Milvus adapter drops what it cached about a collection: on the driver's
"collection missing" error, read by type and code, never by the message's words."""

from __future__ import annotations

from pymilvus.exceptions import CollectionNotExistException, MilvusException

from lookup_knowledge.adapters.milvus.errors import collection_missing, translate
from lookup_knowledge.domain.errors import SearchUnavailable


def test_the_collection_missing_code_or_type_says_the_cache_is_stale() -> None:
    assert collection_missing(MilvusException(code=100, message="collection not found"))
    assert collection_missing(CollectionNotExistException(message="gone"))


def test_an_error_that_only_says_not_found_in_words_does_not() -> None:
    assert not collection_missing(MilvusException(code=1100, message="field not found"))
    assert not collection_missing(ValueError("collection does not exist"))
    assert not collection_missing(None)


def test_a_missing_collection_is_still_reported_as_unavailable() -> None:
    error = translate(MilvusException(code=100, message="collection not found"), "search", "here")
    assert type(error) is SearchUnavailable
    assert "ingest documents first" in error.message
