"""The controller's pass: re-elect leaders and trim ISRs after brokers' leases lapse or return,
and finish partition reassignments whose new replicas have caught up.

Runs on the metadata thread of the broker holding the controller lease. The
decisions are the pure rules of ``election``; the writes are fenced by the
controller epoch and compare each partition's epoch, so a controller that lost
its lease (paused, cut off) changes nothing, and a leader's concurrent ISR
change is never overwritten.
"""

from __future__ import annotations

from dataplane.cluster.election import after_liveness_change, complete_reassignment
from dataplane.cluster.store import MetadataStore, PartitionChange
from dataplane.config.resolver import unclean_leader_election_enable


def elect_leaders_for_liveness(store: MetadataStore, node_id: int, controller_epoch: int) -> int:
    """One pass over every partition; returns how many changed."""
    live = {b.node_id for b in store.live_brokers()}
    defaults = store.cluster_configs()
    changes: list[PartitionChange] = []
    for topic in store.topics():
        unclean = unclean_leader_election_enable(topic.configs, defaults)
        for state in topic.partitions:
            election = after_liveness_change(state, live, unclean=unclean)
            if election is not None:
                changes.append(PartitionChange(topic.topic_id, state.partition, state.partition_epoch,
                                               election.leader, election.isr, election.leader_changed))
                continue
            moved = complete_reassignment(state, live)
            if moved is not None:
                changes.append(PartitionChange(topic.topic_id, state.partition, state.partition_epoch, moved.leader,
                                               moved.isr, moved.leader_changed, moved.replicas, (), ()))
    return store.apply_partition_changes(node_id, controller_epoch, changes) if changes else 0
