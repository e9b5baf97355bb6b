"""What each plan allows, and what a tenant may hold in all. Pure data and decisions: services enforce them."""

from __future__ import annotations

from dataclasses import dataclass

from controlplane.clusters.models import Plan


@dataclass(frozen=True, slots=True)
class PlanLimits:
    min_brokers: int
    max_brokers: int
    default_brokers: int
    default_partitions: int
    max_partitions_per_broker: int
    # Open Kafka connections one API key may hold on each broker (the broker's max.connections.per.credential):
    # a leaking client exhausts its own key's budget, not the cluster's sockets.
    max_connections_per_key: int
    # Topics may tier closed segments to the deployment's object store (``remote.storage.enable``), so retention is
    # bounded by the store rather than the brokers' disks. Every plan may, as on Confluent Cloud; a deployment adding
    # a plan without it keeps that plan's data on the brokers.
    tiered_storage: bool = True


PLAN_LIMITS: dict[str, PlanLimits] = {
    Plan.BASIC: PlanLimits(1, 1, 1, 100, 100, 200, tiered_storage=True),
    Plan.STANDARD: PlanLimits(3, 3, 3, 1000, 1000, 1000, tiered_storage=True),
    Plan.DEDICATED: PlanLimits(3, 12, 3, 4500, 4500, 5000, tiered_storage=True),
}


@dataclass(frozen=True, slots=True)
class TenantLimits:
    """What one tenant may hold in all: clusters, and brokers summed over them.

    The agents' broker port pools are shared by every tenant; without a ceiling one tenant could fill them and
    leave every other tenant's clusters unplaceable. Defaults come from settings (SLUICE_TENANT_MAX_CLUSTERS,
    SLUICE_TENANT_MAX_BROKERS); a staff user overrides them per tenant (``Tenant.max_clusters``/``max_brokers``).
    """

    max_clusters: int
    max_brokers: int


@dataclass(frozen=True, slots=True)
class TenantUsage:
    clusters: int
    brokers: int  # per cluster the larger of its desired and its placed brokers: retiring ones still hold ports


@dataclass(frozen=True, slots=True)
class LimitRefusal:
    limit: str  # "max_clusters" | "max_brokers"
    allowed: int
    used: int
    requested: int

    @property
    def message(self) -> str:
        what = "clusters" if self.limit == "max_clusters" else "brokers"
        return (f"The tenant may hold {self.allowed} {what} ({self.limit}); {self.used} are in use, so "
                f"{self.requested} more do not fit.")


def tenant_limit_refusal(*, limits: TenantLimits, usage: TenantUsage, add_clusters: int,
                         add_brokers: int) -> LimitRefusal | None:
    """Whether adding ``add_clusters`` clusters and ``add_brokers`` brokers breaks a limit (None: it fits).

    Only growth is refused: a tenant above a limit an operator lowered may still shrink, rename or delete.
    """
    if add_clusters > 0 and usage.clusters + add_clusters > limits.max_clusters:
        return LimitRefusal("max_clusters", limits.max_clusters, usage.clusters, add_clusters)
    if add_brokers > 0 and usage.brokers + add_brokers > limits.max_brokers:
        return LimitRefusal("max_brokers", limits.max_brokers, usage.brokers, add_brokers)
    return None
