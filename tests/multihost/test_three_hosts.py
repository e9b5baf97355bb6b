"""An RF=3 cluster over three hosts (one broker each, one rack each), and a host cut off while producing."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from controlplane.tenancy.models import Role
from tests.controlplane.conftest import TenantWorld, make_world
from tests.multihost.conftest import MultiHostStack, multihost_stack
from tests.multihost.helpers import (
    Producing,
    assert_all_present,
    condition,
    create_ready,
    delete,
    healthy,
    partitions,
    status,
)

pytestmark = [pytest.mark.xdist_group("heavy"), pytest.mark.timeout(600)]

HOSTS = {"h1": "r1", "h2": "r2", "h3": "r3"}


@pytest.fixture(scope="module")
def stack(django_db_setup: None, django_db_blocker: Any) -> Iterator[MultiHostStack]:
    with multihost_stack(django_db_blocker, HOSTS) as made:
        yield made


def test_an_rf3_cluster_spreads_over_three_hosts_and_racks(stack: MultiHostStack) -> None:
    world = make_world(f"m{uuid.uuid4().hex[:6]}")
    body = create_ready(stack, world, "spread", "orders")
    cluster_id = str(body["id"])
    try:
        brokers = body["status"]["brokers"]
        by_host = {a.name: short for short, a in stack.agents.items()}
        assert sorted(by_host[b["host"]] for b in brokers) == ["h1", "h2", "h3"], "one broker per host"
        assert {b["rack"] for b in brokers} == {"r1", "r2", "r3"}
        # Each broker advertises its host's address and runs inside that host (its network namespace).
        assert set(body["status"]["bootstrap_servers"].split(",")) == {
            f"{stack.address(by_host[b['host']])}:{b['port']}" for b in brokers}
        for b in brokers:
            assert b["process"]["pid"] in stack.agents[by_host[b["host"]]].host.pids()

        # Rack-aware: every partition has its three replicas on three racks.
        kafka = world.kafka(body["status"]["bootstrap_servers"], Role.ADMIN)
        rack_of = {b["node_id"]: b["rack"] for b in brokers}
        for p in partitions(kafka, "orders").values():
            assert len(p.replicas) == 3 and {rack_of[r] for r in p.replicas} == {"r1", "r2", "r3"}

        # Clients in the root namespace produce and consume over the bridge.
        with Producing(kafka, "orders") as producing:
            stack.wait(lambda: producing.count() >= 100, 60, "100 acknowledged records")
        assert not producing.failed
        assert_all_present(stack, kafka, "orders", producing.acked)
    finally:
        delete(stack, world, cluster_id)


def _cut_while_producing(stack: MultiHostStack, rounds: int) -> None:
    """Cut a leader's host off while producing with acks=all; Degraded, leaders move, Ready again; no loss."""
    world = make_world(f"c{uuid.uuid4().hex[:6]}")
    body = create_ready(stack, world, "cut", "events")
    cluster_id = str(body["id"])
    try:
        kafka = world.kafka(body["status"]["bootstrap_servers"], Role.ADMIN)
        with Producing(kafka, "events") as producing:
            for round_ in range(rounds):
                wanted = 50 * (round_ + 1)
                stack.wait(lambda: producing.count() >= wanted, 60, "records acknowledged")  # noqa: B023
                # The host of some partition's leader, a different one each round.
                leaders = sorted({p.leader for p in partitions(kafka, "events").values()})
                _cut_one(stack, world, cluster_id, body["status"]["brokers"], leaders[round_ % len(leaders)],
                         producing)
        assert_all_present(stack, kafka, "events", producing.acked)
    finally:
        delete(stack, world, cluster_id)


def _cut_one(stack: MultiHostStack, world: TenantWorld, cluster_id: str, brokers: list[dict[str, Any]],
             node: int, producing: Producing) -> None:
    """Cut the host of broker ``node`` off, see the cluster react and keep acknowledging, then bring it back."""
    short = {a.name: s for s, a in stack.agents.items()}
    host = stack.agents[short[next(b["host"] for b in brokers if b["node_id"] == node)]].host
    # The other two brokers, to ask for metadata while the cut one cannot answer.
    reachable = {**world.kafka(",".join(f"{stack.address(short[b['host']])}:{b['port']}" for b in brokers
                                        if b["node_id"] != node), Role.ADMIN)}
    host.cut()
    try:
        stack.wait(lambda: condition(status(world, cluster_id), "Degraded") == "True", 60, "Degraded",
                   lambda: status(world, cluster_id)["status"]["conditions"])
        stack.wait(lambda: all(p.leader not in (node, -1) for p in partitions(reachable, "events").values()), 60,
                   f"leadership off broker {node}",
                   lambda: {i: (p.leader, p.isrs) for i, p in partitions(reachable, "events").items()})
        before = producing.count()
        stack.wait(lambda: producing.count() >= before + 50, 60, "records acknowledged with the host cut off")
    finally:
        host.restore()
    stack.wait(lambda: healthy(world, cluster_id), 120, "Ready and not Degraded after the link returned",
               lambda: status(world, cluster_id)["status"]["conditions"])


def test_a_host_cut_off_while_producing_loses_nothing_acknowledged(stack: MultiHostStack) -> None:
    _cut_while_producing(stack, rounds=1)


@pytest.mark.slow
def test_every_host_cut_off_in_turn_while_producing(stack: MultiHostStack) -> None:
    _cut_while_producing(stack, rounds=3)

