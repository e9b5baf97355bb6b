"""A host lost for good: the control plane replaces its broker on a spare host and restores RF=3 there.

A host per rack; the cluster starts on h1..h3, the spare h4's agent joins later. The agent of a host
silent for SLUICE_AGENT_LOST_SECONDS (short here) is lost: reconcile places a replacement broker on h4, moves
the lost broker's replicas to it, and forgets the lost one.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from controlplane.clusters.models import BrokerNode
from controlplane.tenancy.models import Role
from tests.controlplane.conftest import TenantWorld, make_world
from tests.multihost.conftest import MultiHostStack, multihost_stack
from tests.multihost.helpers import Producing, assert_all_present, create_ready, delete, healthy, partitions, status

pytestmark = [pytest.mark.xdist_group("heavy"), pytest.mark.timeout(600)]

# h5 and h6: spares for the long test (it loses two hosts, after the short one lost h3).
HOSTS = {"h1": "r1", "h2": "r2", "h3": "r3", "h4": "r4", "h5": "r5", "h6": "r6"}
LOST_SECONDS = 12


@pytest.fixture(scope="module")
def stack(django_db_setup: None, django_db_blocker: Any) -> Iterator[MultiHostStack]:
    with multihost_stack(django_db_blocker, HOSTS, lost_seconds=LOST_SECONDS, start=("h1", "h2", "h3")) as made:
        yield made


def test_a_lost_hosts_broker_is_replaced_on_a_spare_host_and_rf3_restored(stack: MultiHostStack) -> None:
    world = make_world(f"l{uuid.uuid4().hex[:6]}")
    body = create_ready(stack, world, "lost", "ledger")
    cluster_id = str(body["id"])
    short = {a.name: s for s, a in stack.agents.items()}
    try:
        kafka = world.kafka(body["status"]["bootstrap_servers"], Role.ADMIN)
        lost_node = next(b["node_id"] for b in body["status"]["brokers"] if short[b["host"]] == "h3")
        if "h4" not in stack.started:
            stack.start_agent("h4")  # the spare joins; nothing is placed on it while the cluster is whole
        with Producing(kafka, "ledger") as producing:
            stack.wait(lambda: producing.count() >= 100, 60, "records acknowledged before the loss")
            stack.lose("h3")
            before = producing.count()
            stack.wait(lambda: producing.count() >= before + 100, 90, "records acknowledged after the loss")

            def replaced() -> dict[str, Any] | None:
                now = healthy(world, cluster_id)
                if now is None or sorted(short[b["host"]] for b in now["status"]["brokers"]) != ["h1", "h2", "h4"]:
                    return None
                return now

            body = stack.wait(replaced, 240, "Ready again on h1, h2 and h4",
                              lambda: (status(world, cluster_id)["status"].get("conditions"),
                                       list(BrokerNode.objects.filter(cluster_id=cluster_id)
                                            .values_list("node_id", "agent_id", "removal_requested_at"))))
        brokers = body["status"]["brokers"]
        assert lost_node not in {b["node_id"] for b in brokers} and not any(b["retiring"] for b in brokers)
        # RF=3 restored: every partition of the topic (and the internal ones) on the three live brokers, on three
        # racks, all in sync.
        kafka = world.kafka(body["status"]["bootstrap_servers"], Role.ADMIN)
        rack_of = {b["node_id"]: b["rack"] for b in brokers}
        for p in partitions(kafka, "ledger").values():
            assert sorted(p.replicas) == sorted(rack_of) and sorted(p.isrs) == sorted(rack_of), p
            assert {rack_of[r] for r in p.replicas} == {"r1", "r2", "r4"}
        assert not producing.failed, producing.failed[:5]
        assert_all_present(stack, kafka, "ledger", producing.acked)
    finally:
        delete(stack, world, cluster_id)


def _hosts(stack: MultiHostStack, body: dict[str, Any]) -> list[str]:
    short = {a.name: s for s, a in stack.agents.items()}
    return sorted(short[b["host"]] for b in body["status"]["brokers"])


def _lose_one(stack: MultiHostStack, world: TenantWorld, cluster_id: str, body: dict[str, Any],
              producing: Producing) -> dict[str, Any]:
    """Lose the last (by name) of the cluster's hosts, a spare started if none is free; the body once repaired."""
    hosts = _hosts(stack, body)
    if not set(stack.live()) - set(hosts):
        stack.start_agent(next(n for n in HOSTS if n not in stack.started))
    victim = hosts[-1]
    stack.lose(victim)
    survivors = set(hosts) - {victim}
    before = producing.count()
    stack.wait(lambda: producing.count() >= before + 50, 90, f"records acknowledged without {victim}")

    def replaced() -> dict[str, Any] | None:
        now = healthy(world, cluster_id)
        placed = set(_hosts(stack, now)) if now else set()
        return now if len(placed) == 3 and survivors < placed and victim not in placed else None

    repaired: dict[str, Any] = stack.wait(replaced, 240, f"Ready again without {victim}",
                                          lambda: status(world, cluster_id)["status"].get("conditions"))
    return repaired


@pytest.mark.slow
def test_two_hosts_lost_one_after_the_other_while_producing(stack: MultiHostStack) -> None:
    """Each loss is repaired on a spare before the next: the cluster ends Ready at RF=3, nothing acked lost."""
    for name in HOSTS:  # four live hosts: the cluster's three and a spare
        if len(stack.live()) < 4 and name not in stack.started:
            stack.start_agent(name)
    world = make_world(f"k{uuid.uuid4().hex[:6]}")
    body = create_ready(stack, world, "lost2", "journal")
    cluster_id = str(body["id"])
    try:
        kafka = world.kafka(body["status"]["bootstrap_servers"], Role.ADMIN)
        with Producing(kafka, "journal") as producing:
            stack.wait(lambda: producing.count() >= 100, 60, "records acknowledged")
            for _ in range(2):
                body = _lose_one(stack, world, cluster_id, body, producing)
        brokers = body["status"]["brokers"]
        rack_of = {b["node_id"]: b["rack"] for b in brokers}
        kafka = world.kafka(body["status"]["bootstrap_servers"], Role.ADMIN)
        for p in partitions(kafka, "journal").values():
            assert sorted(p.replicas) == sorted(rack_of) and sorted(p.isrs) == sorted(rack_of), p
            assert len({rack_of[r] for r in p.replicas}) == 3
        assert_all_present(stack, kafka, "journal", producing.acked)
    finally:
        delete(stack, world, cluster_id)
