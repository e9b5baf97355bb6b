"""Tenant limits: one tenant cannot hold more clusters or brokers than its limits, so it cannot fill the agents'
shared broker port pools; another tenant's clusters never count against it; concurrent creates cannot both pass."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.db import connection, transaction
from django.test import override_settings

from controlplane.clusters import services
from controlplane.clusters.models import Agent, BrokerNode, Cluster
from controlplane.clusters.plans import LimitRefusal, TenantLimits, TenantUsage, tenant_limit_refusal
from controlplane.core.actors import SYSTEM_ACTOR
from controlplane.core.errors import QuotaExceeded
from controlplane.tenancy.models import Role
from tests.controlplane.conftest import TenantWorld
from tests.controlplane.factories import ClusterFactory, TenantFactory

LIMITS = TenantLimits(max_clusters=3, max_brokers=7)


@pytest.mark.parametrize(("clusters", "brokers", "add_clusters", "add_brokers", "refused"), [
    (0, 0, 1, 3, None),
    (2, 4, 1, 3, None),  # exactly at both limits
    (3, 3, 1, 1, LimitRefusal("max_clusters", 3, 3, 1)),
    (2, 5, 1, 3, LimitRefusal("max_brokers", 7, 5, 3)),
    (3, 7, 1, 3, LimitRefusal("max_clusters", 3, 3, 1)),  # the cluster count is named first
    (2, 4, 0, 3, None),  # scale-out that fits
    (2, 5, 0, 3, LimitRefusal("max_brokers", 7, 5, 3)),  # scale-out that does not
    (5, 20, 0, 0, None),  # above limits lowered by an operator: renames and the like still pass
    (5, 20, 0, -3, None),  # and so does shrinking
])
def test_the_decision(clusters: int, brokers: int, add_clusters: int, add_brokers: int,
                      refused: LimitRefusal | None) -> None:
    answer = tenant_limit_refusal(limits=LIMITS, usage=TenantUsage(clusters, brokers), add_clusters=add_clusters,
                                  add_brokers=add_brokers)
    assert answer == refused


def test_the_refusal_names_the_limit_and_the_usage() -> None:
    refusal = LimitRefusal("max_brokers", 7, 5, 3)
    assert refusal.message == "The tenant may hold 7 brokers (max_brokers); 5 are in use, so 3 more do not fit."


def _create(world: TenantWorld, name: str, **body: Any) -> Any:
    return world.client(Role.ADMIN).post(f"{world.base}/clusters", {"name": name, **body}, format="json")


@pytest.mark.django_db
@override_settings(SLUICE_TENANT_MAX_CLUSTERS=2, SLUICE_TENANT_MAX_BROKERS=15)
def test_the_cluster_limit_is_a_quota_exceeded_naming_it(world_a: TenantWorld) -> None:
    assert _create(world_a, "one").status_code == 201
    assert _create(world_a, "two").status_code == 201
    refused = _create(world_a, "three")
    assert refused.status_code == 400, refused.json()
    body = refused.json()
    assert body["code"] == "quota_exceeded"
    assert body["extra"] == {"quota": "max_clusters", "limit": 2, "used": 2, "requested": 1}
    assert "2 clusters" in body["message"] and "2 are in use" in body["message"]
    assert Cluster.objects.filter(tenant=world_a.tenant).count() == 2


@pytest.mark.django_db
@override_settings(SLUICE_TENANT_MAX_CLUSTERS=10, SLUICE_TENANT_MAX_BROKERS=7)
def test_the_broker_limit_on_create_and_on_scale_out(world_a: TenantWorld) -> None:
    first = _create(world_a, "big", plan="dedicated", broker_count=6)
    assert first.status_code == 201
    refused = _create(world_a, "std", plan="standard")  # 3 more: 9 > 7
    assert refused.status_code == 400
    assert refused.json()["extra"] == {"quota": "max_brokers", "limit": 7, "used": 6, "requested": 3,
                                       "field": "broker_count"}
    assert _create(world_a, "small", plan="basic").status_code == 201  # 1 more: 7

    admin = world_a.client(Role.ADMIN)
    url = f"{world_a.base}/clusters/{first.json()['id']}"
    grow = admin.patch(url, {"broker_count": 7}, format="json")
    assert grow.status_code == 400 and grow.json()["extra"]["quota"] == "max_brokers"
    assert Cluster.objects.get(pk=first.json()["id"]).broker_count == 6  # unchanged
    assert admin.patch(url, {"broker_count": 5}, format="json").status_code == 200  # shrinking is fine
    assert admin.patch(url, {"broker_count": 6}, format="json").status_code == 200  # and back within the limit


@pytest.mark.django_db
@override_settings(SLUICE_TENANT_MAX_CLUSTERS=10, SLUICE_TENANT_MAX_BROKERS=6)
def test_brokers_still_placed_count_until_they_are_gone(world_a: TenantWorld) -> None:
    """A scale-in's retiring brokers (and a deleted cluster's, until stopped) still hold their ports."""
    agent = Agent.objects.create(host="h1", advertised_host="h1", port_min=1, port_max=100,
                                 last_seen="2024-01-01T00:00Z", started_at="2024-01-01T00:00Z")
    cluster = ClusterFactory(tenant=world_a.tenant, plan="dedicated",
                             spec={"broker_count": 3, "max_partitions": 100})
    for node_id in (1, 2, 3, 4, 5):  # 3 desired, 2 more retiring
        BrokerNode.objects.create(cluster=cluster, node_id=node_id, agent=agent, port=node_id)
    assert _create(world_a, "b", plan="basic").status_code == 201  # 5 + 1 = 6
    assert _create(world_a, "c", plan="basic").json()["extra"]["used"] == 6


@pytest.mark.django_db
@override_settings(SLUICE_TENANT_MAX_CLUSTERS=1, SLUICE_TENANT_MAX_BROKERS=3)
def test_another_tenants_clusters_do_not_count(world_a: TenantWorld, world_b: TenantWorld) -> None:
    for i in range(4):
        ClusterFactory(tenant=world_b.tenant, name=f"b-{i}")  # B far above the limits (made before them)
    assert _create(world_b, "more").status_code == 400
    created = _create(world_a, "mine", plan="standard")
    assert created.status_code == 201, created.json()
    assert _create(world_a, "second").json()["extra"] == {"quota": "max_clusters", "limit": 1, "used": 1,
                                                         "requested": 1}


@pytest.mark.django_db
@override_settings(SLUICE_TENANT_MAX_CLUSTERS=1, SLUICE_TENANT_MAX_BROKERS=3)
def test_a_staff_override_on_the_tenant_replaces_the_default(world_a: TenantWorld, world_b: TenantWorld) -> None:
    world_a.tenant.max_clusters = 3
    world_a.tenant.max_brokers = 30
    world_a.tenant.save()
    for name in ("a", "b", "c"):
        assert _create(world_a, name, plan="standard").status_code == 201
    assert _create(world_a, "d").json()["extra"]["limit"] == 3
    assert _create(world_b, "x").status_code == 201 and _create(world_b, "y").json()["extra"]["limit"] == 1
    world_a.tenant.max_clusters = 0  # an operator can stop a tenant growing at all
    world_a.tenant.save()
    assert services.tenant_limits(world_a.tenant) == TenantLimits(max_clusters=0, max_brokers=30)


@pytest.mark.django_db(transaction=True)
@override_settings(SLUICE_TENANT_MAX_CLUSTERS=1, SLUICE_TENANT_MAX_BROKERS=15)
def test_concurrent_creates_cannot_both_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    """The second create waits on the tenant row's lock and then sees the first's cluster."""
    monkeypatch.setattr("controlplane.clusters.tasks.enqueue_reconcile", lambda *args, **kwargs: None)
    tenant = TenantFactory()
    first_created, release = threading.Event(), threading.Event()
    second: dict[str, object] = {}

    def first() -> None:
        try:
            with transaction.atomic():
                services.cluster_create(tenant=tenant, name="first", plan="basic", actor=SYSTEM_ACTOR)
                first_created.set()
                assert release.wait(30)
        finally:
            connection.close()

    def other() -> None:
        try:
            services.cluster_create(tenant=tenant, name="second", plan="basic", actor=SYSTEM_ACTOR)
            second["outcome"] = "created"
        except QuotaExceeded as exc:
            second["outcome"] = exc.extra
        finally:
            connection.close()

    one = threading.Thread(target=first)
    one.start()
    assert first_created.wait(30)
    two = threading.Thread(target=other)
    two.start()
    two.join(1.0)
    assert two.is_alive(), "the second create did not wait for the first's transaction"
    release.set()
    one.join(30)
    two.join(30)
    assert second["outcome"] == {"quota": "max_clusters", "limit": 1, "used": 1, "requested": 1}
    assert list(Cluster.objects.filter(tenant=tenant).values_list("name", flat=True)) == ["first"]
