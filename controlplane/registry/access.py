"""Who calls a registry and with which role: the cluster's tenant's API keys, as HTTP Basic ``key:secret``, or
the console's signed-in user by the session cookie (then with Django's CSRF check on unsafe methods, exactly as
the management API's session callers get it from DRF).

A key reaches only its tenant's clusters, and a key bound to one cluster only that one; any other cluster id is
a 404 exactly like one that does not exist, so the base path gives no hint of another tenant's registry.
Viewer reads, member registers, soft-deletes and tests compatibility, admin changes config and mode and
hard-deletes (the roles of the management API); a service account's key also needs ACLs on the subjects it
touches (:mod:`controlplane.registry.permissions`).

A key reaches only its tenant's clusters, and a key bound to one cluster only that one; any other cluster id is
a 404 exactly like one that does not exist, so the base path gives no hint of another tenant's registry.
Viewer reads, member registers, soft-deletes and tests compatibility, admin changes config and mode and
hard-deletes (the roles of the management API); a service account's key also needs ACLs on the subjects it
touches (:mod:`controlplane.registry.permissions`)."""

from __future__ import annotations

import hashlib
import threading
import time
from dataclasses import dataclass
from typing import Any

from django.http import HttpRequest
from rest_framework import exceptions
from rest_framework.authentication import CSRFCheck

from controlplane.clusters.models import Cluster
from controlplane.core.actors import Actor, kafka_principal
from controlplane.registry.errors import FORBIDDEN, NOT_FOUND, UNAUTHORIZED, RegistryError
from controlplane.registry.permissions import SubjectAcls, denied_message, subject_acls
from controlplane.tenancy.authentication import ServiceAccountIdentity, caller_of_header, on_forget
from controlplane.tenancy.models import ApiKey
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


def request_access(request: HttpRequest, kafka_cluster_id: str) -> RegistryAccess:
    """The caller of ``request``: an API key in ``Authorization`` (Basic or Bearer key:secret; remembered, see
    :func:`registry_access`), else the session's user; 40101 for neither, 40301 for a session write without its
    CSRF token, 404 for a cluster not theirs."""
    authorization = request.headers.get("Authorization", "")
    if authorization:
        return registry_access(authorization, kafka_cluster_id)
    user = getattr(request, "user", None)
    if user is not None and user.is_authenticated:
        _enforce_csrf(request)
        return _access(kafka_cluster_id, user, None, tenant_id=None)
    raise RegistryError(UNAUTHORIZED, "Unauthorized: send an API key as HTTP Basic key:secret.")


def resolve_access(authorization: str, kafka_cluster_id: str) -> RegistryAccess:
    """Authenticate ``authorization`` (Basic or Bearer key:secret) and resolve the cluster; 40101 or 404."""
    if not authorization:
        raise RegistryError(UNAUTHORIZED, "Unauthorized: send an API key as HTTP Basic key:secret.")
    try:
        user, api_key = caller_of_header(authorization)
    except exceptions.AuthenticationFailed as exc:
        raise RegistryError(UNAUTHORIZED, str(exc.detail)) from exc
    if api_key.cluster is not None and api_key.cluster.kafka_cluster_id != kafka_cluster_id:
        raise _missing()
    return _access(kafka_cluster_id, user, api_key, tenant_id=api_key.tenant_id)


def _enforce_csrf(request: HttpRequest) -> None:
    """DRF's SessionAuthentication check (Django's CsrfViewMiddleware, run here because the views are exempt so
    that key callers never need a token); safe methods pass."""
    check = CSRFCheck(lambda _request: None)  # type: ignore[arg-type]
    check.process_request(request)
    reason = check.process_view(request, None, (), {})  # type: ignore[arg-type]
    if reason:
        raise RegistryError(FORBIDDEN, f"CSRF Failed: {reason}")


def _missing() -> RegistryError:
    return RegistryError(NOT_FOUND, "HTTP 404 Not Found")


def _access(kafka_cluster_id: str, user: Any, api_key: ApiKey | None, *, tenant_id: Any) -> RegistryAccess:
    """The live cluster and the caller's role in its tenant; a cluster the caller has no role at is a 404."""
    clusters = Cluster.objects.select_related("tenant").filter(kafka_cluster_id=kafka_cluster_id,
                                                               deletion_requested_at__isnull=True)
    if tenant_id is not None:
        clusters = clusters.filter(tenant_id=tenant_id)
    cluster = clusters.first()
    if cluster is None:
        raise _missing()
    role = caller_role(tenant=cluster.tenant, user=user, api_key=api_key)
    if role is None:
        raise _missing()
    acls = None
    if isinstance(user, ServiceAccountIdentity):
        acls = subject_acls(cluster, kafka_principal("service_account", user.service_account.id))
    return RegistryAccess(cluster, role, actor_for(user), acls)
