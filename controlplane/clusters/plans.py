"""What each plan allows. Pure data: the service validates specs against it."""

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


PLAN_LIMITS: dict[str, PlanLimits] = {
    Plan.BASIC: PlanLimits(1, 1, 1, 100, 100, 200),
    Plan.STANDARD: PlanLimits(3, 3, 3, 1000, 1000, 1000),
    Plan.DEDICATED: PlanLimits(3, 12, 3, 4500, 4500, 5000),
}
