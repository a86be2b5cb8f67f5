"""The access filter expression (``filters.access_filter``): the shape of each case, and
for hostile names a round trip through a tiny parser of the literal grammar: the value
comes back out of its literal whole, so nothing of it is read as an operator."""

from __future__ import annotations

import base64
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lookup_knowledge.adapters.milvus.filters import access_filter, groups_key, string_literal
from lookup_knowledge.domain.access import UNRESTRICTED, AccessMode, AccessScope, Principal
from lookup_knowledge.domain.errors import InvalidInputError

ON = AccessMode.ENFORCED
_LITERAL = re.compile(r'"((?:[^"\\]|\\.)*)"')
_UNESCAPE = {"\\\\": "\\", '\\"': '"', "\\n": "\n", "\\r": "\r", "\\t": "\t"}


def _values(expression: str) -> list[str]:
    """Every string literal of ``expression``, unescaped."""
    return [
        re.sub(r"\\.", lambda m: _UNESCAPE[m.group(0)], m.group(1))
        for m in _LITERAL.finditer(expression)
    ]


def _outside_literals(expression: str) -> str:
    return _LITERAL.sub('""', expression)


def test_off_has_no_filter() -> None:
    assert access_filter(UNRESTRICTED) is None
    assert access_filter(AccessScope(AccessMode.OFF, Principal("t"))) is None


def test_no_principal_sees_public_only() -> None:
    assert access_filter(AccessScope(ON, None)) == "access_public == true"


def test_a_principal_without_groups_sees_group_free_documents_of_its_tenant() -> None:
    expected = '(access_public == true) or ((tenant == "acme") and ((allowed_groups_key == "")))'
    assert access_filter(AccessScope(ON, Principal("acme"))) == expected
    assert access_filter(AccessScope(ON, Principal("acme")), array_groups=True) == expected


def test_groups_are_matched_by_their_exact_token() -> None:
    scope = AccessScope(ON, Principal("acme", groups=frozenset({"ops", "hr"})))
    expression = access_filter(scope)
    assert expression is not None
    assert groups_key({"ops", "hr"}) == "\taHI=\t\tb3Bz\t"
    assert 'allowed_groups_key like "%\\taHI=\\t%"' in expression
    assert 'allowed_groups_key like "%\\tb3Bz\\t%"' in expression
    on_server = access_filter(scope, array_groups=True)
    assert on_server is not None
    assert 'array_contains_any(allowed_groups, ["hr", "ops"])' in on_server


@given(st.frozensets(st.text(min_size=1, max_size=8).filter(lambda s: "\x00" not in s), max_size=4))
def test_a_group_token_is_found_in_a_key_exactly_when_the_group_is_in_it(
    groups: frozenset[str],
) -> None:
    key = groups_key(groups)
    for probe in ["hr", "h", "%", "_", *groups]:
        token = "\t" + base64.b64encode(probe.encode("utf-8", "surrogatepass")).decode() + "\t"
        assert (token in key) == (probe in groups)


HOSTILE = [
    'x" or 1==1 or "',
    "x' or 1==1 or '",
    "a\\",
    '\\"',
    'acme") or (access_public == true',
    "\u0430cme",
    "x" * 128,
    'a]"), ["b',
]


@pytest.mark.parametrize("hostile", HOSTILE)
def test_hostile_names_stay_inside_their_literals(hostile: str) -> None:
    principal = Principal(hostile, groups=frozenset({hostile, "g"}))
    expression = access_filter(AccessScope(ON, principal))
    assert expression is not None
    values = _values(expression)
    assert values[0] == hostile
    assert values[1] == ""
    tokens = sorted(base64.b64encode(g.encode()).decode() for g in {hostile, "g"})
    assert sorted(v.strip("%\t") for v in values[2:]) == tokens
    skeleton = _outside_literals(expression)
    assert skeleton == (
        '(access_public == true) or ((tenant == "") and ((allowed_groups_key == "")'
        ' or (allowed_groups_key like "") or (allowed_groups_key like "")))'
    )
    on_server = access_filter(AccessScope(ON, principal), array_groups=True)
    assert on_server is not None
    assert _values(on_server) == [hostile, "", *sorted({hostile, "g"})]


names = st.text(st.characters(blacklist_categories=("Cc", "Cs")), min_size=1, max_size=40).filter(
    lambda s: s == s.strip()
)


@given(names, st.frozensets(names, max_size=4))
def test_any_name_round_trips_and_leaves_the_skeleton_alone(
    tenant: str, groups: frozenset[str]
) -> None:
    expression = access_filter(AccessScope(ON, Principal(tenant, groups=groups)))
    assert expression is not None
    on_server = access_filter(AccessScope(ON, Principal(tenant, groups=groups)), array_groups=True)
    assert on_server is not None
    assert _values(on_server) == [tenant, "", *sorted(groups)]
    assert string_literal(tenant) in expression
    assert "1==1" not in _outside_literals(expression)


@given(st.text(st.characters(exclude_categories=())))  # lone surrogates included
def test_a_string_literal_reads_back_as_its_value_or_is_refused_for_a_control_character(
    value: str,
) -> None:
    refused = any((ord(c) < 32 and c not in "\n\r\t") or c == "\x7f" for c in value) or any(
        0xD800 <= ord(c) <= 0xDFFF for c in value
    )
    try:
        literal = string_literal(value)
    except InvalidInputError:
        assert refused
        return
    assert not refused
    assert _values(literal) == [value]
    assert _LITERAL.fullmatch(literal)
