"""Reads over topics and ACLs."""

from __future__ import annotations

from django.db.models import Max, Sum

from controlplane.clusters.models import Cluster
from controlplane.resources.models import Topic


def cluster_partition_count(cluster: Cluster, *, excluding: Topic | None = None) -> int:
    topics = Topic.objects.filter(cluster=cluster)
    if excluding is not None:
        topics = topics.exclude(pk=excluding.pk)
    return int(topics.aggregate(total=Sum("partitions"))["total"] or 0)


def cluster_max_replication_factor(cluster: Cluster) -> int:
    return int(Topic.objects.filter(cluster=cluster).aggregate(rf=Max("replication_factor"))["rf"] or 0)
