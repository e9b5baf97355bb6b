"""What a managed cluster looks like from inside: brokers, partitions, consumer groups and their lag,
and the operator actions that go with them (reset a group's offsets, delete records).

Everything is read live through the Kafka admin API, as the cluster reports it, so it agrees with what any
Kafka tool would show. Admin errors become API errors: an unknown topic or group is a 404, a group with
members cannot be reset (409), an unreachable cluster is a 503.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from rest_framework import status

from controlplane.audit.services import audit_record
from controlplane.clusters.credentials import bootstrap_servers
from controlplane.clusters.kafka_clients import admin_as_internal
from controlplane.clusters.models import BrokerNode, Cluster
from controlplane.core.actors import Actor
from controlplane.core.errors import ApplicationError, Conflict, ValidationFailed
from dataplane.client.admin import AdminError, ClusterAdmin
from dataplane.client.lag import compute_lag

RESET_TARGETS = ("earliest", "latest", "timestamp", "offset", "shift-by")


class ClusterUnavailable(ApplicationError):
    code = "cluster_unavailable"
    http_status = status.HTTP_503_SERVICE_UNAVAILABLE


class NotFoundInCluster(ApplicationError):
    code = "not_found"
    http_status = status.HTTP_404_NOT_FOUND


def bootstrap(cluster: Cluster) -> str:
    return bootstrap_servers(cluster)


@contextmanager
def admin_for(cluster: Cluster) -> Iterator[ClusterAdmin]:
    servers = bootstrap(cluster)
    if not servers:
        raise ClusterUnavailable("The cluster has no brokers yet.")
    try:
        with admin_as_internal(cluster, bootstrap=servers) as admin:
            yield admin
    except AdminError as exc:
        if exc.code in ("UNKNOWN_TOPIC_OR_PART", "GROUP_ID_NOT_FOUND", "TRANSACTIONAL_ID_NOT_FOUND"):
            raise NotFoundInCluster(exc.message) from exc
        if exc.code == "NON_EMPTY_GROUP":
            raise Conflict("The group has active members: stop its consumers first.", code="group_not_empty") \
                from exc
        if exc.retriable:
            raise ClusterUnavailable(f"The cluster did not answer: {exc.code}: {exc.message}") from exc
        raise ApplicationError(f"{exc.code}: {exc.message}", code="kafka_error") from exc


def brokers(cluster: Cluster) -> list[dict[str, Any]]:
    """Each broker: where it runs, whether it is up, partitions led and followed, bytes on disk."""
    with admin_for(cluster) as admin:
        info = admin.describe_cluster()
        topics = admin.topics(include_internal=True)
        disk = Counter[int]()
        for size in admin.partition_sizes():
            disk[size.broker] += size.size_bytes
    led = Counter(p.leader for t in topics.values() for p in t.partitions)
    hosted = Counter(r for t in topics.values() for p in t.partitions for r in p.replicas)
    live = {b.node_id for b in info.brokers}
    nodes = {n.node_id: n for n in BrokerNode.objects.filter(cluster=cluster).select_related("agent")}
    return [{"node_id": node_id, "host": n.agent_id, "address": f"{n.agent.advertised_host}:{n.port}",
             "port": n.port, "rack": n.rack or None,
             "status": "up" if node_id in live else "down", "retiring": n.removal_requested_at is not None,
             "controller": node_id == info.controller_id, "partitions_led": led[node_id],
             "partitions_followed": hosted[node_id] - led[node_id], "disk_bytes": disk[node_id],
             "process": n.process}
            for node_id, n in sorted(nodes.items())]


def partitions(cluster: Cluster, topic: str) -> list[dict[str, Any]]:
    with admin_for(cluster) as admin:
        found = admin.topics(include_internal=True).get(topic)
        if found is None:
            raise NotFoundInCluster(f"Topic '{topic}' does not exist in the cluster.")
        keys = [(topic, p.partition) for p in found.partitions]
        start = admin.offsets(keys, "earliest")
        end = admin.offsets(keys, "latest")
        sizes: dict[int, int] = {}
        for size in admin.partition_sizes():
            if size.topic == topic:
                sizes[size.partition] = max(sizes.get(size.partition, 0), size.size_bytes)
    return [{"partition": p.partition, "leader": p.leader, "replicas": list(p.replicas), "isr": list(p.isr),
             "offline": p.offline, "under_replicated": p.under_replicated, "size_bytes": sizes.get(p.partition, 0),
             "start_offset": start[(topic, p.partition)], "end_offset": end[(topic, p.partition)]}
            for p in found.partitions]


def _lag(admin: ClusterAdmin, group_id: str) -> tuple[Any, list[dict[str, Any]]]:
    described = admin.describe_group(group_id)
    committed = admin.committed_offsets(group_id)
    owned = {tp: m for m in described.members for tp in m.assignment}
    keys = sorted({*committed, *owned})
    ends = admin.offsets(keys, "latest") if keys else {}
    lags = compute_lag({tp: (offset, "") for tp, offset in committed.items()}, ends)
    rows = [{"topic": p.topic, "partition": p.partition, "committed_offset": p.committed_offset,
             "log_end_offset": p.log_end_offset, "lag": p.lag,
             "member_id": owned[(p.topic, p.partition)].member_id if (p.topic, p.partition) in owned else None}
            for p in lags]
    return described, rows


def groups(cluster: Cluster) -> list[dict[str, Any]]:
    with admin_for(cluster) as admin:
        listing = admin.groups()
        out = []
        for group in listing:
            described, rows = _lag(admin, group.group_id)
            out.append({"group_id": group.group_id, "state": described.state, "protocol_type": group.protocol_type,
                        "members": len(described.members),
                        "total_lag": sum(r["lag"] or 0 for r in rows)})
    return out


def group(cluster: Cluster, group_id: str) -> dict[str, Any]:
    with admin_for(cluster) as admin:
        described, rows = _lag(admin, group_id)
    return {"group_id": group_id, "state": described.state, "protocol": described.protocol,
            "members": [{"member_id": m.member_id, "client_id": m.client_id, "host": m.host,
                         "group_instance_id": m.group_instance_id,
                         "assignment": [{"topic": t, "partition": p} for t, p in m.assignment]}
                        for m in described.members],
            "partitions": rows, "total_lag": sum(r["lag"] or 0 for r in rows)}


def reset_offsets(cluster: Cluster, group_id: str, *, actor: Actor, to: str, topic: str | None = None,
                  value: int | None = None, dry_run: bool = True) -> dict[str, Any]:
    """Kafka's ``kafka-consumer-groups --reset-offsets``: plan, and unless ``dry_run`` apply (empty groups only)."""
    if to not in RESET_TARGETS:
        raise ValidationFailed({"to": [f"Must be one of {', '.join(RESET_TARGETS)}."]})
    if to in ("timestamp", "offset", "shift-by") and value is None:
        raise ValidationFailed({"value": [f"Required for '{to}'."]})
    with admin_for(cluster) as admin:
        described = admin.describe_group(group_id)
        if described.members and not dry_run:
            raise Conflict("The group has active members: stop its consumers first.", code="group_not_empty")
        committed = admin.committed_offsets(group_id)
        if topic is not None:
            found = admin.topics().get(topic)
            if found is None:
                raise NotFoundInCluster(f"Topic '{topic}' does not exist in the cluster.")
            keys = [(topic, p.partition) for p in found.partitions]
        else:
            keys = sorted(committed)
        if not keys:
            raise ValidationFailed({"topic": ["The group has no committed offsets: name a topic to reset."]})
        earliest, latest = admin.offsets(keys, "earliest"), admin.offsets(keys, "latest")
        if to == "earliest":
            wanted = dict(earliest)
        elif to == "latest":
            wanted = dict(latest)
        elif to == "timestamp":
            found_ts = admin.offsets(keys, int(value or 0))
            wanted = {k: (o if o >= 0 else latest[k]) for k, o in found_ts.items()}
        elif to == "offset":
            wanted = {k: int(value or 0) for k in keys}
        else:
            wanted = {k: committed.get(k, earliest[k]) + int(value or 0) for k in keys}
        # Out-of-range targets are clamped to the log, as Kafka's tool does.
        wanted = {k: min(max(o, earliest[k]), latest[k]) for k, o in wanted.items()}
        if not dry_run:
            admin.alter_group_offsets(group_id, wanted)
    if not dry_run:
        audit_record(tenant=cluster.tenant, actor=actor, action="group.reset_offsets", target_type="group",
                     target_id=f"{cluster.id}/{group_id}", data={"to": to, "value": value, "topic": topic})
    return {"group_id": group_id, "dry_run": dry_run, "partitions": [
        {"topic": t, "partition": p, "current_offset": committed.get((t, p)), "new_offset": o}
        for (t, p), o in sorted(wanted.items())]}


def delete_records(cluster: Cluster, topic: str, before: dict[int, int], *, actor: Actor) -> list[dict[str, int]]:
    """Drop each named partition's records below an offset (-1: everything up to the high watermark)."""
    if not before:
        raise ValidationFailed({"partitions": ["Name at least one partition and the offset to delete below."]})
    with admin_for(cluster) as admin:
        low = admin.delete_records({(topic, p): o for p, o in before.items()})
    audit_record(tenant=cluster.tenant, actor=actor, action="topic.delete_records", target_type="topic",
                 target_id=f"{cluster.id}/{topic}", data={"before": {str(k): v for k, v in before.items()}})
    return [{"partition": p, "low_watermark": o} for (_, p), o in sorted(low.items())]


def transactions(cluster: Cluster) -> list[dict[str, Any]]:
    """Every open transaction: its id, state, producer, partitions and age (Kafka's ListTransactions and
    DescribeTransactions, as ``kafka-transactions.sh list`` / ``describe`` show them)."""
    with admin_for(cluster) as admin:
        found = admin.open_transactions()
    now_ms = time.time_ns() // 1_000_000
    return [{"transactional_id": t.transactional_id, "state": t.state, "producer_id": t.producer_id,
             "producer_epoch": t.producer_epoch, "timeout_ms": t.timeout_ms, "start_time_ms": t.start_time_ms,
             "age_ms": max(0, now_ms - t.start_time_ms) if t.start_time_ms >= 0 else None,
             "coordinator": t.coordinator_id,
             "partitions": [{"topic": topic, "partition": partition} for topic, partition in t.partitions]}
            for t in found]


def abort_transaction(cluster: Cluster, transactional_id: str, *, actor: Actor) -> None:
    """Fence the id's producer and abort its open transaction, as a new instance of the producer would."""
    with admin_for(cluster) as admin:
        admin.abort_transaction(transactional_id)
    audit_record(tenant=cluster.tenant, actor=actor, action="transaction.abort", target_type="transaction",
                 target_id=transactional_id, data={"cluster": str(cluster.id)})
