"""Pagination, filters and ordering on lists; tenant deletion keeps the audit trail."""

from __future__ import annotations

import pytest

from controlplane.audit.models import AuditEvent
from controlplane.tenancy.models import Role, Tenant
from tests.controlplane.conftest import TenantWorld
from tests.controlplane.factories import AclFactory, ClusterFactory, TopicFactory

pytestmark = pytest.mark.django_db


def test_pagination_is_limit_offset_and_capped(world_a: TenantWorld) -> None:
    cluster = ClusterFactory(tenant=world_a.tenant)
    for i in range(7):
        TopicFactory(cluster=cluster, name=f"t{i}")
    client = world_a.client(Role.VIEWER)
    url = f"{world_a.base}/clusters/{cluster.pk}/topics"
    page = client.get(url, {"limit": 3, "offset": 3}).json()
    assert page["count"] == 7 and [t["name"] for t in page["results"]] == ["t3", "t4", "t5"]
    assert "offset=6" in page["next"] and page["previous"]
    assert len(client.get(url, {"limit": 100000}).json()["results"]) == 7
    from controlplane.core.pagination import Pagination

    assert Pagination.max_limit == 500


def test_topic_filters_and_ordering(world_a: TenantWorld) -> None:
    cluster = ClusterFactory(tenant=world_a.tenant)
    for name, partitions in (("orders.eu", 3), ("orders.us", 9), ("payments", 1)):
        TopicFactory(cluster=cluster, name=name, partitions=partitions)
    client = world_a.client(Role.VIEWER)
    url = f"{world_a.base}/clusters/{cluster.pk}/topics"
    names = lambda params: [t["name"] for t in client.get(url, params).json()["results"]]  # noqa: E731
    assert names({"prefix": "orders."}) == ["orders.eu", "orders.us"]
    assert names({"name": "PAY"}) == ["payments"]
    assert names({"ordering": "-partitions"}) == ["orders.us", "orders.eu", "payments"]
    bad = client.get(url, {"ordering": "secret_hash"})
    assert bad.status_code == 200  # unknown ordering fields are ignored, never used


def test_acl_filters(world_a: TenantWorld) -> None:
    cluster = ClusterFactory(tenant=world_a.tenant)
    AclFactory(cluster=cluster, operation="READ", resource_name="a")
    AclFactory(cluster=cluster, operation="WRITE", resource_name="b")
    client = world_a.client(Role.VIEWER)
    body = client.get(f"{world_a.base}/clusters/{cluster.pk}/acls", {"operation": "WRITE"}).json()
    assert [a["resource_name"] for a in body["results"]] == ["b"]
    wrong = client.get(f"{world_a.base}/clusters/{cluster.pk}/acls", {"operation": "FLY"})
    assert wrong.status_code == 400 and wrong.json()["code"] == "validation_error"


def test_audit_trail_records_each_mutation_and_filters(world_a: TenantWorld) -> None:
    admin = world_a.client(Role.ADMIN)
    cluster = admin.post(f"{world_a.base}/clusters", {"name": "c"}, format="json").json()
    admin.post(f"{world_a.base}/clusters/{cluster['id']}/topics", {"name": "t", "partitions": 1}, format="json")
    admin.delete(f"{world_a.base}/clusters/{cluster['id']}/topics/t")
    events = admin.get(f"{world_a.base}/audit-events", {"target_type": "topic"}).json()["results"]
    assert [e["action"] for e in events] == ["topic.delete", "topic.create"]
    assert all(e["actor_display"] == "alpha-admin" and e["actor_type"] == "user" for e in events)


def test_audit_trail_filters_by_the_actors_email(world_a: TenantWorld, world_b: TenantWorld) -> None:
    admin_user = world_a.users[Role.ADMIN]
    admin_user.email = "Dana.Admin@Corp.example"
    admin_user.save(update_fields=["email"])
    world_b.users[Role.ADMIN].email = "dana.admin@corp.example.org"  # another tenant's: matches, owns no row here
    world_b.users[Role.ADMIN].save(update_fields=["email"])
    world_a.client(Role.ADMIN).post(f"{world_a.base}/clusters", {"name": "by-admin"}, format="json")
    world_a.client(Role.OWNER).post(f"{world_a.base}/clusters", {"name": "by-owner"}, format="json")
    world_b.client(Role.ADMIN).post(f"{world_b.base}/clusters", {"name": "elsewhere"}, format="json")
    url = f"{world_a.base}/audit-events"
    owner = world_a.client(Role.OWNER)
    found = owner.get(url, {"actor": "dana.admin@corp", "action": "cluster.create"}).json()["results"]
    assert [(e["actor_display"], e["data"].get("name")) for e in found] == [("alpha-admin", "by-admin")]
    assert owner.get(url, {"actor": "nobody@corp.example"}).json()["results"] == []
    # Without an "@" the value is a name or id, as before.
    by_name = owner.get(url, {"actor": "alpha-owner", "action": "cluster.create"}).json()["results"]
    assert [e["actor_display"] for e in by_name] == ["alpha-owner"]


def test_owner_deletes_the_tenant_and_the_trail_survives(world_a: TenantWorld) -> None:
    owner = world_a.client(Role.OWNER)
    assert world_a.client(Role.ADMIN).delete(world_a.base).status_code == 403
    assert owner.delete(world_a.base).status_code == 204
    assert not Tenant.objects.filter(slug="alpha").exists()
    trail = AuditEvent.objects.filter(tenant_slug="alpha", action="tenant.delete")
    assert trail.count() == 1 and trail.get().tenant_id is None
    # Every key of the tenant went with it.
    assert owner.get("/api/v1/me").status_code == 401
