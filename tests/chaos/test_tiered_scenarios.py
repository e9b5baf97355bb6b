"""Fault scenarios against a 3-broker cluster whose topic tiers to the object store (decision 0032).

Tiny segments and local retention, so uploads, local deletions and remote reads happen all through the faults;
the final read goes from offset 0, mostly through the remote tier, and the checker finds every acknowledged
write once. The default suite runs the schedule once, short; ``make chaos`` runs it for ``CHAOS_ROUNDS``.
"""

from __future__ import annotations

import signal
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from sluice.objectstore import ObjectStoreServer
from tests.chaos.cluster import Cluster
from tests.chaos.test_scenarios import ROUNDS, TOPIC, Run, after_leader_loss, kill_and_restart
from tests.dataplane.tiered.conftest import EARLIEST_LOCAL, list_offset, remote_args

pytestmark = [pytest.mark.xdist_group("heavy"), pytest.mark.timeout(600 * max(1, ROUNDS // 5))]
TIERED = {"remote.storage.enable": "true", "segment.bytes": "4096", "local.retention.bytes": "8192"}


@pytest.fixture
def tiered_cluster(tmp_path: Path, object_store: ObjectStoreServer) -> Iterator[Cluster]:
    found = Cluster(tmp_path, extra_args=remote_args(object_store, f"chaos-{uuid.uuid4().hex[:10]}", 200))
    try:
        found.start()
        yield found
    finally:
        found.stop()


def test_tiered_leaders_killed_and_followers_restarted(tiered_cluster: Cluster, tmp_path: Path) -> None:
    def faults(run: Run) -> None:
        for _ in range(2 * ROUNDS):
            partition = run.rng.randrange(run.partitions)
            leader = run.leader(partition)
            run.history.note(f"SIGKILL leader {leader.node_id} of partition {partition}")
            leader.kill(signal.SIGKILL)
            after_leader_loss(run, leader, partition)
            follower = run.cluster.nodes[run.rng.choice(
                [n for n in run.cluster.nodes if n != run.leader(partition).node_id])]
            kill_and_restart(run, follower, signal.SIGKILL)
    run = Run(tiered_cluster, tmp_path, configs=TIERED)
    run.execute(faults)
    # The final read from offset 0 went through the remote tier: the leaders' local logs start well above 0.
    for partition in range(run.partitions):
        leader = run.leader(partition)
        assert list_offset(leader.port, TOPIC, EARLIEST_LOCAL, partition) > 0
