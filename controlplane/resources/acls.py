"""A cluster's desired ACLs: the bindings made through the API and those its tenant roles imply.

Read by the reconcile's ACL step (what to write to the brokers) and by the console's permission checks
(:mod:`controlplane.resources.permissions`), so an ACL just created counts a moment before the brokers enforce it.
"""

from __future__ import annotations

from dataclasses import dataclass

from controlplane.clusters.models import Cluster
from controlplane.core.actors import kafka_principal
from controlplane.resources.models import AclBinding
from controlplane.tenancy.models import Membership, Role
from dataplane.client.admin import AclSpec
from dataplane.security.acl import CLUSTER_RESOURCE_NAME, KAFKA_RESOURCE_TYPES, ResourceType


def desired_acl(row: AclBinding) -> AclSpec:
    return AclSpec(principal=row.principal, host=row.host, resource_type=row.resource_type,
                   resource_name=row.resource_name, pattern_type=row.pattern_type, operation=row.operation,
                   permission=row.permission)


# What a tenant's owners and admins may do on its clusters: everything (they manage the tenant's ACLs anyway).
_ALL_RESOURCES = (("TOPIC", "*"), ("GROUP", "*"), ("TRANSACTIONAL_ID", "*"), ("CLUSTER", CLUSTER_RESOURCE_NAME))
ROLES_WITH_ALL_ACCESS = (Role.OWNER, Role.ADMIN)


def role_acls(cluster: Cluster) -> list[AclSpec]:
    """Bindings derived from tenant roles: each owner's and admin's user principal may do anything.

    How roles compose with ACLs on the Kafka path: a user who is an owner or admin of the tenant gets allow-all
    bindings (so the tenant's first user can produce and consume with a key of their own at once, as on
    Confluent Cloud); members, viewers and every service account get only the ACLs bound to them. Roles still
    decide the management API. Changing a member's role or removing them re-runs this through reconcile.
    """
    users = Membership.objects.filter(tenant_id=cluster.tenant_id, role__in=ROLES_WITH_ALL_ACCESS).values_list(
        "user_id", flat=True)
    return [AclSpec(resource_type=rtype, resource_name=name, pattern_type="LITERAL",
                    principal=kafka_principal("user", uid), host="*", operation="ALL", permission="ALLOW")
            for uid in sorted(users) for rtype, name in _ALL_RESOURCES]


@dataclass(frozen=True, slots=True)
class DesiredAcls:
    bound: tuple[AclSpec, ...]  # the API's bindings
    from_roles: tuple[AclSpec, ...]  # implied by the tenant's owners and admins

    @property
    def all(self) -> list[AclSpec]:
        return sorted(set(self.bound) | set(self.from_roles))

    @property
    def brokers(self) -> list[AclSpec]:
        """What the brokers store and enforce: all but the registry's subject bindings."""
        return [spec for spec in self.all if ResourceType[spec.resource_type] in KAFKA_RESOURCE_TYPES]


def desired_acls(cluster: Cluster) -> DesiredAcls:
    return DesiredAcls(tuple(desired_acl(row) for row in AclBinding.objects.filter(cluster=cluster)),
                       tuple(role_acls(cluster)))
