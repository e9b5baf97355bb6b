"""Reads of clusters that cross module boundaries (``sluice up``'s state lines, the topics' totals)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from django.db.models import Max, Sum

from controlplane.clusters import throughput
from controlplane.clusters.models import Cluster

PENDING = "Pending"  # no reconcile has written a status yet


@dataclass(frozen=True, slots=True)
class ClusterPhase:
    """A cluster's state in one word: its ``Ready`` condition's reason (Provisioning, Running, BrokersDown, ...)."""

    tenant: str
    name: str
    phase: str


def phase_of(status: dict[str, object]) -> str:
    """The ``Ready`` condition's reason, or ``Pending`` before the first reconcile."""
    conditions = status.get("conditions")
    for condition in conditions if isinstance(conditions, list) else []:
        if isinstance(condition, dict) and condition.get("type") == "Ready":
            return str(condition.get("reason") or PENDING)
    return PENDING


def cluster_phases() -> dict[str, ClusterPhase]:
    """Every cluster's phase, by id (one query: ``sluice up`` polls it)."""
    rows = Cluster.objects.values_list("id", "tenant__slug", "name", "status")
    return {str(pk): ClusterPhase(tenant, name, phase_of(status or {})) for pk, tenant, name, status in rows}


def phase_changes(before: dict[str, ClusterPhase], after: dict[str, ClusterPhase]) -> list[str]:
    """One line per cluster whose phase changed between two looks (new clusters and deleted ones included)."""
    lines = []
    for key, now in after.items():
        was = before.get(key)
        if was is None:
            lines.append(f"cluster {now.tenant}/{now.name}: {now.phase}")
        elif was.phase != now.phase:
            lines.append(f"cluster {now.tenant}/{now.name}: {was.phase} → {now.phase}")
    lines += [f"cluster {was.tenant}/{was.name}: deleted" for key, was in before.items() if key not in after]
    return lines


# The cluster's topics, read through the resources app's reverse relation (``Topic.cluster``): resources sits
# above clusters, so its models are never imported here.


def topic_partition_count(cluster: Cluster) -> int:
    return int(cluster.topics.aggregate(total=Sum("partitions"))["total"] or 0)


def topic_max_replication_factor(cluster: Cluster) -> int:
    return int(cluster.topics.aggregate(rf=Max("replication_factor"))["rf"] or 0)


@dataclass(frozen=True, slots=True)
class ClusterFigures:
    """What the clusters list shows beside a cluster; None: unknown (no reconcile yet, no recent sample)."""

    brokers_up: int | None = None
    brokers_total: int = 0
    bytes_in_per_sec: float | None = None
    bytes_out_per_sec: float | None = None
    records_in_per_sec: float | None = None
    records_out_per_sec: float | None = None
    storage_bytes: int | None = None


def brokers_up(status: dict[str, object]) -> int | None:
    """Brokers registered (running, holding their lease) and not being retired, as the last reconcile saw."""
    brokers = status.get("brokers")
    if not isinstance(brokers, list):
        return None
    return sum(1 for b in brokers if isinstance(b, dict) and b.get("registered") and not b.get("retiring"))


def cluster_figures(clusters: Sequence[Cluster]) -> dict[object, ClusterFigures]:
    """A page of clusters' figures from what the control plane already holds (two queries for the page, no
    call to any cluster: an unreachable one cannot slow the list): broker counts from the last reconcile's
    status, rates from the last sampled minute, storage from the last sample's disk sizes."""
    ids = [c.pk for c in clusters]
    rates = throughput.cluster_rates(ids) if ids else {}
    storage = throughput.cluster_storage(ids) if ids else {}
    out: dict[object, ClusterFigures] = {}
    for c in clusters:
        rate = rates.get(c.pk)
        out[c.pk] = ClusterFigures(
            brokers_up=brokers_up(c.status or {}), brokers_total=int((c.spec or {}).get("broker_count", 0)),
            bytes_in_per_sec=rate.bytes_in_per_sec if rate else None,
            bytes_out_per_sec=rate.bytes_out_per_sec if rate else None,
            records_in_per_sec=rate.records_in_per_sec if rate else None,
            records_out_per_sec=rate.records_out_per_sec if rate else None,
            storage_bytes=storage.get(c.pk))
    return out
