"""Who calls a registry and with which role: the cluster's tenant's API keys, as HTTP Basic ``key:secret``.

A key reaches only its tenant's clusters, and a key bound to one cluster only that one; any other cluster id is
a 404 exactly like one that does not exist, so the base path gives no hint of another tenant's registry.
Viewer reads, member registers, soft-deletes and tests compatibility, admin changes config and mode and
hard-deletes (the roles of the management API).
"""

from __future__ import annotations

from dataclasses import dataclass

from rest_framework import exceptions

from controlplane.clusters.models import Cluster
from controlplane.core.actors import Actor
from controlplane.registry.errors import FORBIDDEN, NOT_FOUND, UNAUTHORIZED, RegistryError
from controlplane.tenancy.authentication import caller_of_header
from controlplane.tenancy.selectors import actor_for, caller_role
from controlplane.tenancy.services import role_at_least


@dataclass(frozen=True, slots=True)
class RegistryAccess:
    """The cluster whose registry the caller reaches, the caller's tenant role and its audit identity."""

    cluster: Cluster
    role: str
    actor: Actor

    def require(self, role: str) -> None:
        if not role_at_least(self.role, role):
            raise RegistryError(FORBIDDEN, f"This needs the '{role}' role in the cluster's tenant; you have "
                                           f"'{self.role}'.")


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
    return RegistryAccess(cluster, role, actor_for(user))
