"""Sessions are owned: the principal whose lookups a session recorded owns it; a new
session becomes its first claimant's; a session holding two principals' records is
nobody's; an audit outage lets lookups go on without asking the store on every call."""

from __future__ import annotations

from dataclasses import replace

from lookup_knowledge.application.ports import SessionOwner
from lookup_knowledge.application.session_owner import SessionOwners, owner_of
from lookup_knowledge.domain.access import Principal
from lookup_knowledge.domain.errors import AuditUnavailable
from tests.fakes.audit import InMemoryAuditQueries, InMemoryAuditStore
from tests.support.audit_data import invocation

ACME = Principal("acme", "alice")
GLOBEX = Principal("globex", "gus", frozenset({"ops"}))


def _store_with(session: str, *principals: Principal | None) -> InMemoryAuditStore:
    store = InMemoryAuditStore()
    for principal in principals:
        owner = owner_of(principal)
        store.insert(
            replace(
                invocation(session),
                principal_tenant=owner.tenant,
                principal_user=owner.user,
                principal_groups_hash=owner.groups_hash,
            )
        )
    return store


def test_the_principal_a_session_recorded_owns_it() -> None:
    owners = SessionOwners(InMemoryAuditQueries(_store_with("s-1", GLOBEX)))
    assert owners.owns("s-1", GLOBEX)
    assert not owners.owns("s-1", ACME)
    assert not owners.claim("s-1", ACME)
    assert owners.claim("s-1", GLOBEX)


def test_a_new_session_becomes_its_first_claimants_before_any_record_lands() -> None:
    owners = SessionOwners(InMemoryAuditQueries(InMemoryAuditStore()))
    assert not owners.owns("fresh", ACME)  # nobody's yet
    assert owners.claim("fresh", ACME)
    assert not owners.claim("fresh", GLOBEX)
    assert not owners.owns("fresh", GLOBEX)
    assert owners.owns("fresh", ACME)


def test_a_session_holding_two_principals_records_is_nobodys() -> None:
    owners = SessionOwners(InMemoryAuditQueries(_store_with("mixed", ACME, GLOBEX)))
    assert not owners.claim("mixed", ACME)
    assert not owners.owns("mixed", GLOBEX)


def test_no_principal_is_an_owner_of_its_own() -> None:
    assert owner_of(None) == SessionOwner(None, None, None)
    owners = SessionOwners(InMemoryAuditQueries(_store_with("anon", None)))
    assert owners.owns("anon", None)
    assert not owners.owns("anon", ACME)


class _Down(InMemoryAuditQueries):
    def __init__(self) -> None:
        super().__init__(InMemoryAuditStore())
        self.asked = 0

    def session_owners(self, session_id: str) -> tuple[SessionOwner, ...]:
        self.asked += 1
        raise AuditUnavailable("the audit database is unreachable")


def test_an_audit_outage_grants_new_sessions_and_backs_off() -> None:
    now = [100.0]
    queries = _Down()
    owners = SessionOwners(queries, retry_after_s=5.0, monotonic=lambda: now[0])
    assert owners.claim("a", ACME)
    assert owners.claim("b", GLOBEX)
    assert not owners.claim("a", GLOBEX)  # remembered: still acme's
    assert queries.asked == 1
    now[0] += 6.0
    assert owners.claim("c", ACME)
    assert queries.asked == 2
