"""Which subjects a caller may read, write, delete and configure: tenant roles, and for service accounts ACLs.

Two gates compose, as on the Kafka path (:mod:`controlplane.resources.permissions`): the caller's tenant role
decides what kind of act it may attempt at all (viewer reads, member registers and soft-deletes, admin
configures and hard-deletes); a service account's key must also hold an ACL on the subject (resource type
SUBJECT, LITERAL or PREFIXED, with the brokers' decision rules), as a service account on Confluent Cloud needs a
role binding on the subject. People act with their role alone, as they do in the console.

Confluent's operations map onto ACL operations: SUBJECT_READ → READ (versions, lookups, compatibility tests,
schemas by id through any subject that uses them), SUBJECT_WRITE → WRITE, SUBJECT_DELETE → DELETE,
SUBJECT_COMPATIBILITY_READ/WRITE → DESCRIBE_CONFIGS/ALTER_CONFIGS (config and mode). The registry-wide config and
mode are the subject ``*``: only a binding for every subject (LITERAL ``*``) covers them.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass

from controlplane.clusters.models import Cluster
from controlplane.resources.models import AclBinding as AclRow
from controlplane.tenancy.models import Membership, ServiceAccount
from dataplane.security.acl import WILDCARD, AclOperation, AclPermission, PatternType, ResourceType
from dataplane.security.authorizer import AclBinding, Authorizer

ANY_HOST = "*"
GLOBAL = WILDCARD  # the subject name the registry-wide config and mode are authorized as


@dataclass(frozen=True, slots=True)
class SubjectAcls:
    """A service account's subject bindings in one cluster, as the brokers' authorizer decides them."""

    principal: str
    authorizer: Authorizer

    def allows(self, operation: AclOperation, subject: str) -> bool:
        return self.authorizer.authorize(self.principal, ANY_HOST, operation, ResourceType.SUBJECT, subject)

    def allows_any(self, operation: AclOperation, subjects: Iterable[str]) -> bool:
        return any(self.allows(operation, subject) for subject in subjects)


def subject_acls(cluster: Cluster, principal: str) -> SubjectAcls:
    """The cluster's SUBJECT bindings that can apply to ``principal`` (its own and ``User:*``)."""
    rows = AclRow.objects.filter(cluster=cluster, resource_type=ResourceType.SUBJECT.name,
                                 principal__in=(principal, "User:*"))
    bindings = (AclBinding(ResourceType.SUBJECT, row.resource_name, PatternType[row.pattern_type], row.principal,
                           row.host, AclOperation[row.operation], AclPermission[row.permission]) for row in rows)
    return SubjectAcls(principal, Authorizer(bindings))


def principal_may_read(cluster: Cluster, principal: str, subject: str) -> bool:
    """Whether ``principal`` (``User:u-…`` or ``User:sa-…``, as a report's owner is recorded) may read ``subject``
    in ``cluster``'s registry now, by the rules the registry's own API applies to that identity: a person by
    being a member of the cluster's tenant, a service account by still existing there and holding READ on the
    subject. Anything else (the system, a removed account) may not."""
    kind, _, ident = principal.removeprefix("User:").partition("-")
    if not ident:
        return False
    if kind == "sa":
        account = _uuid(ident)
        if account is None or not ServiceAccount.objects.filter(pk=account, tenant_id=cluster.tenant_id).exists():
            return False
        return subject_acls(cluster, principal).allows(AclOperation.READ, subject)
    if kind == "u":
        return ident.isdigit() and Membership.objects.filter(tenant_id=cluster.tenant_id, user_id=int(ident)).exists()
    return False


def _uuid(text: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(text)
    except ValueError:
        return None


def denied_message(principal: str, operation: AclOperation, subject: str) -> str:
    target = "the registry's global config and mode" if subject == GLOBAL else f"subject '{subject}'"
    return (f"User {principal} is denied operation {operation.name} on {target}: a service account needs an ACL "
            f"(resource type SUBJECT) allowing it; an admin can grant it on the cluster's ACLs.")
