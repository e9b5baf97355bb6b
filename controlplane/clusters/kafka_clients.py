"""Every Kafka admin client the control plane opens on a managed cluster: as its internal user, or as a caller.

As the internal user (``User:__sluice``, a super user): reconcile, observability, rebalances, throughput. As a
caller (``as_principal``: OAUTHBEARER tokens for the caller's principal, so the cluster's ACLs decide exactly as
for the caller's own Kafka clients): the REST Proxy, the tail, reports. Both take their librdkafka settings from
``credentials.client_config``, the one place those are made.

``AdminPool`` keeps long-lived clients for request paths that would otherwise pay a connection and a SASL
handshake per request (REST v2 metadata); a one-off job opens a client with ``with admin_as_…(…) as admin``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Mapping
from typing import Any

from controlplane.clusters.credentials import client_config
from controlplane.clusters.models import Cluster
from controlplane.clusters.principals import as_principal
from dataplane.client.admin import ClusterAdmin

DEFAULT_TIMEOUT = 10.0


def admin_for_config(config: Mapping[str, Any], *, timeout: float = DEFAULT_TIMEOUT) -> ClusterAdmin:
    """An admin client with these librdkafka settings (their ``bootstrap.servers`` names the brokers)."""
    return ClusterAdmin(str(config["bootstrap.servers"]), timeout=timeout, config=config)


def admin_as_internal(cluster: Cluster, *, bootstrap: str | None = None,
                      timeout: float = DEFAULT_TIMEOUT) -> ClusterAdmin:
    """An admin client of ``cluster`` as its internal super user (``bootstrap`` when the caller has the list)."""
    return admin_for_config(client_config(cluster, bootstrap=bootstrap), timeout=timeout)


def config_as_caller(cluster: Cluster, principal: str, *, bootstrap: str | None = None) -> dict[str, Any]:
    """librdkafka settings that reach ``cluster`` as ``principal`` (a SASL cluster: OAUTHBEARER tokens)."""
    return as_principal(client_config(cluster, bootstrap=bootstrap), kafka_cluster_id=cluster.kafka_cluster_id,
                        principal=principal)


def admin_as_caller(cluster: Cluster, principal: str, *, timeout: float = DEFAULT_TIMEOUT) -> ClusterAdmin:
    """An admin client of ``cluster`` as ``principal``: what it may see and change is what its ACLs allow."""
    return admin_for_config(config_as_caller(cluster, principal), timeout=timeout)


class AdminPool:
    """Long-lived admin clients, one per key (the caller's identity and the cluster's settings).

    Owned by the process (one pool per use); safe to share between threads: a client is made once per key under
    the lock, and ``ClusterAdmin`` itself may be called from several threads. ``discard`` drops a client whose
    key went stale (a revoked key, a moved broker); ``close`` ends them all (shutdown, tests).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._admins: dict[Hashable, ClusterAdmin] = {}

    def get(self, key: Hashable, make: Callable[[], ClusterAdmin]) -> ClusterAdmin:
        with self._lock:
            admin = self._admins.get(key)
            if admin is None:
                admin = self._admins[key] = make()
            return admin

    def discard(self, key: Hashable) -> None:
        with self._lock:
            admin = self._admins.pop(key, None)
        if admin is not None:
            admin.close()

    def close(self) -> None:
        with self._lock:
            admins, self._admins = list(self._admins.values()), {}
        for admin in admins:
            admin.close()
