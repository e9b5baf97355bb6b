"""Rebalance requests through the API: one active per cluster, approvals only of ready proposals."""

from __future__ import annotations

import pytest

from controlplane.clusters.models import Rebalance, RebalanceState
from controlplane.tenancy.models import Role
from tests.controlplane.conftest import TenantWorld
from tests.controlplane.factories import ClusterFactory

pytestmark = pytest.mark.django_db


def test_rebalance_requests_are_checked(world_a: TenantWorld) -> None:
    cluster = ClusterFactory(tenant=world_a.tenant)
    base = f"{world_a.base}/clusters/{cluster.pk}/rebalances"
    admin = world_a.client(Role.ADMIN)
    assert world_a.client(Role.MEMBER).post(base).status_code == 403
    first = admin.post(base)
    assert first.status_code == 201 and first.json()["state"] == "New"
    again = admin.post(base)
    assert again.status_code == 409 and again.json()["code"] == "rebalance_active"
    rid = first.json()["id"]
    early = admin.post(f"{base}/{rid}/approve")
    assert early.status_code == 409 and early.json()["code"] == "not_approvable"
    Rebalance.objects.filter(pk=rid).update(state=RebalanceState.PROPOSAL_READY, proposal={"moves": []})
    assert admin.post(f"{base}/{rid}/approve").status_code == 200
    twice = admin.post(f"{base}/{rid}/approve")
    assert twice.status_code == 409 and twice.json()["code"] == "already_approved"
    assert admin.post(f"{base}/{rid}/stop").status_code == 200
    Rebalance.objects.filter(pk=rid).update(state=RebalanceState.STOPPED)
    stopped = admin.post(f"{base}/{rid}/stop")
    assert stopped.status_code == 409 and stopped.json()["code"] == "not_active"
    refreshed = admin.post(f"{base}/{rid}/refresh")
    assert refreshed.status_code == 200 and refreshed.json()["approved_at"] is None
    assert admin.get(f"{base}/00000000-0000-0000-0000-000000000000").status_code == 404
    events = admin.get(f"{world_a.base}/audit-events", {"target_type": "rebalance"}).json()["results"]
    assert [e["action"] for e in events] == ["rebalance.refresh", "rebalance.stop", "rebalance.approve",
                                             "rebalance.create"]


def test_a_rebalance_takes_its_replication_throttle(world_a: TenantWorld) -> None:
    cluster = ClusterFactory(tenant=world_a.tenant)
    base = f"{world_a.base}/clusters/{cluster.pk}/rebalances"
    admin = world_a.client(Role.ADMIN)
    for bad in (-1, "fast", 2**63):
        refused = admin.post(base, {"replication_throttle": bad}, format="json")
        assert refused.status_code == 400, refused.json()
        assert "replication_throttle" in refused.json()["extra"]["fields"]
    assert not Rebalance.objects.filter(cluster=cluster).exists()
    made = admin.post(base, {"replication_throttle": 10 * 1024 * 1024}, format="json")
    assert made.status_code == 201 and made.json()["replication_throttle"] == 10 * 1024 * 1024
    Rebalance.objects.filter(pk=made.json()["id"]).update(state=RebalanceState.STOPPED)
    default = admin.post(base)
    assert default.status_code == 201 and default.json()["replication_throttle"] == 50 * 1024 * 1024


@pytest.mark.parametrize("state", [RebalanceState.NEW, RebalanceState.REBALANCING])
def test_a_cluster_that_does_not_answer_leaves_the_rebalance_where_it_was(world_a: TenantWorld,
                                                                         state: str) -> None:
    """A timeout is retried on the next pass: a rebalance half-way through its moves is not abandoned."""
    from controlplane.clusters.kafka_clients import admin_as_internal
    from controlplane.reconcile.rebalance import reconcile_rebalances
    from sluice.embedded import free_port_range

    cluster = ClusterFactory(tenant=world_a.tenant)
    rebalance = Rebalance.objects.create(cluster=cluster, state=state, progress={"t/0": "moving"})
    with admin_as_internal(cluster, bootstrap=f"127.0.0.1:{free_port_range(1)[0]}", timeout=0.5) as admin:
        assert reconcile_rebalances(cluster, admin) is True  # still in progress: passes keep coming
    rebalance.refresh_from_db()
    assert rebalance.state == state and rebalance.message.startswith("Retrying after _TIMED_OUT")
    assert rebalance.progress == {"t/0": "moving"}
