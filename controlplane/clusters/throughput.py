"""Throughput history for charts: sampled once a minute from what the cluster reports.

Kafka's protocol carries no traffic counters, so the samples are differences of absolute figures the admin
API does give: log end offsets (records in), log sizes (bytes in; retention deleting old segments can only
hide growth, so a shrink counts as zero) and consumer groups' committed offsets (records out). Per broker,
the figures of the partitions it leads. Bytes out are counted by the brokers themselves (Fetch responses to
consumers, per topic) and published with their lease in the metadata store; a broker that restarts starts
from zero, which costs that broker's share of one interval (a drop counts as zero, like a log shrink).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.db.models import Sum
from django.utils import timezone

from controlplane.clusters import metadata
from controlplane.clusters.models import Cluster, ThroughputCounter, ThroughputSample
from controlplane.clusters.observability import admin_for
from dataplane.client.admin import ClusterAdmin

KEEP = timedelta(hours=48)


@dataclass(frozen=True, slots=True)
class Totals:
    records: int = 0
    bytes: int = 0
    consumed: int = 0
    bytes_out: int = 0
    disk: int = 0  # all replicas on disk now (a gauge)


def measure(admin: ClusterAdmin, sent: Mapping[int, Mapping[str, int]]) -> dict[tuple[str, str], Totals]:
    """Absolute figures now: ("topic", name) and ("broker", node id) -> totals; ``sent``: each broker's bytes
    sent to consumers per topic, as the metadata store has them."""
    topics = admin.topics()
    keys = [(name, p.partition) for name, info in topics.items() for p in info.partitions]
    ends = admin.offsets(keys, "latest") if keys else {}
    leaders = {(name, p.partition): p.leader for name, info in topics.items() for p in info.partitions}
    sizes: dict[tuple[str, int], int] = {}
    disk = Counter[tuple[str, str]]()
    for size in admin.partition_sizes():
        if size.broker == leaders.get((size.topic, size.partition)):
            sizes[(size.topic, size.partition)] = size.size_bytes
        disk[("broker", str(size.broker))] += size.size_bytes
        if size.topic in topics:
            disk[("topic", size.topic)] += size.size_bytes
    consumed = Counter[str]()
    for group in admin.groups():
        for (topic, _), offset in admin.committed_offsets(group.group_id).items():
            if topic in topics:
                consumed[topic] += offset
    records, data = Counter[tuple[str, str]](), Counter[tuple[str, str]]()
    for key, end in ends.items():
        for scope in (("topic", key[0]), ("broker", str(leaders[key]))):
            records[scope] += end
            data[scope] += sizes.get(key, 0)
    out = Counter[tuple[str, str]]()
    for node, per_topic in sent.items():
        for topic, sent_bytes in per_topic.items():
            if topic in topics:
                out[("topic", topic)] += sent_bytes
                out[("broker", str(node))] += sent_bytes
    scopes = {*records, *out, *disk, *(("topic", t) for t in topics)}
    return {s: Totals(records[s], data[s], consumed[s[1]] if s[0] == "topic" else 0, out[s], disk[s])
            for s in scopes}


def record(cluster: Cluster, now: datetime, totals: dict[tuple[str, str], Totals]) -> int:
    """Store the differences from the last counters as samples; returns how many samples were written."""
    with transaction.atomic():
        previous = {(c.scope, c.name): c for c in ThroughputCounter.objects.select_for_update().filter(
            cluster=cluster)}
        samples = []
        for (scope, name), now_totals in totals.items():
            last = previous.get((scope, name))
            if last is not None and now > last.at:
                samples.append(ThroughputSample(
                    cluster=cluster, scope=scope, name=name, at=now, seconds=(now - last.at).total_seconds(),
                    records_in=max(0, now_totals.records - last.records),
                    bytes_in=max(0, now_totals.bytes - last.bytes),
                    records_out=max(0, now_totals.consumed - last.consumed),
                    bytes_out=max(0, now_totals.bytes_out - last.bytes_out)))
        ThroughputSample.objects.bulk_create(samples)
        gone = [c.pk for key, c in previous.items() if key not in totals]  # deleted topics, removed brokers
        ThroughputCounter.objects.filter(pk__in=gone).delete()
        for (scope, name), t in totals.items():
            ThroughputCounter.objects.update_or_create(cluster=cluster, scope=scope, name=name, defaults={
                "at": now, "records": t.records, "bytes": t.bytes, "consumed": t.consumed, "bytes_out": t.bytes_out,
                "disk_bytes": t.disk})
        ThroughputSample.objects.filter(cluster=cluster, at__lt=now - KEEP).delete()
    return len(samples)


def sample(cluster: Cluster) -> int:
    with admin_for(cluster) as admin:
        totals = measure(admin, metadata.bytes_out(cluster.kafka_cluster_id))
    return record(cluster, timezone.now(), totals)


def history(cluster: Cluster, *, scope: str, name: str | None, minutes: int) -> list[dict[str, object]]:
    since = timezone.now() - timedelta(minutes=minutes)
    rows = ThroughputSample.objects.filter(cluster=cluster, scope=scope, at__gte=since)
    if name is not None:
        rows = rows.filter(name=name)
    return [{"name": r.name, "at": r.at.isoformat(), "seconds": r.seconds, "records_in": r.records_in,
             "bytes_in": r.bytes_in, "records_out": r.records_out, "bytes_out": r.bytes_out,
             "records_in_per_sec": r.records_in / r.seconds if r.seconds else 0.0,
             "bytes_in_per_sec": r.bytes_in / r.seconds if r.seconds else 0.0,
             "records_out_per_sec": r.records_out / r.seconds if r.seconds else 0.0,
             "bytes_out_per_sec": r.bytes_out / r.seconds if r.seconds else 0.0}
            for r in rows.order_by("name", "at")]


RECENT = timedelta(minutes=5)  # an older sample says nothing about the rate now: shown as unknown


@dataclass(frozen=True, slots=True)
class Rates:
    """Per-second rates over one sampled interval."""

    records_in_per_sec: float
    bytes_in_per_sec: float
    records_out_per_sec: float
    bytes_out_per_sec: float


def _rates(rows: list[ThroughputSample]) -> Rates:
    seconds = max(r.seconds for r in rows) or 1.0  # samples of one pass share their interval
    return Rates(sum(r.records_in for r in rows) / seconds, sum(r.bytes_in for r in rows) / seconds,
                 sum(r.records_out for r in rows) / seconds, sum(r.bytes_out for r in rows) / seconds)


def topic_rates(cluster: Cluster, names: list[str]) -> dict[str, Rates]:
    """Each named topic's rates over its last sampled minute, if that was within ``RECENT`` (one query)."""
    rows = (ThroughputSample.objects.filter(cluster=cluster, scope="topic", name__in=names,
                                            at__gte=timezone.now() - RECENT)
            .order_by("name", "-at").distinct("name"))
    return {r.name: _rates([r]) for r in rows}


def cluster_rates(cluster_ids: list[Any]) -> dict[Any, Rates]:
    """Each cluster's rates over its last sampled minute, all brokers summed, if within ``RECENT`` (one query)."""
    rows = ThroughputSample.objects.filter(cluster_id__in=cluster_ids, scope="broker",
                                           at__gte=timezone.now() - RECENT)
    latest: dict[Any, datetime] = {}
    for r in rows:
        latest[r.cluster_id] = max(latest.get(r.cluster_id, r.at), r.at)
    by_cluster: dict[Any, list[ThroughputSample]] = {}
    for r in rows:
        if r.at == latest[r.cluster_id]:
            by_cluster.setdefault(r.cluster_id, []).append(r)
    return {cluster_id: _rates(found) for cluster_id, found in by_cluster.items()}


def cluster_storage(cluster_ids: list[Any]) -> dict[Any, int]:
    """Each cluster's bytes on disk (all brokers, all replicas) at its last sample (one query); a cluster never
    sampled since disk sizes were measured is left out (unknown)."""
    rows = (ThroughputCounter.objects.filter(cluster_id__in=cluster_ids, scope="broker", disk_bytes__isnull=False)
            .values("cluster_id").annotate(total=Sum("disk_bytes")))
    return {r["cluster_id"]: int(r["total"]) for r in rows}
