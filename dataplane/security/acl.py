"""Kafka's ACL model: resource types, pattern types, operations, permissions.

Numbers are Kafka's own (``AclOperation``/``ResourceType`` codes on the wire),
so the broker's CreateAcls/DescribeAcls and the control plane share one enum.
"""

from __future__ import annotations

import ipaddress
import re
from enum import IntEnum

CLUSTER_RESOURCE_NAME = "kafka-cluster"
WILDCARD = "*"
_PRINCIPAL = re.compile(r"^[A-Za-z][A-Za-z0-9]*:[^\r\n]+\Z")


class ResourceType(IntEnum):
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    # Sluice's own, never on the Kafka wire (whose resource type is an INT8 Kafka numbers up to 7): a Schema
    # Registry subject, authorized by the control plane's registry with the same rules (Confluent's
    # SUBJECT_READ/WRITE/DELETE and SUBJECT_COMPATIBILITY_READ/WRITE as READ, WRITE, DELETE, DESCRIBE_CONFIGS,
    # ALTER_CONFIGS).
    SUBJECT = 100


# What brokers store and enforce; the rest is enforced by the control plane.
KAFKA_RESOURCE_TYPES = frozenset({ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER,
                                  ResourceType.TRANSACTIONAL_ID})


class PatternType(IntEnum):
    LITERAL = 3
    PREFIXED = 4


class AclOperation(IntEnum):
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12


class AclPermission(IntEnum):
    DENY = 2
    ALLOW = 3


_O = AclOperation
VALID_OPERATIONS: dict[ResourceType, frozenset[AclOperation]] = {
    ResourceType.TOPIC: frozenset({_O.ALL, _O.READ, _O.WRITE, _O.CREATE, _O.DELETE, _O.ALTER, _O.DESCRIBE,
                                   _O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS}),
    ResourceType.GROUP: frozenset({_O.ALL, _O.READ, _O.DESCRIBE, _O.DELETE}),
    ResourceType.CLUSTER: frozenset({_O.ALL, _O.CREATE, _O.CLUSTER_ACTION, _O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS,
                                     _O.IDEMPOTENT_WRITE, _O.ALTER, _O.DESCRIBE}),
    ResourceType.TRANSACTIONAL_ID: frozenset({_O.ALL, _O.DESCRIBE, _O.WRITE}),
    ResourceType.SUBJECT: frozenset({_O.ALL, _O.READ, _O.WRITE, _O.DELETE, _O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS}),
}


class InvalidAcl(ValueError):
    """An ACL binding Kafka would refuse (INVALID_REQUEST), naming the field."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


def validate_binding(*, principal: str, resource_type: ResourceType, pattern_type: PatternType,
                     resource_name: str, operation: AclOperation, host: str) -> None:
    if not _PRINCIPAL.match(principal):
        raise InvalidAcl("principal", f"Principal '{principal}' must look like 'User:<name>'.")
    if operation not in VALID_OPERATIONS[resource_type]:
        allowed = ", ".join(sorted(op.name for op in VALID_OPERATIONS[resource_type]))
        raise InvalidAcl("operation",
                         f"Operation {operation.name} does not apply to {resource_type.name}; use one of {allowed}.")
    if not resource_name:
        raise InvalidAcl("resource_name", "Resource name must not be empty.")
    if resource_type is ResourceType.CLUSTER and resource_name != CLUSTER_RESOURCE_NAME:
        raise InvalidAcl("resource_name", f"A CLUSTER resource is always named '{CLUSTER_RESOURCE_NAME}'.")
    if pattern_type is PatternType.PREFIXED and resource_name == WILDCARD:
        raise InvalidAcl("resource_name", "A PREFIXED pattern cannot be '*'; use LITERAL '*' to match all.")
    if host != WILDCARD:
        try:
            ipaddress.ip_address(host)
        except ValueError:
            raise InvalidAcl("host", f"Host '{host}' must be '*' or an IP address.") from None
