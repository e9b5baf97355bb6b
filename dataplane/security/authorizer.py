"""Kafka's ACL authorizer (``StandardAuthorizer``'s rules), pure: a decision is a function of the bindings.

Rules, in the order they apply:

* a super user is allowed everything;
* the ACLs that *match* a request are those whose principal is the caller's or
  ``User:*``, whose host is the caller's or ``*``, and whose pattern matches the
  resource: LITERAL by equal name, LITERAL ``*`` any name, PREFIXED by prefix;
* a matching DENY for the operation (or ALL) denies, whatever allows it;
* a matching ALLOW for the operation, ALL, or an operation that implies it
  allows: READ, WRITE, DELETE and ALTER imply DESCRIBE; ALTER_CONFIGS implies
  DESCRIBE_CONFIGS (implication applies to ALLOW only, as in Kafka);
* otherwise deny (``allow.everyone.if.no.acl.found=false``).

Bindings are indexed by (resource type, name) for literals and by prefix
length for prefixed ones, so a decision looks at the ACLs that can match the
resource and never at the others. An ``Authorizer`` is immutable: the broker
builds a new one when the ACLs change and swaps the reference, so readers on
the event loop never see a half-applied change.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from dataplane.security.acl import (
    VALID_OPERATIONS,
    WILDCARD,
    AclOperation,
    AclPermission,
    PatternType,
    ResourceType,
)

WILDCARD_PRINCIPAL = "User:*"

_O = AclOperation
# The operations an ALLOW of each operation also grants (Kafka's AclEntry.supportedOperations' implications).
IMPLIED: dict[AclOperation, frozenset[AclOperation]] = {
    _O.READ: frozenset({_O.DESCRIBE}),
    _O.WRITE: frozenset({_O.DESCRIBE}),
    _O.DELETE: frozenset({_O.DESCRIBE}),
    _O.ALTER: frozenset({_O.DESCRIBE}),
    _O.ALTER_CONFIGS: frozenset({_O.DESCRIBE_CONFIGS}),
}
# For each requested operation, the ALLOW operations that grant it.
_GRANTED_BY: dict[AclOperation, frozenset[AclOperation]] = {
    op: frozenset({op, _O.ALL} | {granting for granting, implied in IMPLIED.items() if op in implied})
    for op in AclOperation
}


@dataclass(frozen=True, slots=True)
class AclBinding:
    """One ACL: who (principal, host) may or may not do what (operation) to which resources (pattern)."""

    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: AclOperation
    permission: AclPermission


@dataclass(frozen=True, slots=True)
class _Entry:
    """What the index keeps per binding: the fields a decision compares."""

    principal: str
    host: str
    operation: AclOperation
    deny: bool


class _TypeIndex:
    __slots__ = ("literal", "prefix_lengths", "prefixed")

    def __init__(self) -> None:
        self.literal: dict[str, list[_Entry]] = {}
        self.prefixed: dict[str, list[_Entry]] = {}
        self.prefix_lengths: list[int] = []


class Authorizer:
    """An immutable snapshot of a cluster's ACLs and super users, answering ``authorize``.

    Built by the broker whenever the ACLs change (on its event loop) and read there.
    """

    def __init__(self, bindings: Iterable[AclBinding], super_users: Iterable[str] = ()) -> None:
        self.super_users = frozenset(super_users)
        self.bindings = tuple(dict.fromkeys(bindings))
        self._index: dict[ResourceType, _TypeIndex] = {t: _TypeIndex() for t in ResourceType}
        for b in self.bindings:
            entry = _Entry(b.principal, b.host, b.operation, b.permission is AclPermission.DENY)
            index = self._index[b.resource_type]
            table = index.prefixed if b.pattern_type is PatternType.PREFIXED else index.literal
            table.setdefault(b.resource_name, []).append(entry)
        for index in self._index.values():
            index.prefix_lengths = sorted({len(p) for p in index.prefixed})

    def __len__(self) -> int:
        return len(self.bindings)

    def _matching(self, resource_type: ResourceType, name: str) -> list[list[_Entry]]:
        """The entry lists whose pattern matches ``name``: literal, literal ``*``, each matching prefix."""
        index = self._index[resource_type]
        found = []
        literal = index.literal.get(name)
        if literal:
            found.append(literal)
        if name != WILDCARD:
            wildcard = index.literal.get(WILDCARD)
            if wildcard:
                found.append(wildcard)
        for length in index.prefix_lengths:
            if length > len(name):
                break
            prefixed = index.prefixed.get(name[:length])
            if prefixed:
                found.append(prefixed)
        return found

    def authorize(self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType,
                  name: str) -> bool:
        if principal in self.super_users:
            return True
        granting = _GRANTED_BY[operation]
        allowed = False
        for entries in self._matching(resource_type, name):
            for e in entries:
                if (e.principal != principal and e.principal != WILDCARD_PRINCIPAL) or \
                        (e.host != host and e.host != WILDCARD):
                    continue
                if e.deny:
                    if e.operation is operation or e.operation is _O.ALL:
                        return False
                elif e.operation in granting:
                    allowed = True
        return allowed

    def authorized_operations(self, principal: str, host: str, resource_type: ResourceType, name: str) -> int:
        """KIP-430's bit field: bit ``op`` set for every operation of the resource type this caller may do."""
        bits = 0
        for op in VALID_OPERATIONS[resource_type]:
            if op is not _O.ALL and self.authorize(principal, host, op, resource_type, name):
                bits |= 1 << op
        return bits

    def authorize_any(self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType) -> bool:
        """Whether some resource of the type may be operated on (Kafka's ``authorizeByResourceType``, KIP-679).

        True when an ALLOW for the operation matches some name that no DENY covers:
        a LITERAL ``*`` DENY covers every name, a PREFIXED DENY every name (or
        prefix) starting with it, a LITERAL DENY its own name.
        """
        if principal in self.super_users:
            return True
        index = self._index[resource_type]
        granting = _GRANTED_BY[operation]

        def applies(e: _Entry) -> bool:
            return (e.principal in (principal, WILDCARD_PRINCIPAL)) and (e.host in (host, WILDCARD))

        denied_literals = {name for name, entries in index.literal.items()
                           if any(e.deny and applies(e) and e.operation in (operation, _O.ALL) for e in entries)}
        if WILDCARD in denied_literals:
            return False
        denied_prefixes = [name for name, entries in index.prefixed.items()
                           if any(e.deny and applies(e) and e.operation in (operation, _O.ALL) for e in entries)]
        for prefixed, table in ((False, index.literal), (True, index.prefixed)):
            for name, entries in table.items():
                if not any(not e.deny and applies(e) and e.operation in granting for e in entries):
                    continue
                if any(name.startswith(p) for p in denied_prefixes):
                    continue
                if not prefixed and name in denied_literals:
                    continue
                return True
        return False
