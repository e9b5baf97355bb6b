"""v2 reads of cluster metadata (topics, partitions, offsets, brokers) in Confluent's v2 bodies.

One :class:`~dataplane.client.admin.ClusterAdmin` per (cluster, caller's principal), created on first use and
kept for the life of the process (``kafka_admin.pooled_admin``, from the control plane's client factory), so a v2
client that polls metadata costs no new connections per request. It acts as the caller's principal: the
cluster's ACLs decide which topics a caller sees, as for its own Kafka clients.
"""

from __future__ import annotations

from typing import Any

from controlplane.kafkarest.access import ClusterAccess
from controlplane.kafkarest.errors import (
    PARTITION_NOT_FOUND,
    TOPIC_NOT_FOUND,
    RestError,
)
from controlplane.kafkarest.kafka_admin import pooled_admin, rest_error_for_admin
from dataplane.client.admin import AdminError, PartitionInfo, TopicInfo


def _rest_error(exc: AdminError) -> RestError:
    if exc.code == "UNKNOWN_TOPIC_OR_PART":
        return RestError(TOPIC_NOT_FOUND, "Topic not found.")
    return rest_error_for_admin(exc)


def _topics(access: ClusterAccess) -> dict[str, TopicInfo]:
    try:
        return pooled_admin(access).topics()
    except AdminError as exc:
        raise _rest_error(exc) from exc


def _topic(access: ClusterAccess, name: str) -> TopicInfo:
    found = _topics(access).get(name)
    if found is None:
        raise RestError(TOPIC_NOT_FOUND, "Topic not found.")
    return found


def _partition_body(partition: PartitionInfo) -> dict[str, Any]:
    return {"partition": partition.partition, "leader": partition.leader,
            "replicas": [{"broker": b, "leader": b == partition.leader, "in_sync": b in partition.isr}
                         for b in partition.replicas]}


def _partition(access: ClusterAccess, topic: str, partition: int) -> PartitionInfo:
    found = next((p for p in _topic(access, topic).partitions if p.partition == partition), None)
    if found is None:
        raise RestError(PARTITION_NOT_FOUND, "Partition not found.")
    return found


def topic_names(*, access: ClusterAccess) -> list[str]:
    return list(_topics(access))


def topic_detail(*, access: ClusterAccess, topic: str) -> dict[str, Any]:
    """``GetTopicResponse``: name, every config with its effective value, partitions."""
    found = _topic(access, topic)
    try:
        entries = pooled_admin(access).topic_configs([topic]).get(topic, {})
    except AdminError as exc:
        raise _rest_error(exc) from exc
    return {"name": found.name, "configs": {name: entry.value for name, entry in entries.items()},
            "partitions": [_partition_body(p) for p in found.partitions]}


def partition_list(*, access: ClusterAccess, topic: str) -> list[dict[str, Any]]:
    return [_partition_body(p) for p in _topic(access, topic).partitions]


def partition_detail(*, access: ClusterAccess, topic: str, partition: int) -> dict[str, Any]:
    return _partition_body(_partition(access, topic, partition))


def partition_offsets(*, access: ClusterAccess, topic: str, partition: int) -> dict[str, int]:
    """``TopicPartitionOffsetResponse``: the log start offset and the high watermark."""
    _partition(access, topic, partition)
    admin = pooled_admin(access)
    try:
        beginning = admin.offsets([(topic, partition)], "earliest")[(topic, partition)]
        end = admin.offsets([(topic, partition)], "latest")[(topic, partition)]
    except AdminError as exc:
        raise _rest_error(exc) from exc
    return {"beginning_offset": beginning, "end_offset": end}


def broker_ids(*, access: ClusterAccess) -> dict[str, list[int]]:
    try:
        cluster = pooled_admin(access).describe_cluster()
    except AdminError as exc:
        raise _rest_error(exc) from exc
    return {"brokers": [b.node_id for b in cluster.brokers]}
