"""The one place that writes Milvus boolean expressions.

Milvus Lite and older servers do not support ``filter_params`` templating, so values
are written as escaped string literals. Rules:

- field names come from an allowlist only (``FILTERABLE_FIELDS``); anything else is a
  ``SearchBadRequest`` before a request is sent;
- a string value becomes a double-quoted literal with backslash, double quote and the
  line-break/tab control characters escaped; other control characters, NUL and lone
  surrogates are rejected (``InvalidInputError``): they cannot be stored in a field
  either, so no row could match them;
- integers are written with ``int()`` formatting only (booleans rejected);
- the access filter (``access_filter``) is written here too, from an ``AccessScope``:
  tenant and group names are values like any other (quotes, backslashes and
  ``or 1==1`` stay inside their literal). Groups are matched on ``allowed_groups_key``,
  a VARCHAR holding each allowed group base64-encoded between tabs (``groups_key``):
  ``LIKE "%\t<base64>\t%"`` per principal group. Base64 has no LIKE wildcard, no
  quote and no backslash, so the pattern matches that group exactly; and a LIKE scan
  of a string is cheap where ``array_contains_any`` is not (Milvus Lite cannot index an
  ARRAY field and reads every row's array: many times a lookup's search time,
  ``benchmarks/bench_access.py``, figures in benchmarks/README.md). Servers before 2.4 accept only prefix patterns:
  there the groups are matched with ``array_contains_any`` on the ARRAY field
  (``array_groups=True``), which a server can also index. The ARRAY field stays the
  readable truth either way.

User text is never pasted into an expression: it is always a value passed through here.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterable, Sequence

from lookup_knowledge.domain.access import AccessScope
from lookup_knowledge.domain.errors import InvalidInputError, SearchBadRequest

#: The access fields (schema version 3).
TENANT_FIELD = "tenant"
GROUPS_FIELD = "allowed_groups"
GROUPS_KEY_FIELD = "allowed_groups_key"
PUBLIC_FIELD = "access_public"

FILTERABLE_FIELDS = frozenset(
    {
        "evidence_key",
        "doc_id",
        "chunk_index",
        "category",
        "source",
        "source_type",
        "title",
        TENANT_FIELD,
        GROUPS_FIELD,
        GROUPS_KEY_FIELD,
        PUBLIC_FIELD,
    }
)

_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t"}
#: A character ``string_literal`` escapes or refuses; a value without one is quoted as it is.
_SPECIAL = re.compile('[\\x00-\\x1f\\x7f\\\\"\\ud800-\\udfff]')


def string_literal(value: str) -> str:
    """``value`` as a Milvus double-quoted string literal that matches it exactly."""
    if not isinstance(value, str):
        raise InvalidInputError(f"filter value must be a string, got {type(value).__name__}")
    if _SPECIAL.search(value) is None:  # the common case, in C: nothing to escape or refuse
        return f'"{value}"'
    out: list[str] = ['"']
    for ch in value:
        escaped = _ESCAPES.get(ch)
        if escaped is not None:
            out.append(escaped)
            continue
        code = ord(ch)
        if code < 32 or code == 127:
            raise InvalidInputError(
                f"filter value contains control character U+{code:04X}; it cannot match"
            )
        if 0xD800 <= code <= 0xDFFF:
            raise InvalidInputError("filter value contains a lone surrogate; it is not text")
        out.append(ch)
    out.append('"')
    return "".join(out)


def int_literal(value: int) -> str:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInputError(f"filter value must be an integer, got {type(value).__name__}")
    return str(int(value))


def field_name(name: str) -> str:
    if name not in FILTERABLE_FIELDS:
        raise SearchBadRequest(f"field {name!r} is not filterable")
    return name


def eq(name: str, value: str | int) -> str:
    literal = int_literal(value) if isinstance(value, int) else string_literal(value)
    return f"{field_name(name)} == {literal}"


def in_list(name: str, values: Sequence[str] | Sequence[int]) -> str:
    if not values:
        raise InvalidInputError(f"empty value list for {name}")
    literals = [int_literal(v) if isinstance(v, int) else string_literal(v) for v in values]
    return f"{field_name(name)} in [{', '.join(literals)}]"


def not_in_list(name: str, values: Sequence[str] | Sequence[int]) -> str:
    return f"not ({in_list(name, values)})"


def all_of(expressions: Iterable[str | None]) -> str:
    """AND of the non-empty expressions, each parenthesised; "" when there are none."""
    parts = [f"({e})" for e in expressions if e]
    return " and ".join(parts)


def is_true(name: str) -> str:
    return f"{field_name(name)} == true"


def _group_token(group: str) -> str:
    return base64.b64encode(group.encode("utf-8")).decode("ascii")


def groups_key(groups: Iterable[str]) -> str:
    """The ``allowed_groups_key`` of a group set: "" for none, else each group's base64
    between tabs, sorted (``\tZ3Jw\t\taHI=\t``)."""
    return "".join(f"\t{_group_token(g)}\t" for g in sorted(groups))


def groups_key_has(name: str, group: str) -> str:
    """``name`` (a ``groups_key`` field) lists ``group``: LIKE on its exact token."""
    pattern = "%\t" + _group_token(group) + "\t%"
    return f"{field_name(name)} like {string_literal(pattern)}"


def any_of(expressions: Iterable[str | None]) -> str:
    """OR of the non-empty expressions, each parenthesised; "" when there are none."""
    parts = [f"({e})" for e in expressions if e]
    return " or ".join(parts)


def array_contains_any(name: str, values: Sequence[str]) -> str:
    if not values:
        raise InvalidInputError(f"empty value list for {name}")
    literals = ", ".join(string_literal(v) for v in values)
    return f"array_contains_any({field_name(name)}, [{literals}])"


def access_filter(scope: AccessScope, *, array_groups: bool = False) -> str | None:
    """The expression that keeps only rows ``scope`` may see (``domain.access.can_see``),
    or None when access control is off. Fail closed: without a principal only rows
    marked public match; a row without a tenant matches only when public."""
    if not scope.enforced:
        return None
    public = is_true(PUBLIC_FIELD)
    principal = scope.principal
    if principal is None:
        return public
    group_free = f"{field_name(GROUPS_KEY_FIELD)} == {string_literal('')}"
    groups = principal.sorted_groups
    if array_groups:
        member = [array_contains_any(GROUPS_FIELD, groups)] if groups else []
    else:
        member = [groups_key_has(GROUPS_KEY_FIELD, g) for g in groups]
    audience = any_of([group_free, *member])
    return any_of([public, all_of([eq(TENANT_FIELD, principal.tenant), audience])])
