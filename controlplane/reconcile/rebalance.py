"""The rebalance step: carry out the cluster's active rebalance, one step per reconcile pass.

A rebalance goes New -> PendingProposal -> ProposalReady -> (approve) -> Rebalancing -> Ready, or to Stopped
(asked) or NotReady (the cluster refused; a refresh tries again), as Strimzi's KafkaRebalance does. The
proposal comes from :func:`controlplane.clusters.balance.propose` over what the cluster reports; execution is
one AlterPartitionReassignments batch, followed until nothing is moving, then a preferred-leader election.
The API side (request, approve, stop, refresh) is :mod:`controlplane.clusters.rebalancing`.
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from typing import Any

from django.utils import timezone

from controlplane.clusters.balance import BrokerSlot, Placement, Proposal, propose
from controlplane.clusters.models import ACTIVE_REBALANCE_STATES, BrokerNode, Cluster, Rebalance, RebalanceState
from controlplane.reconcile.context import PassContext
from controlplane.reconcile.results import RebalanceResult
from dataplane.client.admin import AdminError, ClusterAdmin

log = logging.getLogger(__name__)


def _set(rebalance: Rebalance, state: str, message: str = "", **fields: Any) -> None:
    """Status write: only the reconcile-owned fields."""
    Rebalance.objects.filter(pk=rebalance.pk).update(state=state, message=message, updated_at=timezone.now(),
                                                     **fields)
    rebalance.state = state


def _key(topic: str, partition: int) -> str:
    return f"{topic}/{partition}"


def not_yet_proposable(wanted: int, nodes: Collection[int], registered: Collection[int]) -> str | None:
    """Why a proposal must wait, or None: it is computed over the brokers the spec asks for, once they serve.

    A pass that observed the cluster before a scale-out was committed would otherwise balance over the old
    brokers and conclude there is nothing to move; a broker the control plane placed but that has not yet
    registered with the cluster cannot take replicas either.
    """
    if len(nodes) != wanted:
        return f"Waiting for the cluster to have its {wanted} broker(s) ({len(nodes)} placed)."
    missing = sorted(set(nodes) - set(registered))
    if missing:
        return f"Waiting for broker(s) {', '.join(map(str, missing))} to register with the cluster."
    return None


def proposal_for(cluster: Cluster, admin: ClusterAdmin) -> Proposal:
    nodes = BrokerNode.objects.filter(cluster=cluster, removal_requested_at__isnull=True)
    sizes: dict[tuple[str, int], int] = {}
    for size in admin.partition_sizes():
        key = (size.topic, size.partition)
        sizes[key] = max(sizes.get(key, 0), size.size_bytes)
    placements = [Placement(name, p.partition, p.replicas, sizes.get((name, p.partition), 0))
                  for name, topic in admin.topics(include_internal=True).items() for p in topic.partitions]
    return propose([BrokerSlot(n.node_id, n.rack or None) for n in nodes], placements)


def _proposal_json(proposal: Proposal) -> dict[str, Any]:
    def loads(items: Any) -> list[dict[str, int]]:
        return [{"node_id": b.node_id, "replicas": b.replicas, "leaders": b.leaders, "bytes": b.bytes}
                for b in items]

    return {
        "moves": [{"topic": m.topic, "partition": m.partition, "current": list(m.current), "target": list(m.target),
                   "bytes_to_copy": m.bytes_to_copy} for m in proposal.moves],
        "summary": {"replica_moves": proposal.replica_moves, "leader_moves": proposal.leader_moves,
                    "bytes_to_copy": proposal.bytes_to_copy, "partitions": len(proposal.moves)},
        "before": loads(proposal.before),
        "after": loads(proposal.after),
    }


def reconcile_rebalances(cluster: Cluster, admin: ClusterAdmin) -> bool:
    """Advance the cluster's active rebalance one step; returns whether one is still in progress."""
    rebalance = Rebalance.objects.filter(cluster=cluster, state__in=ACTIVE_REBALANCE_STATES).first()
    if rebalance is None:
        rebalance = Rebalance.objects.filter(cluster=cluster, refresh_requested_at__isnull=False).exclude(
            state__in=ACTIVE_REBALANCE_STATES).first()
        if rebalance is None:
            return False
        _set(rebalance, RebalanceState.PENDING_PROPOSAL, "Computing a fresh proposal.", refresh_requested_at=None,
             progress={})
    try:
        return _step(cluster, admin, rebalance)
    except AdminError as exc:
        if exc.retriable:  # a slow or restarting broker: the same step is tried again on the next pass
            _set(rebalance, rebalance.state, f"Retrying after {exc.code}: {exc.message}")
            return True
        _set(rebalance, RebalanceState.NOT_READY, f"{exc.code}: {exc.message}")
        return False


THROTTLE = "follower.replication.throttled.rate"


def _throttle(admin: ClusterAdmin, rate: int | None) -> None:
    """Set (or with None, remove) the replication throttle on every live broker, as Kafka's reassign tool does.

    Idempotent: a step repeated after a crash sets the same value again; the throttle is removed before the
    rebalance is marked Ready or Stopped, so a finished rebalance never leaves one behind.
    """
    for broker in admin.describe_cluster().brokers:
        if rate:
            admin.alter_broker_configs(broker.node_id, {THROTTLE: str(rate)})
        else:
            admin.alter_broker_configs(broker.node_id, {}, delete=[THROTTLE])


def _step(cluster: Cluster, admin: ClusterAdmin, rebalance: Rebalance) -> bool:
    rebalance.refresh_from_db()
    if rebalance.stop_requested_at is not None:
        if rebalance.state == RebalanceState.REBALANCING:
            moving = admin.list_reassignments()
            if moving:
                admin.alter_reassignments({key: None for key in moving})
            _throttle(admin, None)
            progress = {k: ("cancelled" if v != "done" else v) for k, v in rebalance.progress.items()}
            _set(rebalance, RebalanceState.STOPPED, "Stopped; partitions still moving were put back.",
                 progress=progress)
        else:
            if rebalance.approved_at is not None:
                _throttle(admin, None)  # the approval step may have set it before a crash
            _set(rebalance, RebalanceState.STOPPED, "Stopped before it started.")
        return False
    if rebalance.state in (RebalanceState.NEW, RebalanceState.PENDING_PROPOSAL):
        if admin.list_reassignments():
            _set(rebalance, RebalanceState.PENDING_PROPOSAL, "Waiting for partitions already moving.")
            return True
        spec = Cluster.objects.values_list("spec", flat=True).get(pk=cluster.pk)  # the pass's copy may be older
        placed = BrokerNode.objects.filter(cluster=cluster, removal_requested_at__isnull=True) \
            .values_list("node_id", flat=True)
        waiting = not_yet_proposable(int(spec.get("broker_count", 0)), list(placed),
                                     [b.node_id for b in admin.describe_cluster().brokers])
        if waiting:
            _set(rebalance, RebalanceState.PENDING_PROPOSAL, waiting)
            return True
        proposal = proposal_for(cluster, admin)
        if proposal.is_empty:
            _set(rebalance, RebalanceState.READY, "The cluster is already balanced: nothing to move.",
                 proposal=_proposal_json(proposal))
            return False
        _set(rebalance, RebalanceState.PROPOSAL_READY,
             f"{len(proposal.moves)} partition(s) to change; approve to start.", proposal=_proposal_json(proposal))
        return False  # waits for a person: no passes needed until the approval nudges one
    if rebalance.state == RebalanceState.PROPOSAL_READY:
        if rebalance.approved_at is None:
            return False
        moves = rebalance.proposal.get("moves", [])
        targets = {(m["topic"], m["partition"]): m["target"] for m in moves if m["current"] != m["target"]
                   and set(m["current"]) != set(m["target"])}
        if targets:
            _throttle(admin, rebalance.replication_throttle)
        results = admin.alter_reassignments(targets) if targets else {}
        progress = {_key(m["topic"], m["partition"]): "moving" if (m["topic"], m["partition"]) in targets else "done"
                    for m in moves}
        failed = {k: v for k, v in results.items() if v is not None}
        for (topic, partition), error in failed.items():
            progress[_key(topic, partition)] = f"failed: {error.code}"
        _set(rebalance, RebalanceState.REBALANCING, f"Moving {len(targets) - len(failed)} partition(s).",
             progress=progress)
        return True
    if rebalance.state == RebalanceState.REBALANCING:
        moving = admin.list_reassignments()
        progress = dict(rebalance.progress)
        for key, value in progress.items():
            topic, _, partition = key.rpartition("/")
            if value == "moving" and (topic, int(partition)) not in moving:
                progress[key] = "done"
        if moving:
            done = sum(1 for v in progress.values() if v == "done")
            _set(rebalance, RebalanceState.REBALANCING, f"{done} of {len(progress)} partition(s) done.",
                 progress=progress)
            return True
        _throttle(admin, None)
        leaders = [(m["topic"], m["partition"]) for m in rebalance.proposal.get("moves", [])]
        admin.elect_preferred_leaders(leaders)
        refused = [k for k, v in progress.items() if v.startswith("failed")]
        message = (f"Done: {len(progress)} partition(s) changed and preferred leaders elected." if not refused else
                   f"Done with {len(refused)} partition(s) refused by the cluster: {', '.join(refused[:5])}.")
        _set(rebalance, RebalanceState.READY, message, progress=progress)
        return False
    return False


def run(ctx: PassContext) -> RebalanceResult:
    """One step of the cluster's active (or refreshed) rebalance, if any, with the pass's admin client."""
    cluster = ctx.cluster
    if not Rebalance.objects.filter(cluster=cluster, state__in=ACTIVE_REBALANCE_STATES).exists() \
            and not Rebalance.objects.filter(cluster=cluster, refresh_requested_at__isnull=False).exists():
        return RebalanceResult()
    try:
        return RebalanceResult(in_progress=reconcile_rebalances(cluster, ctx.admin()))
    except AdminError as exc:
        log.warning("cluster %s: rebalance step failed: %s", cluster.kafka_cluster_id, exc)
        return RebalanceResult(in_progress=True, errors=(f"rebalance: {exc.code}: {exc.message}",))
