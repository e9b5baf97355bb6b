"""Reads over topics and ACLs."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from django.db.models import Max, Sum

from controlplane.clusters import observability, remote_usage, throughput
from controlplane.clusters.models import Cluster
from controlplane.resources.models import Topic
from dataplane.config.tiering import REMOTE_STORAGE_ENABLE


def cluster_partition_count(cluster: Cluster, *, excluding: Topic | None = None) -> int:
    topics = Topic.objects.filter(cluster=cluster)
    if excluding is not None:
        topics = topics.exclude(pk=excluding.pk)
    return int(topics.aggregate(total=Sum("partitions"))["total"] or 0)


def cluster_max_replication_factor(cluster: Cluster) -> int:
    return int(Topic.objects.filter(cluster=cluster).aggregate(rf=Max("replication_factor"))["rf"] or 0)


@dataclass(frozen=True, slots=True)
class TopicFigures:
    """What the topics list shows beside a topic; None: unknown (cluster unreachable, topic not there yet, no
    recent throughput sample), never zero."""

    size_bytes: int | None = None
    record_count: int | None = None
    under_replicated_partitions: int | None = None
    offline_partitions: int | None = None
    bytes_in_per_sec: float | None = None
    records_in_per_sec: float | None = None
    remote_size_bytes: int | None = None  # in the remote tier (tiered topics only; None when not tiered)


def topic_figures(cluster: Cluster, names: Iterable[str]) -> dict[str, TopicFigures]:
    """One page's figures: the cluster's (one batched admin round for the page, cached briefly) and the last
    sampled minute's rates (one query)."""
    wanted = list(names)
    if not wanted:
        return {}
    stats = observability.topic_stats(cluster, wanted)
    rates = throughput.topic_rates(cluster, wanted)
    tiered = set(Topic.objects.filter(cluster=cluster, name__in=wanted,
                                      configs__contains={REMOTE_STORAGE_ENABLE: "true"}).values_list("name", flat=True))
    remote = remote_usage.remote_sizes(cluster) if tiered else None
    figures = {}
    for name in wanted:
        stat, rate = stats.get(name), rates.get(name)
        figures[name] = TopicFigures(
            size_bytes=stat.size_bytes if stat else None, record_count=stat.record_count if stat else None,
            under_replicated_partitions=stat.under_replicated_partitions if stat else None,
            offline_partitions=stat.offline_partitions if stat else None,
            bytes_in_per_sec=rate.bytes_in_per_sec if rate else None,
            records_in_per_sec=rate.records_in_per_sec if rate else None,
            remote_size_bytes=remote.get(name, 0) if remote is not None and name in tiered else None)
    return figures
