"""The visibility rule (``domain/access.py``): examples and properties."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lookup_knowledge.domain.access import (
    MAX_ACCESS_NAME_CHARS,
    AccessMode,
    AccessScope,
    DocumentAccess,
    Principal,
    can_see,
    split_storage_key,
    storage_key,
)
from lookup_knowledge.domain.errors import InvalidInputError

OFF, ON = AccessMode.OFF, AccessMode.ENFORCED

names = st.text(
    st.characters(blacklist_categories=("Cc", "Cs", "Zs", "Zl", "Zp")), min_size=1, max_size=12
)
principals = st.builds(
    Principal, tenant=names, user=st.just("u"), groups=st.frozensets(names, max_size=4)
)
documents = st.one_of(
    st.just(DocumentAccess()),
    st.builds(DocumentAccess, public=st.just(True)),
    st.builds(DocumentAccess, tenant=names, allowed_groups=st.frozensets(names, max_size=4)),
)


def test_examples() -> None:
    alice = Principal("acme", "alice", frozenset({"hr"}))
    assert can_see(alice, DocumentAccess("acme"), ON)
    assert can_see(alice, DocumentAccess("acme", frozenset({"hr", "ops"})), ON)
    assert not can_see(alice, DocumentAccess("acme", frozenset({"ops"})), ON)
    assert not can_see(alice, DocumentAccess("globex"), ON)
    assert can_see(alice, DocumentAccess(public=True), ON)
    assert not can_see(alice, DocumentAccess(), ON)  # no ACL fields: fail closed
    assert not can_see(None, DocumentAccess("acme"), ON)
    assert can_see(None, DocumentAccess(public=True), ON)
    assert can_see(None, DocumentAccess(), OFF)


def test_look_alike_tenants_are_different_tenants() -> None:
    latin = Principal("acme")
    cyrillic_a = DocumentAccess("\u0430cme")  # CYRILLIC SMALL LETTER A
    assert not can_see(latin, cyrillic_a, ON)


def test_principal_without_groups_sees_only_group_free_documents_of_its_tenant() -> None:
    nobody = Principal("acme")
    assert can_see(nobody, DocumentAccess("acme"), ON)
    assert not can_see(nobody, DocumentAccess("acme", frozenset({"hr"})), ON)


@pytest.mark.parametrize(
    "bad",
    ["", " acme", "acme ", "a\x00b", "a\nb", "a\x85b", "\ud800", "x" * (MAX_ACCESS_NAME_CHARS + 1)],
)
def test_unusable_names_are_refused(bad: str) -> None:
    with pytest.raises(InvalidInputError):
        Principal(bad)
    with pytest.raises(InvalidInputError):
        Principal("t", groups=frozenset({bad}))
    with pytest.raises(InvalidInputError):
        DocumentAccess(bad) if bad else DocumentAccess("t", frozenset({bad}))


def test_groups_without_a_tenant_are_refused() -> None:
    with pytest.raises(InvalidInputError):
        DocumentAccess(allowed_groups=frozenset({"hr"}))


@pytest.mark.parametrize("hostile", ['a"b', "x' or 1==1 or '", 'x" or 1==1 or "', "a\\", '\\"'])
def test_hostile_names_are_ordinary_names(hostile: str) -> None:
    assert can_see(Principal(hostile), DocumentAccess(hostile), ON)
    assert not can_see(Principal("x"), DocumentAccess(hostile), ON)


@given(principals, documents)
def test_off_sees_everything(principal: Principal, document: DocumentAccess) -> None:
    assert can_see(principal, document, OFF)
    assert AccessScope(OFF, principal).allows(document)


@given(principals, documents)
def test_enforced_never_crosses_tenants(principal: Principal, document: DocumentAccess) -> None:
    if can_see(principal, document, ON) and not document.public:
        assert document.tenant == principal.tenant
        assert not document.allowed_groups or document.allowed_groups & principal.groups


@given(principals, documents, st.frozensets(names, max_size=3))
def test_more_groups_never_see_less(
    principal: Principal, document: DocumentAccess, extra: frozenset[str]
) -> None:
    richer = Principal(principal.tenant, principal.user, principal.groups | extra)
    if can_see(principal, document, ON):
        assert can_see(richer, document, ON)


@given(st.frozensets(names, max_size=5), st.frozensets(names, max_size=5))
def test_groups_hash_is_a_function_of_the_set(a: frozenset[str], b: frozenset[str]) -> None:
    assert (Principal("t", groups=a).groups_hash() == Principal("t", groups=b).groups_hash()) == (
        a == b
    )


@given(st.one_of(st.just(""), names), names)
def test_storage_keys_round_trip_and_never_collide(tenant: str, key: str) -> None:
    stored = storage_key(tenant, key)
    assert split_storage_key(stored) == (tenant, key)
    if tenant:
        assert stored != storage_key("", key)
