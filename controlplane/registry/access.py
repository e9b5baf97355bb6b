"""Who calls a registry and with which role: the cluster's tenant's API keys, as HTTP Basic ``key:secret``.

A key reaches only its tenant's clusters, and a key bound to one cluster only that one; any other cluster id is
a 404 exactly like one that does not exist, so the base path gives no hint of another tenant's registry.
Viewer reads, member registers, soft-deletes and tests compatibility, admin changes config and mode and
hard-deletes (the roles of the management API); a service account's key also needs ACLs on the subjects it
touches (:mod:`controlplane.registry.permissions`).

A granted access is remembered per process for :data:`CACHE_SECONDS`, keyed by the Authorization header's
digest and the cluster id (refusals never are, nor accesses with subject ACLs), so a registry's hot reads cost
no database round trip for the caller: a revoked key, a removed member or a lowered role takes effect within
that time -- at once where the process hears the revocation (``tenancy.authentication.forget_authenticated``
clears this cache too) -- as on the REST Proxy (decision 0031).
"""

from __future__ import annotations

import hashlib
import threading
import time
from dataclasses import dataclass

from rest_framework import exceptions

from controlplane.clusters.models import Cluster
from controlplane.core.actors import Actor, kafka_principal
from controlplane.registry.errors import FORBIDDEN, NOT_FOUND, UNAUTHORIZED, RegistryError
from controlplane.registry.permissions import SubjectAcls, denied_message, subject_acls
from controlplane.tenancy.authentication import ServiceAccountIdentity, caller_of_header, on_forget
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


CACHE_SECONDS = 2.0  # as the REST Proxy's callers and clusters (kafkarest.access.CACHE_SECONDS)
_granted: dict[tuple[bytes, str], tuple[float, RegistryAccess]] = {}
_granted_lock = threading.Lock()


def forget_granted() -> None:
    with _granted_lock:
        _granted.clear()


on_forget(forget_granted)


def _key(authorization: str, kafka_cluster_id: str) -> tuple[bytes, str]:
    return hashlib.sha256(authorization.encode()).digest(), kafka_cluster_id


def cached_access_entry(authorization: str, kafka_cluster_id: str) -> tuple[float, RegistryAccess] | None:
    """(when it expires, the access granted to this header on this cluster) while fresh, or None; no database."""
    if not authorization:
        return None
    hit = _granted.get(_key(authorization, kafka_cluster_id))  # a dict read is atomic: no lock
    return hit if hit is not None and hit[0] > time.monotonic() else None


def cached_registry_access(authorization: str, kafka_cluster_id: str) -> RegistryAccess | None:
    """The access granted to this header on this cluster less than CACHE_SECONDS ago, or None; no database."""
    entry = cached_access_entry(authorization, kafka_cluster_id)
    return entry[1] if entry is not None else None


def registry_access(authorization: str, kafka_cluster_id: str) -> RegistryAccess:
    """:func:`resolve_access`, remembered for CACHE_SECONDS when granted to a caller without subject ACLs (a
    service account's ACLs are read on every request, so a grant or a revocation counts at once)."""
    cached = cached_registry_access(authorization, kafka_cluster_id)
    return cached if cached is not None else refresh_registry_access(authorization, kafka_cluster_id)


def refresh_registry_access(authorization: str, kafka_cluster_id: str) -> RegistryAccess:
    """:func:`resolve_access` now, remembered when granted; a refusal forgets what was remembered."""
    key = _key(authorization, kafka_cluster_id)
    try:
        access = resolve_access(authorization, kafka_cluster_id)
    except RegistryError:
        with _granted_lock:
            _granted.pop(key, None)
        raise
    if access.acls is not None:
        return access
    with _granted_lock:
        if len(_granted) >= 4096:
            _granted.clear()
        _granted[key] = (time.monotonic() + CACHE_SECONDS, access)
    return access


def resolve_access(authorization: str, kafka_cluster_id: str) -> RegistryAccess:
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
