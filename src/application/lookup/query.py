"""The input rules of a lookup: ids come from the host, the query from the agent.

A bad id is the host's bug and is refused before anything is searched, so a lookup is
never served that the audit store cannot keep. Query text is kept as the agent sent it,
minus what no store can hold.
"""

from __future__ import annotations

from lookup_knowledge.application.tool import MAX_ID_CHARS, MAX_QUERY_CHARS
from lookup_knowledge.domain.errors import InvalidInputError


def check_id(name: str, value: object, *, required: bool = False) -> None:
    """A storable id, or ``InvalidInputError`` naming it."""
    if value is None and not required:
        return
    if not isinstance(value, str) or not value.strip():
        raise InvalidInputError(f"{name} must be a non-empty string")
    if len(value) > MAX_ID_CHARS:
        raise InvalidInputError(f"{name} is {len(value)} characters; the limit is {MAX_ID_CHARS}")
    if any(ord(ch) < 32 or ord(ch) == 127 or 0xD800 <= ord(ch) <= 0xDFFF for ch in value):
        raise InvalidInputError(f"{name} must not contain control characters or lone surrogates")


def clean_query(query: object) -> str:
    """Query text as the agent sent it, minus what no store can hold: NUL and other
    control characters (tab and newline stay) and lone UTF-16 surrogates (become U+FFFD).
    Anything but a string is the empty query (refused by ``check_query``)."""
    if not isinstance(query, str):
        return ""
    if query.isascii() and query.isprintable():
        return query
    fixed = query.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return "".join(ch for ch in fixed if ch in "\t\n" or (ord(ch) >= 32 and ord(ch) != 127))


def check_query(query: str) -> None:
    """A cleaned query the tool accepts, or ``InvalidInputError``."""
    if not query.strip():
        raise InvalidInputError("query must be a non-empty string")
    if len(query) > MAX_QUERY_CHARS:
        raise InvalidInputError(f"query is {len(query)} characters; the limit is {MAX_QUERY_CHARS}")
