"""What an agent tells the control plane: that it is alive, and how its brokers are.

The agent is the only writer of ``Agent`` rows and of ``BrokerNode.process``;
reconcile only reads them (status and spec never share a write path).
"""

from __future__ import annotations

import logging
from dataclasses import asdict
from datetime import UTC, datetime

from django.db import transaction
from django.utils import timezone

from controlplane.agent.processes import NodeSpec, NodeState
from controlplane.clusters.models import Agent, BrokerNode

log = logging.getLogger(__name__)


def agent_register(*, host: str, rack: str, advertised_host: str, port_min: int, port_max: int) -> Agent:
    now = timezone.now()
    agent, _ = Agent.objects.update_or_create(host=host, defaults={
        "rack": rack, "advertised_host": advertised_host, "port_min": port_min, "port_max": port_max,
        "last_seen": now, "started_at": now})
    return agent


# ``last_seen`` of an agent that stopped cleanly: never placed on, and never taken for lost (it said goodbye,
# as a restart or an upgrade does, and comes back for its brokers).
STOPPED_AT = datetime(1970, 1, 1, tzinfo=UTC)


def agent_gone(host: str) -> None:
    """A stopping agent says so: placement must not pick it while its last heartbeat still looks fresh."""
    Agent.objects.filter(host=host).update(last_seen=STOPPED_AT)


def agent_heartbeat(host: str, *, rack: str, advertised_host: str, port_min: int, port_max: int) -> None:
    """Renew the registration; re-create it if it went missing (a database restored, a row deleted)."""
    if not Agent.objects.filter(host=host).update(last_seen=timezone.now()):
        agent_register(host=host, rack=rack, advertised_host=advertised_host, port_min=port_min, port_max=port_max)


def node_report(spec: NodeSpec, state: NodeState | None) -> None:
    """Record one node's process state (``None``: removed) and nudge its cluster's reconcile."""
    process = {"state": "Removed"} if state is None else asdict(state)
    updated = BrokerNode.objects.filter(cluster__kafka_cluster_id=spec.cluster, node_id=spec.node_id,
                                         agent_id=spec.host).update(process=process)
    if updated:
        from controlplane.clusters.tasks import enqueue_reconcile_by_kafka_id

        transaction.on_commit(lambda: enqueue_reconcile_by_kafka_id(spec.cluster))


def nodes_report(host: str, states: dict[tuple[str, int], NodeState]) -> None:
    """The periodic full report: every node this agent runs (repairs any lost single report)."""
    for (cluster, node_id), state in states.items():
        BrokerNode.objects.filter(cluster__kafka_cluster_id=cluster, node_id=node_id, agent_id=host) \
            .exclude(process=asdict(state)).update(process=asdict(state))
