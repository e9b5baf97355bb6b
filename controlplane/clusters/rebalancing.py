"""Rebalances as the API asks for them: request, approve, stop, refresh.

A rebalance goes New -> PendingProposal -> ProposalReady -> (approve) -> Rebalancing -> Ready, or to Stopped
(asked) or NotReady (the cluster refused; a refresh tries again), as Strimzi's KafkaRebalance does. The
proposal comes from :func:`controlplane.clusters.balance.propose` over what the cluster reports; execution is
one AlterPartitionReassignments batch, followed until nothing is moving, then a preferred-leader election.
The reconcile pass carries them out (:mod:`controlplane.reconcile.rebalance`).
"""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from controlplane.audit.services import audit_record
from controlplane.clusters.models import (
    ACTIVE_REBALANCE_STATES,
    DEFAULT_REPLICATION_THROTTLE,
    Cluster,
    Rebalance,
    RebalanceState,
)
from controlplane.clusters.tasks import request_reconcile
from controlplane.core.actors import Actor
from controlplane.core.errors import Conflict


@transaction.atomic
def rebalance_create(*, cluster: Cluster, actor: Actor | None, reason: str = "requested",
                     replication_throttle: int = DEFAULT_REPLICATION_THROTTLE) -> Rebalance:
    cluster = Cluster.objects.select_for_update().get(pk=cluster.pk)
    if cluster.deletion_requested_at is not None:
        raise Conflict("The cluster is being deleted.", code="cluster_deleting")
    active = Rebalance.objects.filter(cluster=cluster, state__in=ACTIVE_REBALANCE_STATES).first()
    if active is not None:
        raise Conflict(f"Rebalance {active.id} is still {active.state}: stop it or let it finish first.",
                       code="rebalance_active", extra={"rebalance": str(active.id)})
    rebalance = Rebalance.objects.create(cluster=cluster, reason=reason, replication_throttle=replication_throttle)
    if actor is not None:
        audit_record(tenant=cluster.tenant, actor=actor, action="rebalance.create", target_type="rebalance",
                     target_id=str(rebalance.id), data={"cluster": str(cluster.id), "reason": reason,
                                                        "replication_throttle": replication_throttle})
    _nudge(cluster)
    return rebalance


@transaction.atomic
def rebalance_approve(*, rebalance: Rebalance, actor: Actor) -> Rebalance:
    rebalance = Rebalance.objects.select_for_update().get(pk=rebalance.pk)
    if rebalance.approved_at is not None:
        raise Conflict("This rebalance was already approved.", code="already_approved")
    if rebalance.state != RebalanceState.PROPOSAL_READY:
        raise Conflict(f"Only a proposal that is ready can be approved; this one is {rebalance.state}.",
                       code="not_approvable")
    rebalance.approved_at = timezone.now()
    rebalance.save(update_fields=["approved_at", "updated_at"])
    audit_record(tenant=rebalance.cluster.tenant, actor=actor, action="rebalance.approve", target_type="rebalance",
                 target_id=str(rebalance.id), data={"moves": len(rebalance.proposal.get("moves", []))})
    _nudge(rebalance.cluster)
    return rebalance


@transaction.atomic
def rebalance_stop(*, rebalance: Rebalance, actor: Actor) -> Rebalance:
    rebalance = Rebalance.objects.select_for_update().get(pk=rebalance.pk)
    if rebalance.state not in ACTIVE_REBALANCE_STATES:
        raise Conflict(f"The rebalance is {rebalance.state}; there is nothing to stop.", code="not_active")
    if rebalance.stop_requested_at is None:
        rebalance.stop_requested_at = timezone.now()
        rebalance.save(update_fields=["stop_requested_at", "updated_at"])
        audit_record(tenant=rebalance.cluster.tenant, actor=actor, action="rebalance.stop", target_type="rebalance",
                     target_id=str(rebalance.id))
    _nudge(rebalance.cluster)
    return rebalance


@transaction.atomic
def rebalance_refresh(*, rebalance: Rebalance, actor: Actor) -> Rebalance:
    """Compute a fresh proposal (a ready proposal grows stale; a stopped or failed one can be retried)."""
    rebalance = Rebalance.objects.select_for_update().get(pk=rebalance.pk)
    if rebalance.state not in (RebalanceState.PROPOSAL_READY, RebalanceState.STOPPED, RebalanceState.NOT_READY):
        raise Conflict(f"A {rebalance.state} rebalance cannot be refreshed.", code="not_refreshable")
    if Rebalance.objects.filter(cluster=rebalance.cluster_id, state__in=ACTIVE_REBALANCE_STATES) \
            .exclude(pk=rebalance.pk).exists():
        raise Conflict("Another rebalance of this cluster is active.", code="rebalance_active")
    rebalance.refresh_requested_at = timezone.now()
    rebalance.approved_at = rebalance.stop_requested_at = None
    rebalance.save(update_fields=["refresh_requested_at", "approved_at", "stop_requested_at", "updated_at"])
    audit_record(tenant=rebalance.cluster.tenant, actor=actor, action="rebalance.refresh", target_type="rebalance",
                 target_id=str(rebalance.id))
    _nudge(rebalance.cluster)
    return rebalance


def _nudge(cluster: Cluster) -> None:
    request_reconcile(cluster)
