"""The controller's pass: re-elect leaders and trim ISRs after brokers' leases lapse or return,
and finish partition reassignments whose new replicas have caught up.

Runs on the metadata thread of the broker holding the controller lease. The
decisions are the pure rules of ``election``; the writes are fenced by the
controller epoch and compare each partition's epoch, so a controller that lost
its lease (paused, cut off) changes nothing, and a leader's concurrent ISR
change is never overwritten.

A full pass reads every partition of the cluster, so it runs only when its inputs moved: the set of live brokers
(leases lapse without a write, so it is read every tick) or the metadata version (every write bumps it: ISR
changes, reassignments, configs, topics), and at least every ``FULL_PASS_SECONDS`` besides. At 5,000 topics a
pass every half second cost a third of the broker's CPU and stalled its requests for up to a second.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

import psycopg

from dataplane.cluster.election import after_liveness_change, complete_reassignment
from dataplane.cluster.lease import BrokerLease
from dataplane.cluster.metadata_cache import MetadataCache
from dataplane.cluster.store import MetadataStore, PartitionChange
from dataplane.cluster.store_thread import StoreThread
from dataplane.config.resolver import unclean_leader_election_enable
from dataplane.protocol.errors import KafkaError

log = logging.getLogger(__name__)


FULL_PASS_SECONDS = 30.0


@dataclass(frozen=True, slots=True)
class PassInputs:
    """What a pass's decisions depend on besides time: who is alive, and the metadata as of a version."""

    live: frozenset[int]
    metadata_version: int


def elect_leaders_for_liveness(store: MetadataStore, node_id: int, controller_epoch: int,
                               unchanged_since: PassInputs | None = None) -> tuple[int, PassInputs]:
    """One pass over every partition, unless its inputs are still ``unchanged_since``; returns how many
    partitions changed and the inputs it saw (the version is read before the partitions, so a write landing
    in between only causes one more pass)."""
    live = frozenset(b.node_id for b in store.live_brokers())
    inputs = PassInputs(live, store.metadata_version())
    if inputs == unchanged_since:
        return 0, inputs
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
    changed = store.apply_partition_changes(node_id, controller_epoch, changes) if changes else 0
    return changed, inputs


class ControllerLoop:
    """Holds or contends for the controller lease; while holding it, re-elects leaders of dead brokers.

    Owned by the broker; its loop runs on the broker's event loop and its store calls on the metadata thread.
    """

    def __init__(self, db: StoreThread, metadata: MetadataCache, lease: BrokerLease, *,
                 on_change: Callable[[], None]) -> None:
        self.db, self.metadata, self.lease = db, metadata, lease
        self._on_change = on_change  # partitions moved: re-read metadata

    async def run(self) -> None:
        interval = min(0.5, self.lease.lease_seconds / 4)
        node_id = self.metadata.node_id
        seen: PassInputs | None = None  # the inputs of the last full pass, at ``seen_epoch``
        seen_epoch, seen_at = -1, 0.0
        while True:
            try:
                if self.lease.ok():
                    holder, epoch = await self.db.call(self.db.store.acquire_controller, node_id,
                                                       self.lease.lease_seconds)
                    if holder == node_id and epoch != self.metadata.controller_epoch:
                        log.info("broker %d is the controller at epoch %d", holder, epoch)
                    self.metadata.update_controller(holder, epoch)
                    if holder == node_id:
                        now = time.monotonic()
                        fresh = epoch != seen_epoch or now - seen_at >= FULL_PASS_SECONDS
                        changed, inputs = await self.db.call(elect_leaders_for_liveness, self.db.store, holder,
                                                             epoch, None if fresh else seen)
                        if inputs != seen or fresh:
                            seen, seen_epoch, seen_at = inputs, epoch, now
                        if changed:
                            log.info("controller moved leadership of %d partitions", changed)
                            self._on_change()
            except (psycopg.Error, KafkaError) as exc:
                log.warning("controller pass failed (will retry): %s", exc)
            await asyncio.sleep(interval)
