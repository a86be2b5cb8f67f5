"""Access control: who is asking (``Principal``), what a document allows
(``DocumentAccess``) and the one rule that decides whether the first may see the second.

The principal comes from the host (Python API, framework adapter, MCP configuration or
token, CLI options), never from the agent. Under ``AccessMode.OFF`` everybody sees
everything (single-tenant use, the default). Under ``AccessMode.ENFORCED``:

- a document marked ``public`` is visible to every lookup, with or without a principal;
- otherwise a principal is needed and its tenant must equal the document's tenant
  (exact, code point for code point: look-alike letters are different tenants);
- a document of that tenant with no ``allowed_groups`` is visible to the whole tenant,
  one with groups only to a principal that is in at least one of them;
- a document without a tenant that is not public (no ACL fields at all) is visible to
  nobody: fail closed.

Every search pass filters by this rule in the engine, and the application checks each
hit against ``can_see`` again afterwards (defence in depth). Standard library only.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum

from lookup_knowledge.domain.errors import InvalidInputError

#: The longest tenant, user or group name accepted (characters).
MAX_ACCESS_NAME_CHARS = 128
#: The most groups a principal may carry.
MAX_PRINCIPAL_GROUPS = 256
#: The most groups a document may allow (the Milvus array field's capacity).
MAX_DOCUMENT_GROUPS = 64


class AccessMode(StrEnum):
    OFF = "off"
    ENFORCED = "enforced"


def validate_access_name(value: object, what: str) -> str:
    """A tenant, user or group name as stored and compared, or ``InvalidInputError``.

    1..128 characters, no leading or trailing whitespace, no control characters, no NUL,
    no lone surrogates. Quotes, backslashes and operators are ordinary characters: they
    reach an engine only through the escaping expression builder.
    """
    if not isinstance(value, str):
        raise InvalidInputError(f"{what} must be a string, got {type(value).__name__}")
    if not value or value != value.strip():
        raise InvalidInputError(
            f"{what} {value[:80]!r} must be non-empty without leading or trailing whitespace"
        )
    if len(value) > MAX_ACCESS_NAME_CHARS:
        raise InvalidInputError(
            f"{what} is {len(value)} characters; the limit is {MAX_ACCESS_NAME_CHARS}"
        )
    for ch in value:
        code = ord(ch)
        if code < 32 or 127 <= code < 160:
            raise InvalidInputError(f"{what} {value[:80]!r} contains control characters")
        if 0xD800 <= code <= 0xDFFF:
            raise InvalidInputError(f"{what} contains a lone surrogate (not valid text)")
    return value


def _groups(values: Iterable[str], what: str, limit: int) -> frozenset[str]:
    if isinstance(values, str):
        raise InvalidInputError(f"{what} must be a collection of names, not one string")
    groups = frozenset(validate_access_name(v, what) for v in values)
    if len(groups) > limit:
        raise InvalidInputError(f"{len(groups)} {what}s; the limit is {limit}")
    return groups


@dataclass(frozen=True, slots=True)
class Principal:
    """Who a lookup is made for: a tenant, a user (for the record) and groups."""

    tenant: str
    user: str = ""
    groups: frozenset[str] = field(default_factory=frozenset)

    def __post_init__(self) -> None:
        validate_access_name(self.tenant, "tenant")
        if self.user:
            validate_access_name(self.user, "user")
        object.__setattr__(
            self, "groups", _groups(self.groups, "principal group", MAX_PRINCIPAL_GROUPS)
        )

    @property
    def sorted_groups(self) -> tuple[str, ...]:
        return tuple(sorted(self.groups))

    def groups_hash(self) -> str:
        """A stable digest of the group set for the audit record (the names themselves
        may be sensitive); the same set always gives the same hex string."""
        digest = hashlib.sha256()
        for group in self.sorted_groups:
            encoded = group.encode("utf-8")
            digest.update(len(encoded).to_bytes(4, "big"))
            digest.update(encoded)
        return digest.hexdigest()


@dataclass(frozen=True, slots=True)
class DocumentAccess:
    """A document's access metadata. The default (no tenant, no groups, not public) is
    what a row without ACL fields has: visible to nobody under ``enforced``."""

    tenant: str = ""
    allowed_groups: frozenset[str] = field(default_factory=frozenset)
    public: bool = False

    def __post_init__(self) -> None:
        if self.tenant:
            validate_access_name(self.tenant, "tenant")
        object.__setattr__(
            self,
            "allowed_groups",
            _groups(self.allowed_groups, "allowed group", MAX_DOCUMENT_GROUPS),
        )
        if self.allowed_groups and not self.tenant:
            raise InvalidInputError("allowed_groups need a tenant: groups belong to a tenant")

    @property
    def has_acl(self) -> bool:
        return self.public or bool(self.tenant)


NO_ACL = DocumentAccess()


def can_see(principal: Principal | None, document: DocumentAccess, mode: AccessMode) -> bool:
    """The visibility rule (module docstring). Pure; the engines' filters say the same."""
    if mode is AccessMode.OFF:
        return True
    if document.public:
        return True
    if principal is None or not document.tenant or document.tenant != principal.tenant:
        return False
    if not document.allowed_groups:
        return True
    return not document.allowed_groups.isdisjoint(principal.groups)


@dataclass(frozen=True, slots=True)
class AccessScope:
    """What one search may see: the mode in force and the principal asking. This is what
    travels on a search request; engines turn it into their own filter."""

    mode: AccessMode = AccessMode.OFF
    principal: Principal | None = None

    @property
    def enforced(self) -> bool:
        return self.mode is AccessMode.ENFORCED

    def allows(self, document: DocumentAccess) -> bool:
        return can_see(self.principal, document, self.mode)

    def describe(self) -> str:
        """The filter in force, engine-neutral, for traces and the audit record."""
        if not self.enforced:
            return "off"
        if self.principal is None:
            return "public"
        tenant = _quoted(self.principal.tenant)
        if not self.principal.groups:
            return f"public or (tenant == {tenant} and allowed_groups == [])"
        groups = ", ".join(_quoted(g) for g in self.principal.sorted_groups)
        return (
            f"public or (tenant == {tenant} and "
            f"(allowed_groups == [] or allowed_groups overlaps [{groups}]))"
        )


UNRESTRICTED = AccessScope()


def _quoted(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def storage_key(tenant: str, key: str) -> str:
    """The store's primary key for ``key`` (an evidence key or doc id) of ``tenant``.

    Two tenants may hold the same doc paths, so the stored key carries the tenant; the
    agent-facing ``document_id`` does not (a principal sees one tenant). Without a
    tenant the key is unchanged (collections written before access control). A tenant
    key starts with a tab, which no doc id can (no leading whitespace, no control
    characters), followed by the tenant, a tab and the key: unambiguous both ways.
    """
    return key if not tenant else f"\t{tenant}\t{key}"


def split_storage_key(stored: str) -> tuple[str, str]:
    """(tenant, key) of a ``storage_key``."""
    if not stored.startswith("\t"):
        return "", stored
    tenant, sep, key = stored[1:].partition("\t")
    if not sep:
        raise ValueError(f"not a storage key: {stored!r}")
    return tenant, key
