"""Scale-in: move every replica off the brokers being removed, before they stop.

One batch of reassignments at a time: while the cluster still has some in
flight this does nothing, and reconcile comes back. The moves come from the same
proposal the rebalancer uses, with the retiring brokers removed.
"""

from __future__ import annotations

import logging

from controlplane.clusters.balance import BrokerSlot, Placement, propose
from controlplane.clusters.kafka_clients import admin_as_internal
from controlplane.clusters.models import BrokerNode, Cluster

log = logging.getLogger(__name__)


def drain(cluster: Cluster, node_ids: set[int]) -> int:
    """Start moving replicas off ``node_ids``; returns how many partitions were sent to move."""
    nodes = list(BrokerNode.objects.filter(cluster=cluster).select_related("agent"))
    bootstrap = ",".join(f"{n.agent.advertised_host}:{n.port}" for n in nodes)
    with admin_as_internal(cluster, bootstrap=bootstrap) as admin:
        if admin.list_reassignments():
            return 0
        placements = [Placement(name, p.partition, p.replicas)
                      for name, topic in admin.topics(include_internal=True).items() for p in topic.partitions]
        proposal = propose([BrokerSlot(n.node_id, n.rack or None) for n in nodes], placements, remove=node_ids)
        targets = {(m.topic, m.partition): m.target for m in proposal.moves if set(m.current) & node_ids}
        if targets:
            log.info("cluster %s: moving %d partition(s) off brokers %s", cluster.kafka_cluster_id, len(targets),
                     sorted(node_ids))
            admin.alter_reassignments(targets)
        return len(targets)
