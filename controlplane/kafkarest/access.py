"""Who is calling and which cluster they may reach, for every REST Proxy and WebSocket path.

A caller reaches only clusters of tenants it belongs to; any other cluster id is a 404, exactly like
an id that does not exist. Reading (listing, consuming, tailing) needs the viewer role; producing and
changing topics needs member; ACLs need admin, as in the management API.

Data paths reach the cluster as the caller's Kafka principal (``ClusterAccess.client_config``), so the
cluster's ACLs decide for REST and WebSocket callers as for any Kafka client; refusals (a role too low
here, or the cluster's ACLs) are audited with :func:`audit_refusal`.

The DRF views authenticate through the project's authenticators; the raw ASGI produce path and the
WebSocket tail, which run outside DRF, use :func:`caller_for_authorization` (and the tail, for a
console session, :func:`caller_for_user`). Both resolutions are
cached per process for ``CACHE_SECONDS`` so a request costs no database round trip on the hot path;
a revoked key therefore stops working within that time, or at once where a published revocation
(``controlplane.kafkarest.revocation``) clears the caches first.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from rest_framework import exceptions
from rest_framework.request import Request

from controlplane.audit.security import REST_DENIED, WS_DENIED, security_event_record
from controlplane.clusters.credentials import ClientSettings, client_config, frozen
from controlplane.clusters.models import Cluster
from controlplane.clusters.principals import as_principal
from controlplane.core.actors import kafka_principal
from controlplane.kafkarest.errors import FORBIDDEN, NOT_FOUND, UNAUTHORIZED, RestError
from controlplane.tenancy.authentication import ServiceAccountIdentity, caller_of_header, forget_authenticated
from controlplane.tenancy.models import ApiKey, Membership, Role
from controlplane.tenancy.revocation import Credential
from controlplane.tenancy.services import role_at_least

CACHE_SECONDS = 2.0

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Caller:
    """An authenticated identity: the tenants it reaches with the role in each, and its Kafka principal."""

    roles: tuple[tuple[int, str], ...]  # (tenant id, role)
    principal: str
    api_key_id: str | None = None
    cluster_scope: str | None = None  # a key bound to one cluster (kafka cluster id) reaches only that one
    user_id: int | None = None  # a console session's user (api_key_id None): a removed member's tails end

    def role_in(self, tenant_id: int) -> str | None:
        return next((role for tid, role in self.roles if tid == tenant_id), None)


@dataclass(frozen=True, slots=True)
class ClusterAccess:
    """A cluster the caller may use, with what it needs to talk Kafka to it (as the caller's principal)."""

    cluster_pk: Any
    kafka_cluster_id: str
    tenant_id: int
    bootstrap: str
    role: str
    client: ClientSettings = ()  # ``client_config`` of the cluster, frozen: the control plane's own client of it
    principal: str = ""  # the caller's Kafka principal: data paths reach the brokers as it
    # What the caller authenticated with: tails and v2 consumer instances opened with it end when it is revoked.
    credential: Credential | None = None

    def require(self, role: str) -> None:
        if not role_at_least(self.role, role):
            raise RestError(FORBIDDEN, f"This needs the '{role}' role in the cluster's tenant; you have '{self.role}'.")

    def client_config(self) -> dict[str, Any]:
        """librdkafka settings that act on the cluster as the caller's principal (its ACLs decide)."""
        return principal_client_config(self, self.principal)

    @property
    def client_key(self) -> tuple[Any, ...]:
        """What makes two accesses share a Kafka client: the cluster, how it is reached, and the principal."""
        return self.kafka_cluster_id, self.client, self.principal


def principal_client_config(access: ClusterAccess, principal: str) -> dict[str, Any]:
    """The one function REST, WebSocket and (through :func:`controlplane.clusters.principals.spark_options`)
    Spark paths use to get a Kafka client config for (cluster access, principal)."""
    return as_principal(dict(access.client), kafka_cluster_id=access.kafka_cluster_id, principal=principal)


class _TtlCache:
    """A tiny per-process cache; owned by its module, safe across the request threads."""

    def __init__(self, seconds: float, size: int = 4096) -> None:
        self._seconds = seconds
        self._size = size
        self._items: dict[Any, tuple[float, Any]] = {}
        self._lock = threading.Lock()
        self._cleared = 0  # how many times it was cleared: a refresh begun before a clear must not undo it

    def get(self, key: Any, make: Callable[[], T]) -> T:
        now = time.monotonic()
        with self._lock:
            hit = self._items.get(key)
        if hit is not None and hit[0] > now:
            return hit[1]  # type: ignore[no-any-return]
        value = make()
        with self._lock:
            if len(self._items) >= self._size:
                self._items.clear()
            self._items[key] = (now + self._seconds, value)
        return value

    def peek(self, key: Any) -> Any:
        """The fresh cached value, or :data:`MISS` (never makes one: for callers that must not block)."""
        hit = self._items.get(key)  # a dict read is atomic: no lock
        return hit[1] if hit is not None and hit[0] > time.monotonic() else MISS

    def expires(self, key: Any) -> float:
        """When the entry expires (``time.monotonic()``), 0 when there is none."""
        hit = self._items.get(key)
        return hit[0] if hit is not None else 0.0

    def refresh(self, key: Any, make: Callable[[], T]) -> T:
        """Make the value again now and remember it, unless the cache was cleared meanwhile (a revocation)."""
        cleared = self._cleared
        value = make()
        with self._lock:
            if self._cleared == cleared:
                self._items[key] = (time.monotonic() + self._seconds, value)
        return value

    def forget(self, key: Any) -> None:
        with self._lock:
            self._items.pop(key, None)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._cleared += 1


MISS: Any = object()


_callers = _TtlCache(CACHE_SECONDS)
_clusters = _TtlCache(CACHE_SECONDS)


def _caller(user: Any, api_key: ApiKey | None) -> Caller:
    if isinstance(user, ServiceAccountIdentity):
        account = user.service_account
        return Caller(((account.tenant_id, str(account.role)),), account.principal,
                      api_key.key_id if api_key else None, _scope(api_key))
    if user is None or not getattr(user, "is_authenticated", False):
        raise RestError(UNAUTHORIZED, "Authentication required: send an API key (HTTP Basic key:secret).")
    memberships = Membership.objects.filter(user=user)
    if api_key is not None:
        memberships = memberships.filter(tenant_id=api_key.tenant_id)
    roles = tuple((int(tid), str(role)) for tid, role in memberships.values_list("tenant_id", "role"))
    return Caller(roles, kafka_principal("user", int(user.pk)), api_key.key_id if api_key else None,
                  _scope(api_key), None if api_key else int(user.pk))


def _scope(api_key: ApiKey | None) -> str | None:
    cluster = getattr(api_key, "cluster", None) if api_key is not None else None
    return cluster.kafka_cluster_id if cluster is not None else None


def caller_for_request(request: Request) -> Caller:
    """The caller of a DRF request (already authenticated by the project's authenticators)."""
    api_key = request.auth if isinstance(request.auth, ApiKey) else None
    if api_key is not None:
        return _callers.get(("key", api_key.pk), lambda: _caller(request.user, api_key))
    return _caller(request.user, None)


def caller_for_authorization(header: str) -> Caller:
    """The caller for an ``Authorization`` header (Basic or Bearer key:secret), outside DRF."""
    if not header:
        raise RestError(UNAUTHORIZED, "Authentication required: send an API key (HTTP Basic key:secret).")
    digest = hashlib.sha256(header.encode()).digest()
    return _callers.get(("header", digest), lambda: _caller_for_header(header))


def cached_cluster_access(header: str, cluster_id: str, role: str) -> ClusterAccess | None:
    """:func:`cluster_access` for an ``Authorization`` header when both caches answer and the role suffices, with
    no database and no thread (the REST produce fast path, on the event loop); None: resolve it the usual way."""
    if not header:
        return None
    caller = _callers.peek(("header", hashlib.sha256(header.encode()).digest()))
    if caller is MISS:
        return None
    access = _clusters.peek(("cluster", caller, cluster_id))
    if access is MISS or access is None or not role_at_least(access.role, role):
        return None
    return access  # type: ignore[no-any-return]


def cached_access_expires(header: str, cluster_id: str) -> float:
    """When what :func:`cached_cluster_access` answers from stops being fresh (the earlier of its two entries)."""
    key = ("header", hashlib.sha256(header.encode()).digest())
    caller = _callers.peek(key)
    if caller is MISS:
        return 0.0
    return min(_callers.expires(key), _clusters.expires(("cluster", caller, cluster_id)))


def refresh_cluster_access(header: str, cluster_id: str) -> None:
    """Resolve the caller and its access to the cluster again and remember them: run ahead of their expiry, so a
    busy key is never resolved by the requests themselves. A caller now refused is forgotten (its next request
    is refused by the usual path). Reads the database: a worker thread."""
    key = ("header", hashlib.sha256(header.encode()).digest())
    try:
        caller = _callers.refresh(key, lambda: _caller_for_header(header))
    except RestError:
        _callers.forget(key)
        return
    _clusters.refresh(("cluster", caller, cluster_id), lambda: _cluster_access(caller, cluster_id))


def caller_for_user(user: Any) -> Caller:
    """The caller for a Django user (a web-console session, as on the WebSocket tail); 401 if anonymous."""
    if user is None or not getattr(user, "is_authenticated", False):
        return _caller(user, None)  # raises UNAUTHORIZED
    return _callers.get(("user", user.pk), lambda: _caller(user, None))


def _caller_for_header(header: str) -> Caller:
    try:
        user, api_key = caller_of_header(header)
    except exceptions.AuthenticationFailed as exc:
        raise RestError(UNAUTHORIZED, str(exc.detail)) from exc
    return _caller(user, api_key)


def cluster_access(caller: Caller, cluster_id: str, *, role: str = Role.VIEWER, surface: str = "rest") -> ClusterAccess:
    """The cluster ``cluster_id`` (its Kafka cluster id) if the caller reaches it with ``role``, else 404/403
    (a 403 is audited; ``surface`` says where: "rest" or "ws")."""
    access = _clusters.get(("cluster", caller, cluster_id), lambda: _cluster_access(caller, cluster_id))
    if access is None:
        raise RestError(NOT_FOUND, f"Cluster {cluster_id} not found.")
    try:
        access.require(role)
    except RestError as refusal:
        audit_refusal(access, refusal, surface=surface)
        raise
    return access


def audit_refusal(access: ClusterAccess, error: RestError, *, surface: str, topic: str = "") -> None:
    """Audit a refused REST or WebSocket call (a tenant role too low, or the cluster's ACLs: 403s only) to the
    cluster's tenant, under the caller's principal; rate-limited by ``security_event_record``."""
    if error.status != FORBIDDEN:
        return
    security_event_record(
        tenant_id=access.tenant_id, action=WS_DENIED if surface == "ws" else REST_DENIED, subject=access.principal,
        subject_type="principal", target_type="topic" if topic else "cluster",
        target_id=f"{access.kafka_cluster_id}/{topic}" if topic else access.kafka_cluster_id,
        data={"error_code": error.error_code, "message": error.message[:500]})


def _cluster_access(caller: Caller, cluster_id: str) -> ClusterAccess | None:
    if caller.cluster_scope is not None and caller.cluster_scope != cluster_id:
        return None
    tenant_ids = [tid for tid, _ in caller.roles]
    cluster = (Cluster.objects.filter(kafka_cluster_id=cluster_id, tenant_id__in=tenant_ids,
                                      deletion_requested_at__isnull=True).first())
    if cluster is None:
        return None
    role = caller.role_in(cluster.tenant_id)
    assert role is not None
    config = client_config(cluster)
    credential = Credential(cluster.tenant_id, caller.api_key_id, caller.user_id)
    return ClusterAccess(cluster.pk, cluster.kafka_cluster_id, cluster.tenant_id, config["bootstrap.servers"], role,
                         frozen(config), caller.principal, credential)


def clear_caches() -> None:
    """Forget cached callers and clusters (tests that revoke a key and expect the next call to see it)."""
    _callers.clear()
    _clusters.clear()
    forget_authenticated()
