"""Reconcile a cluster's client quotas with the control plane's through the Kafka admin API.

Called by the cluster reconcile pass once the brokers are up (after ACLs). Observes with DescribeClientQuotas
(one call, every entity), plans with :func:`quota_plan.plan_quotas`, acts with one AlterClientQuotas; setting
a key to the value it has is harmless, so a pass cut short is finished by the next one.
"""

from __future__ import annotations

import logging
from typing import Any

from controlplane.clusters.credentials import cluster_admin
from controlplane.clusters.models import Cluster
from controlplane.streams.models import ClientQuota
from controlplane.streams.quota_plan import plan_quotas
from dataplane.client.admin import AdminError
from dataplane.security.quotas import (
    CLIENT_ID,
    CONSUMER_BYTE_RATE,
    MAX_CONNECTIONS,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    USER,
    Entity,
    entity,
    render,
    user_name,
)

log = logging.getLogger(__name__)
KEYS = (PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE, REQUEST_PERCENTAGE, MAX_CONNECTIONS)


def quota_entity(row: ClientQuota) -> Entity:
    """Kafka's entity for a row: the principal's user name (None: the default user), and the client id if any."""
    pairs: list[tuple[str, str | None]] = [(USER, user_name(row.principal) if row.principal else None)]
    if row.client_id:
        pairs.append((CLIENT_ID, row.client_id))
    return entity(pairs)


def quota_values(row: ClientQuota) -> dict[str, float]:
    return {key: float(value) for key in KEYS if (value := getattr(row, key)) is not None}


def desired_quotas(cluster: Cluster) -> dict[Entity, dict[str, float]]:
    return {quota_entity(row): quota_values(row) for row in ClientQuota.objects.filter(cluster=cluster)}


def reconcile_quotas(cluster: Cluster, *, bootstrap: str) -> dict[str, Any]:
    """One pass; a summary for the cluster's status: ``pending`` changes, ``drift``, ``errors``, ``quotas``."""
    desired = desired_quotas(cluster)
    try:
        with cluster_admin(cluster, bootstrap=bootstrap) as admin:
            plan = plan_quotas(desired, admin.client_quotas(), correct_drift=cluster.drift_policy == "correct")
            outcomes = admin.alter_client_quotas(plan.changes)
    except AdminError as exc:
        if exc.code == "_NOT_IMPLEMENTED":
            # Not a failure to retry (the pass would never finish): the admin client's own socket, which the quota
            # APIs need, cannot speak this cluster's listener (a protocol or mechanism it lacks). The status says
            # so; the rows wait.
            return {"pending": 0, "quotas": {"entities": len(desired), "applied": False, "message": exc.message}}
        log.warning("cluster %s: quota reconcile failed: %s", cluster.kafka_cluster_id, exc)
        return {"pending": 1, "errors": [f"{exc.code}: {exc.message}"]}
    errors = {e: error for e, error in outcomes.items() if error is not None}
    summary: dict[str, Any] = {"pending": len(errors), "quotas": {"entities": len(desired), "applied": True}}
    if errors:
        summary["errors"] = [f"quota {render(e)}: {error.code}: {error.message}" for e, error in errors.items()]
    if plan.drift:
        summary["drift"] = f"{len(plan.drift)} client quota entit(ies) in the cluster that no quota names"
    return summary
