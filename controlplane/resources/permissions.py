"""What the caller may do with one topic, so the console can hide or disable what would be refused.

Two gates compose on a data path (REST produce, the WebSocket tail): the caller's tenant role (checked by the
control plane) and the cluster's ACLs for the caller's Kafka principal (checked by the brokers). Management
actions (delete, edit configs) are decided by the role alone: the control plane carries them out with its own
access. The ACLs consulted here are the control plane's desired bindings (what reconcile writes to the
brokers), with the same decision rules as the brokers' authorizer (:class:`dataplane.security.authorizer.
Authorizer`), so an ACL just created counts a moment before the brokers enforce it.
"""

from __future__ import annotations

from dataclasses import dataclass

from controlplane.clusters.models import Cluster
from controlplane.resources.acls import desired_acls
from controlplane.tenancy.models import Role
from controlplane.tenancy.services import role_at_least
from dataplane.client.admin import AclSpec
from dataplane.security.acl import AclOperation, AclPermission, PatternType, ResourceType
from dataplane.security.authorizer import AclBinding, Authorizer

# The host the decision is made for: bindings for every host ("*") apply; host-specific ones are not assumed
# to match the control plane's address.
ANY_HOST = "*"


@dataclass(frozen=True, slots=True)
class Permission:
    allowed: bool
    reason: str  # why not, in words (empty when allowed)


@dataclass(frozen=True, slots=True)
class TopicPermissions:
    role: str
    principal: str
    produce: Permission
    read: Permission
    edit_configs: Permission
    delete: Permission


def _binding(spec: AclSpec) -> AclBinding:
    return AclBinding(ResourceType[spec.resource_type], spec.resource_name, PatternType[spec.pattern_type],
                      spec.principal, spec.host, AclOperation[spec.operation], AclPermission[spec.permission])


def cluster_authorizer(cluster: Cluster) -> Authorizer:
    """The cluster's desired ACLs (bound ones and those derived from tenant roles) as an authorizer."""
    return Authorizer(_binding(spec) for spec in desired_acls(cluster).all)


def _by_role(role: str, needed: str, action: str) -> Permission:
    if role_at_least(role, needed):
        return Permission(True, "")
    return Permission(False, f"{action} needs the '{needed}' role in this tenant; you have '{role}'.")


def _by_acl(authorizer: Authorizer, principal: str, operation: AclOperation, topic: str, action: str) -> Permission:
    if authorizer.authorize(principal, ANY_HOST, operation, ResourceType.TOPIC, topic):
        return Permission(True, "")
    return Permission(False, f"{action} needs an ACL allowing {operation.name} on topic '{topic}' for your "
                             f"principal {principal}; an admin can grant it on the cluster's ACLs page.")


def topic_permissions(*, cluster: Cluster, topic: str, role: str, principal: str | None) -> TopicPermissions:
    """The caller's rights on ``topic``: each action allowed, or the reason it is not."""
    authorizer = cluster_authorizer(cluster)

    def data_path(needed: str, operation: AclOperation, action: str) -> Permission:
        by_role = _by_role(role, needed, action)
        if not by_role.allowed:
            return by_role
        if not principal:
            return Permission(False, f"{action} needs a caller with a Kafka principal.")
        return _by_acl(authorizer, principal, operation, topic, action)

    return TopicPermissions(
        role=role, principal=principal or "",
        produce=data_path(Role.MEMBER, AclOperation.WRITE, "Producing"),
        read=data_path(Role.VIEWER, AclOperation.READ, "Reading records"),
        edit_configs=_by_role(role, Role.MEMBER, "Editing configs"),
        delete=_by_role(role, Role.MEMBER, "Deleting the topic"),
    )
