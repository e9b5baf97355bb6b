"""The cluster's admin client for a REST call, with Kafka's errors as the REST Proxy reports them."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from controlplane.clusters.kafka_clients import AdminPool, admin_for_config
from controlplane.kafkarest.access import ClusterAccess
from controlplane.kafkarest.errors import (
    BAD_REQUEST,
    BROKER_NOT_AVAILABLE,
    CONSUMER_GROUP_NOT_FOUND,
    KAFKA_AUTHORIZATION,
    KAFKA_ERROR,
    KAFKA_RETRIABLE,
    TOPIC_NOT_FOUND,
    RestError,
)
from dataplane.client.admin import AdminError, ClusterAdmin

KAFKA_BAD_REQUEST = 40002
ADMIN_TIMEOUT_SECONDS = 10.0
# Long-lived clients for request paths that ask often (v2 metadata): one per caller and cluster settings.
POOL = AdminPool()
_BAD_REQUEST_CODES = {"TOPIC_ALREADY_EXISTS", "INVALID_PARTITIONS", "INVALID_REPLICATION_FACTOR", "INVALID_CONFIG",
                      "INVALID_TOPIC_EXCEPTION", "POLICY_VIOLATION", "INVALID_REQUEST", "INVALID_REPLICA_ASSIGNMENT",
                      "UNKNOWN_TOPIC_ID", "OFFSET_OUT_OF_RANGE"}


def rest_error_for_admin(exc: AdminError) -> RestError:
    if exc.code.endswith("_AUTHORIZATION_FAILED"):  # the caller's principal lacks the ACL (topic, group, cluster)
        return RestError(KAFKA_AUTHORIZATION, f"Not authorized by the cluster's ACLs: {exc.code}: {exc.message}")
    if exc.code in ("UNKNOWN_TOPIC_OR_PART", "UNKNOWN_TOPIC_OR_PARTITION"):
        return RestError(TOPIC_NOT_FOUND, "This server does not host this topic-partition.")
    if exc.code in ("GROUP_ID_NOT_FOUND", "GROUP_NOT_FOUND"):
        return RestError(CONSUMER_GROUP_NOT_FOUND, "Consumer group id not found.")
    if exc.code in _BAD_REQUEST_CODES:
        return RestError(KAFKA_BAD_REQUEST, exc.message or exc.code)
    if exc.retriable:
        return RestError(KAFKA_RETRIABLE, f"Retriable Kafka error: {exc.code}: {exc.message}")
    return RestError(KAFKA_ERROR, f"Kafka error: {exc.code}: {exc.message}")


def pooled_admin(access: ClusterAccess) -> ClusterAdmin:
    """The process's long-lived admin client for the caller on this cluster (kept across requests)."""
    if not access.bootstrap:
        raise RestError(BROKER_NOT_AVAILABLE, "The cluster has no running brokers yet.")
    return POOL.get(access.client_key, lambda: admin_for_config(access.client_config(),
                                                                timeout=ADMIN_TIMEOUT_SECONDS))


@contextmanager
def cluster_admin(access: ClusterAccess) -> Iterator[ClusterAdmin]:
    """An admin client acting as the caller's principal: the cluster's ACLs decide what it may see and change
    (Metadata lists only the topics it may describe), as for the caller's own Kafka clients."""
    if not access.bootstrap:
        raise RestError(BROKER_NOT_AVAILABLE, "The cluster has no running brokers yet.")
    try:
        with admin_for_config(access.client_config(), timeout=ADMIN_TIMEOUT_SECONDS) as admin:
            yield admin
    except AdminError as exc:
        raise rest_error_for_admin(exc) from exc


__all__ = ["BAD_REQUEST", "KAFKA_BAD_REQUEST", "cluster_admin", "rest_error_for_admin"]
