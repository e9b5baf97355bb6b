"""What a managed cluster looks like from inside: brokers, partitions, consumer groups and their lag,
and the operator actions that go with them (reset a group's offsets, delete records).

Everything is read live through the Kafka admin API, as the cluster reports it, so it agrees with what any
Kafka tool would show. Admin errors become API errors: an unknown topic or group is a 404, a group with
members cannot be reset (409), an unreachable cluster is a 503.
"""

from __future__ import annotations

import dataclasses
import hashlib
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from django.core.cache import cache
from rest_framework import status

from controlplane.audit.services import audit_record
from controlplane.clusters.credentials import bootstrap_servers, client_config, frozen
from controlplane.clusters.kafka_clients import AdminPool, admin_as_internal, admin_for_config
from controlplane.clusters.models import BrokerNode, Cluster
from controlplane.core.actors import Actor
from controlplane.core.errors import ApplicationError, Conflict, ValidationFailed
from dataplane.client.admin import AdminError, ClusterAdmin
from dataplane.client.lag import Owner, compute_lag

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


@dataclass(frozen=True, slots=True)
class TopicStats:
    """What a topics list shows beside each topic, as the cluster reports it."""

    size_bytes: int  # all replicas' logs on disk
    record_count: int  # sum over partitions of end - start offset
    under_replicated_partitions: int
    offline_partitions: int


STATS_TTL = 10  # seconds a topic's figures are reused (lists are paged, sorted and searched again and again)
DOWN_TTL = 5  # seconds an unreachable cluster is not asked again by a list
STATS_TIMEOUT = 3.0  # a list shows its rows without figures rather than wait longer
_ABSENT = "absent"  # cached for a name the cluster does not have (yet)
# Long-lived admin clients for the lists (no connection and SASL handshake per page), one per cluster settings.
_STATS_ADMINS = AdminPool()


def _stats_key(cluster: Cluster, name: str) -> str:
    return f"topic-stats:{cluster.pk}:{hashlib.sha1(name.encode()).hexdigest()}"  # names may outgrow a key


def topic_stats(cluster: Cluster, names: Iterable[str]) -> dict[str, TopicStats]:
    """Figures for one page of topics: from the cache, else from one batched admin round for all the page's
    missing names (Metadata for those topics, ListOffsets earliest and latest, DescribeLogDirs of their
    partitions), never a request per topic. A name missing from the answer is unknown: the cluster does not have
    it, or could not be reached (then it is not asked again for ``DOWN_TTL``, and the list does not fail)."""
    wanted = list(dict.fromkeys(names))
    keys = {name: _stats_key(cluster, name) for name in wanted}
    cached = cache.get_many([*keys.values(), f"topic-stats-down:{cluster.pk}"])
    found = {name: TopicStats(*cached[key]) for name, key in keys.items()
             if isinstance(cached.get(key), list | tuple)}
    missing = [name for name, key in keys.items() if key not in cached]
    if not missing or f"topic-stats-down:{cluster.pk}" in cached:
        return found
    try:
        fresh = _fetch_topic_stats(cluster, missing)
    except (AdminError, ApplicationError):
        cache.set(f"topic-stats-down:{cluster.pk}", True, DOWN_TTL)
        return found
    cache.set_many({keys[name]: (list(dataclasses.astuple(fresh[name])) if name in fresh else _ABSENT)
                    for name in missing}, STATS_TTL)
    return {**found, **fresh}


def _fetch_topic_stats(cluster: Cluster, names: list[str]) -> dict[str, TopicStats]:
    servers = bootstrap(cluster)
    if not servers:
        raise ClusterUnavailable("The cluster has no brokers yet.")
    config = client_config(cluster, bootstrap=servers)
    key = (str(cluster.pk), frozen(config))
    admin = _STATS_ADMINS.get(key, lambda: admin_for_config(config, timeout=STATS_TIMEOUT))
    try:
        described = admin.describe_topics(names)
        keys = [(name, p.partition) for name, info in described.items() for p in info.partitions]
        start = admin.offsets(keys, "earliest") if keys else {}
        end = admin.offsets(keys, "latest") if keys else {}
        sizes = Counter[str]()
        for size in admin.partition_sizes(keys) if keys else []:
            sizes[size.topic] += size.size_bytes
    except AdminError:
        _STATS_ADMINS.discard(key)  # a moved broker or a rotated secret: the next page makes a new client
        raise
    return {name: TopicStats(
        size_bytes=sizes[name],
        record_count=sum(max(0, end[(name, p.partition)] - start[(name, p.partition)]) for p in info.partitions),
        under_replicated_partitions=sum(1 for p in info.partitions if p.under_replicated),
        offline_partitions=sum(1 for p in info.partitions if p.offline))
        for name, info in described.items()}


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
    """The group and a row per partition it committed to or a member owns; a partition owned but never committed
    has ``committed_offset`` and ``lag`` null (unknown: the consumer's auto.offset.reset decides), never 0."""
    described = admin.describe_group(group_id)
    committed = admin.committed_offsets(group_id)
    owned = {tp: m for m in described.members for tp in m.assignment}
    keys = sorted({*committed, *owned})
    ends = admin.offsets(keys, "latest") if keys else {}
    owners = {tp: Owner(m.member_id, m.client_id, m.host, m.group_instance_id) for tp, m in owned.items()}
    lags = compute_lag({tp: (offset, "") for tp, offset in committed.items()}, ends, owners)
    rows = [{"topic": p.topic, "partition": p.partition, "committed_offset": p.committed_offset,
             "log_end_offset": p.log_end_offset, "lag": p.lag,
             "member_id": p.owner.member_id if p.owner is not None else None}
            for p in lags]
    return described, rows


def lag_totals(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """A group's totals over its partition rows: the known lags summed (null when partitions exist and none
    has a commit: unknown is not zero), how many partitions and how many of them were never committed."""
    known = [r["lag"] for r in rows if r["lag"] is not None]
    return {"total_lag": sum(known) if known or not rows else None, "partition_count": len(rows),
            "uncommitted_partitions": len(rows) - len(known),
            "topics": sorted({r["topic"] for r in rows})}


def groups(cluster: Cluster) -> list[dict[str, Any]]:
    with admin_for(cluster) as admin:
        listing = admin.groups()
        out = []
        for group in listing:
            described, rows = _lag(admin, group.group_id)
            out.append({"group_id": group.group_id, "state": described.state, "protocol_type": group.protocol_type,
                        "members": len(described.members), **lag_totals(rows)})
    return out


def group(cluster: Cluster, group_id: str) -> dict[str, Any]:
    with admin_for(cluster) as admin:
        described, rows = _lag(admin, group_id)
    return {"group_id": group_id, "state": described.state, "protocol": described.protocol,
            "members": [{"member_id": m.member_id, "client_id": m.client_id, "host": m.host,
                         "group_instance_id": m.group_instance_id,
                         "assignment": [{"topic": t, "partition": p} for t, p in m.assignment]}
                        for m in described.members],
            "partitions": rows, **lag_totals(rows)}


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
    return {"group_id": group_id, "dry_run": dry_run,
            "partitions": [reset_row(t, p, committed.get((t, p)), o, earliest[(t, p)], latest[(t, p)])
                           for (t, p), o in sorted(wanted.items())]}


def reset_row(topic: str, partition: int, current: int | None, new: int, start: int, end: int) -> dict[str, Any]:
    """One partition of a reset plan: where the group is and will be, and what that does to its lag (null
    where the group never committed: its lag was unknown)."""
    before = None if current is None else max(0, end - current)
    after = max(0, end - new)
    return {"topic": topic, "partition": partition, "current_offset": current, "new_offset": new,
            "log_start_offset": start, "log_end_offset": end, "lag_before": before, "lag_after": after,
            "lag_delta": None if before is None else after - before,
            "offset_delta": None if current is None else new - current}


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
