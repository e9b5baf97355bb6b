"""The quota step: make the cluster's client quotas the control plane's.

Observes with DescribeClientQuotas (one call, every entity), plans with the pure :func:`quota_plan.plan_quotas`,
applies with one AlterClientQuotas; setting a key to the value it has is harmless, so a pass cut short is finished
by the next one.
"""

from __future__ import annotations

import logging

from controlplane.clusters.models import Cluster
from controlplane.reconcile.context import PassContext
from controlplane.reconcile.quota_plan import plan_quotas
from controlplane.reconcile.results import QuotasResult
from controlplane.resources.models import ClientQuota
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


def run(ctx: PassContext) -> QuotasResult:
    desired = desired_quotas(ctx.cluster)
    try:
        admin = ctx.admin()
        plan = plan_quotas(desired, admin.client_quotas(), correct_drift=ctx.cluster.drift_policy == "correct")
        outcomes = admin.alter_client_quotas(plan.changes)
    except AdminError as exc:
        if exc.code == "_NOT_IMPLEMENTED":
            # Not a failure to retry (the pass would never finish): the admin client's own socket, which the quota
            # APIs need, cannot speak this cluster's listener (a protocol or mechanism it lacks). The status says
            # so; the rows wait.
            return QuotasResult(entities=len(desired), applied=False, message=exc.message)
        log.warning("cluster %s: quota reconcile failed: %s", ctx.cluster.kafka_cluster_id, exc)
        return QuotasResult(pending=1, errors=(f"quotas: {exc.code}: {exc.message}",))
    errors = {e: error for e, error in outcomes.items() if error is not None}
    return QuotasResult(
        pending=len(errors), entities=len(desired),
        errors=tuple(f"quota {render(e)}: {error.code}: {error.message}" for e, error in errors.items()),
        drift=f"{len(plan.drift)} client quota entit(ies) in the cluster that no quota names" if plan.drift else "")
