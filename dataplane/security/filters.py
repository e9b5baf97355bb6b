"""Kafka's ACL binding filters (DescribeAcls, DeleteAcls): which stored bindings a filter selects.

Wire numbers are Kafka's: ``ANY`` (1) in a resource type, pattern type,
operation or permission matches every value; pattern type ``MATCH`` (2) selects
the bindings that would apply to the named resource (its LITERAL name, LITERAL
``*`` and every PREFIXED pattern it starts with); a null name, principal or
host matches any. ``UNKNOWN`` (0) is never valid in a request.
"""

from __future__ import annotations

from dataclasses import dataclass

from dataplane.security.acl import (
    KAFKA_RESOURCE_TYPES,
    WILDCARD,
    AclOperation,
    AclPermission,
    PatternType,
)
from dataplane.security.authorizer import AclBinding

UNKNOWN, ANY, MATCH = 0, 1, 2


class InvalidFilter(ValueError):
    """A filter Kafka refuses (INVALID_REQUEST)."""


@dataclass(frozen=True, slots=True)
class AclFilter:
    resource_type: int  # ResourceType or ANY
    resource_name: str | None
    pattern_type: int  # PatternType, ANY or MATCH
    principal: str | None
    host: str | None
    operation: int  # AclOperation or ANY
    permission: int  # AclPermission or ANY

    @classmethod
    def checked(cls, resource_type: int, resource_name: str | None, pattern_type: int, principal: str | None,
                host: str | None, operation: int, permission: int) -> AclFilter:
        """A filter from wire values; raises InvalidFilter for unknown numbers."""
        if resource_type != ANY and resource_type not in KAFKA_RESOURCE_TYPES:
            raise InvalidFilter(f"Unknown resource type {resource_type}.")
        if pattern_type not in (ANY, MATCH) and pattern_type not in PatternType.__members__.values():
            raise InvalidFilter(f"Unknown pattern type {pattern_type}.")
        if operation != ANY and operation not in AclOperation.__members__.values():
            raise InvalidFilter(f"Unknown operation {operation}.")
        if permission != ANY and permission not in AclPermission.__members__.values():
            raise InvalidFilter(f"Unknown permission type {permission}.")
        return cls(resource_type, resource_name, pattern_type, principal, host, operation, permission)

    def matches(self, b: AclBinding) -> bool:
        return (self.resource_type in (ANY, b.resource_type)
                and self._pattern_matches(b)
                and (self.principal is None or self.principal == b.principal)
                and (self.host is None or self.host == b.host)
                and self.operation in (ANY, b.operation)
                and self.permission in (ANY, b.permission))

    def _pattern_matches(self, b: AclBinding) -> bool:
        if self.pattern_type == MATCH:
            name = self.resource_name
            if name is None:
                return True
            if b.pattern_type is PatternType.PREFIXED:
                return name.startswith(b.resource_name)
            return b.resource_name in (name, WILDCARD)
        if self.pattern_type not in (ANY, b.pattern_type):
            return False
        return self.resource_name is None or self.resource_name == b.resource_name
