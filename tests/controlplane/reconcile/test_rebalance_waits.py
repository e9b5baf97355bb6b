"""A rebalance proposal waits for the brokers the spec asks for to be placed and registered.

A scale-out's proposal computed by a pass that observed the cluster before the scale-out was committed, or before
the new broker registered, balanced over the old brokers and concluded "already balanced". The slow-registration
order is forced here: the spec asks for two brokers while only one is placed, then while the second is placed but
never registers with the (real, one-broker) cluster.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from controlplane.clusters.kafka_clients import admin_as_internal
from controlplane.clusters.models import Agent, BrokerNode, Cluster, Rebalance, RebalanceState
from controlplane.reconcile.rebalance import not_yet_proposable, reconcile_rebalances
from tests.controlplane.factories import ClusterFactory
from tests.support.broker import BrokerProcess
from tests.support.secured_broker import secured_broker, store_secrets


@pytest.mark.parametrize(("wanted", "nodes", "registered", "expected"), [
    (3, [1, 2, 3], [1, 2, 3], None),
    (3, [1, 2, 3], [3, 2, 1, 9], None),  # a broker the control plane no longer places does not hold it up
    (4, [1, 2, 3], [1, 2, 3], "Waiting for the cluster to have its 4 broker(s) (3 placed)."),
    (4, [1, 2, 3, 4], [1, 2, 3], "Waiting for broker(s) 4 to register with the cluster."),
    (4, [1, 2, 3, 4, 5], [1, 2, 3, 4, 5], "Waiting for the cluster to have its 4 broker(s) (5 placed)."),
    (5, [1, 2, 3, 4, 5], [1, 3], "Waiting for broker(s) 2, 4, 5 to register with the cluster."),
])
def test_when_a_proposal_may_be_computed(wanted: int, nodes: list[int], registered: list[int],
                                         expected: str | None) -> None:
    assert not_yet_proposable(wanted, nodes, registered) == expected


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """A broker configured as a managed cluster's are (SASL, the authorizer, the cluster's internal super user)."""
    with secured_broker(tmp_path_factory.mktemp("rebalance-waits"), f"test-{uuid.uuid4().hex[:12]}") as process:
        yield process


@pytest.mark.django_db
def test_a_scale_out_proposal_waits_for_the_new_broker_to_register(broker: BrokerProcess) -> None:
    agent = Agent.objects.create(host=f"h-{uuid.uuid4().hex[:6]}", advertised_host="127.0.0.1", port_min=1,
                                 port_max=100, last_seen="2024-01-01T00:00Z", started_at="2024-01-01T00:00Z")
    cluster = ClusterFactory(kafka_cluster_id=broker.cluster_id, plan="dedicated",
                             spec={"broker_count": 1, "max_partitions": 100})
    store_secrets(cluster)
    BrokerNode.objects.create(cluster=cluster, node_id=1, agent=agent, port=1)
    stale = Cluster.objects.get(pk=cluster.pk)  # what a pass that started before the scale-out holds
    Cluster.objects.filter(pk=cluster.pk).update(spec={"broker_count": 2, "max_partitions": 100})
    rebalance = Rebalance.objects.create(cluster=cluster, reason="scale-out")

    def step() -> bool:
        with admin_as_internal(stale, bootstrap=broker.bootstrap) as admin:
            return reconcile_rebalances(stale, admin)

    assert step() is True  # passes keep coming while it waits
    rebalance.refresh_from_db()
    assert (rebalance.state, rebalance.message) == (
        RebalanceState.PENDING_PROPOSAL, "Waiting for the cluster to have its 2 broker(s) (1 placed).")
    BrokerNode.objects.create(cluster=cluster, node_id=2, agent=agent, port=2)  # placed, never registers
    assert step() is True
    rebalance.refresh_from_db()
    assert (rebalance.state, rebalance.message) == (
        RebalanceState.PENDING_PROPOSAL, "Waiting for broker(s) 2 to register with the cluster.")
    assert rebalance.proposal == {}
    # The scale-out is taken back: the proposal is computed over the one broker that serves.
    BrokerNode.objects.filter(cluster=cluster, node_id=2).delete()
    Cluster.objects.filter(pk=cluster.pk).update(spec={"broker_count": 1, "max_partitions": 100})
    assert step() is False
    rebalance.refresh_from_db()
    assert rebalance.state == RebalanceState.READY
    assert [b["node_id"] for b in rebalance.proposal["after"]] == [1]
