"""Which cited ids a session's principal could not see (``forbidden`` citations).

A citation that was returned to the session is valid whatever its access metadata. One
that was not is ``unknown``, unless the knowledge base holds that ``document_id`` and
none of the rows holding it is visible to any principal the session's lookups were made
for, under ``access.mode=enforced``: then it is ``forbidden`` (the agent cites a
document the principal may not see). The session's principals come from the audit
store (tenant and the digest of the groups); a verifier given the groups gets them
checked against the digest, otherwise a principal counts as having no groups (a
group-restricted document is then not visible to it).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from lookup_knowledge.application.ports import AuditQueries, KnowledgeSearchPort
from lookup_knowledge.domain.access import AccessMode, Principal, can_see
from lookup_knowledge.domain.errors import InvalidInputError, LookupKnowledgeError


class CitationAccess:
    def __init__(self, queries: AuditQueries, search: KnowledgeSearchPort | None) -> None:
        self._queries = queries
        self._search = search

    def forbidden(
        self,
        session_id: str,
        candidates: Sequence[str],
        groups: Collection[str] | None = None,
    ) -> tuple[str, ...]:
        """The ``candidates`` (ids not returned to the session) that are forbidden."""
        if not candidates or self._search is None:
            return ()
        recorded = [
            p
            for p in self._queries.session_principals(session_id)
            if p.access_mode == AccessMode.ENFORCED.value
        ]
        if not recorded:
            return ()  # access control was off for this session: nothing is forbidden
        given = frozenset(groups) if groups is not None else None
        principals: list[Principal | None] = []
        for p in recorded:
            if p.tenant is None:
                principals.append(None)
                continue
            member = frozenset[str]()
            if given is not None:
                principal = Principal(p.tenant, groups=given)
                if principal.groups_hash() != p.groups_hash:
                    raise InvalidInputError(
                        "the groups given are not the groups the session's lookups were "
                        "made with (their digest differs from the recorded one)"
                    )
                member = given
            principals.append(Principal(p.tenant, groups=member))
        try:
            held = self._search.document_access(list(candidates))
        except LookupKnowledgeError:
            return ()  # the store cannot say: the ids stay unknown
        return tuple(
            d
            for d in candidates
            if held.get(d)
            and not any(
                can_see(principal, row, AccessMode.ENFORCED)
                for row in held[d]
                for principal in principals
            )
        )
