"""Who calls a registry and with which role: the cluster's tenant's API keys, as HTTP Basic ``key:secret``.

A key reaches only its tenant's clusters, and a key bound to one cluster only that one; any other cluster id is
a 404 exactly like one that does not exist, so the base path gives no hint of another tenant's registry.
Viewer reads, member registers, soft-deletes and tests compatibility, admin changes config and mode and
hard-deletes (the roles of the management API); a service account's key also needs ACLs on the subjects it
touches (:mod:`controlplane.registry.permissions`).
"""

from __future__ import annotations

from dataclasses import dataclass

from rest_framework import exceptions

from controlplane.clusters.models import Cluster
from controlplane.core.actors import Actor, kafka_principal
from controlplane.registry.errors import FORBIDDEN, NOT_FOUND, UNAUTHORIZED, RegistryError
from controlplane.registry.permissions import SubjectAcls, denied_message, subject_acls
from controlplane.tenancy.authentication import ServiceAccountIdentity, caller_of_header
from controlplane.tenancy.selectors import actor_for, caller_role
from controlplane.tenancy.services import role_at_least
from dataplane.security.acl import AclOperation


@dataclass(frozen=True, slots=True)
class RegistryAccess:
    """The cluster whose registry the caller reaches, the caller's tenant role and its audit identity; for a
    service account, its subject ACLs (``None``: a person, whose role alone decides)."""

    cluster: Cluster
    role: str
    actor: Actor
    acls: SubjectAcls | None = None

    def require(self, role: str) -> None:
        if not role_at_least(self.role, role):
            raise RegistryError(FORBIDDEN, f"This needs the '{role}' role in the cluster's tenant; you have "
                                           f"'{self.role}'.")

    def may(self, operation: AclOperation, subject: str) -> bool:
        return self.acls is None or self.acls.allows(operation, subject)

    def may_any(self, operation: AclOperation, subjects: list[str]) -> bool:
        return self.acls is None or self.acls.allows_any(operation, subjects)

    def require_subject(self, operation: AclOperation, subject: str) -> None:
        """40301 unless the caller's ACLs allow ``operation`` on ``subject`` (people: always)."""
        if self.acls is not None and not self.acls.allows(operation, subject):
            raise RegistryError(FORBIDDEN, denied_message(self.acls.principal, operation, subject))


def registry_access(authorization: str, kafka_cluster_id: str) -> RegistryAccess:
    """Authenticate ``authorization`` (Basic or Bearer key:secret) and resolve the cluster; 40101 or 404."""
    if not authorization:
        raise RegistryError(UNAUTHORIZED, "Unauthorized: send an API key as HTTP Basic key:secret.")
    try:
        user, api_key = caller_of_header(authorization)
    except exceptions.AuthenticationFailed as exc:
        raise RegistryError(UNAUTHORIZED, str(exc.detail)) from exc
    missing = RegistryError(NOT_FOUND, "HTTP 404 Not Found")
    if api_key.cluster is not None and api_key.cluster.kafka_cluster_id != kafka_cluster_id:
        raise missing
    cluster = (Cluster.objects.select_related("tenant")
               .filter(kafka_cluster_id=kafka_cluster_id, tenant_id=api_key.tenant_id,
                       deletion_requested_at__isnull=True).first())
    if cluster is None:
        raise missing
    role = caller_role(tenant=cluster.tenant, user=user, api_key=api_key)
    if role is None:
        raise missing
    acls = None
    if isinstance(user, ServiceAccountIdentity):
        acls = subject_acls(cluster, kafka_principal("service_account", user.service_account.id))
    return RegistryAccess(cluster, role, actor_for(user), acls)
