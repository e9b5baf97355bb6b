"""KIP-430's authorized operations: the bit field Metadata, DescribeCluster, DescribeGroups and
DescribeTopicPartitions report when a client asks.

With the authorizer on, ``server.access.Access`` reports its decisions for the
caller; with it off, every operation that applies to a resource type (what these
give), which is what Kafka reports without an authorizer too. ALL is a wildcard
for ACLs, never an authorized operation.
"""

from __future__ import annotations

from functools import cache, reduce

from dataplane.security.acl import VALID_OPERATIONS, AclOperation, ResourceType

NOT_REQUESTED = -(2**31)  # Kafka's "authorized operations were not asked for"


@cache
def all_operations(resource_type: ResourceType) -> int:
    return reduce(lambda bits, op: bits | (1 << op), VALID_OPERATIONS[resource_type] - {AclOperation.ALL}, 0)


def authorized_operations(resource_type: ResourceType, requested: bool) -> int:
    return all_operations(resource_type) if requested else NOT_REQUESTED
