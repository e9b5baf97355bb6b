"""The nodes step: place, start, move, retire and remove a cluster's brokers (``node_plan`` decides).

Observes the cluster's ``BrokerNode`` rows, the agents' heartbeats and reports, and the dataplane's metadata
store (which brokers hold a lease); plans with the pure :func:`node_plan.plan_nodes`; applies each action,
idempotently. Orders reach a host's agent as Celery tasks sent by name to its ``agent.<host>`` queue, so the
control plane never imports the agent's code (the agent sits below it).
"""

from __future__ import annotations

import logging
from dataclasses import asdict
from datetime import timedelta

from celery import current_app
from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from controlplane.agent.processes import NodeSpec
from controlplane.clusters import internal_secrets, metadata
from controlplane.clusters.agents import STOPPED_AT
from controlplane.clusters.credentials import tls_enabled
from controlplane.clusters.models import Agent, BrokerNode, Cluster
from controlplane.clusters.plans import PLAN_LIMITS
from controlplane.clusters.tiering import tiering_enabled
from controlplane.reconcile.draining import drain
from controlplane.reconcile.node_plan import (
    Action,
    AgentView,
    ClusterView,
    Drain,
    DropMetadata,
    Ensure,
    Finalize,
    Forget,
    NoCapacity,
    NodeView,
    Place,
    Repoint,
    Retire,
    Stop,
    plan_nodes,
)
from controlplane.reconcile.results import NodesResult

log = logging.getLogger(__name__)

AGENT_LIVE_SECONDS = 10
ENSURE_BROKER = "agent.ensure_broker"  # the agent's task names (controlplane.agent.tasks)
REMOVE_BROKER = "agent.remove_broker"


def _agent_views() -> dict[str, AgentView]:
    fresh = timezone.now() - timedelta(seconds=AGENT_LIVE_SECONDS)
    ports: dict[str, set[int]] = {}
    for host, port in BrokerNode.objects.values_list("agent_id", "port"):
        ports.setdefault(host, set()).add(port)
    # multi-host: an agent silent past SLUICE_AGENT_LOST_SECONDS (not one that stopped cleanly) is lost.
    lost_before = timezone.now() - timedelta(seconds=settings.SLUICE_AGENT_LOST_SECONDS)
    return {a.host: AgentView(a.host, a.rack, a.last_seen >= fresh, a.port_min, a.port_max,
                              frozenset(ports.get(a.host, ())), len(ports.get(a.host, ())),
                              lost=STOPPED_AT < a.last_seen < lost_before)
            for a in Agent.objects.all()}


def observe(cluster: Cluster, *, resync: bool = False) -> tuple[ClusterView, list[BrokerNode]]:
    """The cluster's brokers as the planner sees them, and their rows."""
    nodes = list(BrokerNode.objects.filter(cluster=cluster).select_related("agent"))
    registration = metadata.registration(cluster.kafka_cluster_id) if nodes else metadata.Registration()
    views = tuple(NodeView(n.node_id, n.agent_id, n.port, n.rack, n.removal_requested_at is not None,
                           n.process.get("state"), registration.registered(n.node_id, n.process.get("started")),
                           registration.replicas.get(n.node_id, 0)) for n in nodes)
    return ClusterView(cluster.broker_count, cluster.deletion_requested_at is not None, views,
                       tuple(_agent_views().values()), resync), nodes


def node_spec(cluster: Cluster, node: BrokerNode) -> NodeSpec:
    # listen_host and the metadata URL are the agent's own (they differ per host); it fills them in.
    return NodeSpec(cluster=cluster.kafka_cluster_id, node_id=node.node_id, host=node.agent_id, listen_host="",
                    advertised_host=node.agent.advertised_host, port=node.port, metadata_url="",
                    rack=node.rack or None, secure=True, tls=tls_enabled(), secrets_version=node.secrets_version,
                    max_connections_per_key=PLAN_LIMITS[cluster.plan].max_connections_per_key,
                    tiered_storage=tiering_enabled(cluster))


def send_ensure(cluster: Cluster, node: BrokerNode) -> None:
    """Ask the node's agent to run it as its spec says (idempotent: re-sent on every resync)."""
    current_app.send_task(ENSURE_BROKER, args=[asdict(node_spec(cluster, node))], queue=node.agent.queue)


def send_remove(cluster: Cluster, node: BrokerNode) -> None:
    current_app.send_task(REMOVE_BROKER, args=[node.agent_id, cluster.kafka_cluster_id, node.node_id, True],
                          queue=node.agent.queue)


def apply(cluster: Cluster, actions: list[Action], nodes: list[BrokerNode]) -> tuple[bool, str]:
    """Carry out the actions; returns (whether the cluster row was finalized, a capacity problem or '')."""
    by_id = {n.node_id: n for n in nodes}
    problem = ""
    for action in actions:
        if isinstance(action, Place):
            try:
                with transaction.atomic():
                    node = BrokerNode.objects.create(cluster=cluster, node_id=action.node_id, agent_id=action.host,
                                                     port=action.port, rack=action.rack,
                                                     secrets_version=internal_secrets.current_version(cluster))
            except IntegrityError:  # another cluster took the port meanwhile: the next pass places again
                continue
            send_ensure(cluster, BrokerNode.objects.select_related("agent").get(pk=node.pk))
        elif isinstance(action, Repoint):
            try:
                with transaction.atomic():
                    BrokerNode.objects.filter(pk=by_id[action.node_id].pk).update(port=action.port)
            except IntegrityError:  # the port went to another node meanwhile: the next pass picks again
                continue
            by_id[action.node_id].port = action.port
        elif isinstance(action, Ensure):
            send_ensure(cluster, by_id[action.node_id])
        elif isinstance(action, Retire):
            BrokerNode.objects.filter(cluster=cluster, node_id__in=action.node_ids,
                                      removal_requested_at__isnull=True).update(removal_requested_at=timezone.now())
        elif isinstance(action, Drain):
            drain(cluster, set(action.node_ids))
        elif isinstance(action, Stop):
            send_remove(cluster, by_id[action.node_id])
        elif isinstance(action, Forget):
            BrokerNode.objects.filter(pk=by_id[action.node_id].pk).delete()
        elif isinstance(action, DropMetadata):
            metadata.drop(cluster.kafka_cluster_id)
        elif isinstance(action, Finalize):
            Cluster.objects.filter(pk=cluster.pk).delete()
            return True, ""
        elif isinstance(action, NoCapacity):
            problem = action.message
    return False, problem


def run(cluster: Cluster, *, resync: bool) -> tuple[NodesResult, list[BrokerNode]]:
    """Observe, plan, apply; the result carries the view as the actions left it (re-observed if any ran)."""
    view, nodes = observe(cluster, resync=resync)
    actions = plan_nodes(view)
    finalized, problem = apply(cluster, actions, nodes)
    if finalized:
        log.info("cluster %s (%s) deleted", cluster.name, cluster.kafka_cluster_id)
        return NodesResult(view, finalized=True), nodes
    if actions:  # re-observe what the actions changed (new nodes, retirements)
        view, nodes = observe(cluster)
    return NodesResult(view, problem=problem), nodes
