"""Tenant isolation, found by walking the URL map.

Every route under /api/v1/tenants/{tenant_slug}/ is exercised with every HTTP
method it serves, as another tenant's owner: each answer is a 404 and tenant
A's rows are untouched. A new endpoint is covered without anyone remembering,
and one whose model has no fixture here fails the test until it gets one.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.db.models import Model
from django.urls import URLPattern, URLResolver, get_resolver
from django.utils import timezone

from controlplane.audit.models import AuditEvent
from controlplane.clusters.models import Cluster, Rebalance
from controlplane.reports.models import Report, ReportRun
from controlplane.resources.models import AclBinding, ClientQuota, Topic
from controlplane.tenancy.models import ApiKey, Invitation, Membership, Role, ServiceAccount, Tenant
from tests.controlplane.conftest import TenantWorld
from tests.controlplane.factories import AclFactory, ClusterFactory, TopicFactory

pytestmark = pytest.mark.django_db

BODY = {"name": "x", "tenant": "alpha", "id": "00000000-0000-0000-0000-000000000000", "partitions": 1,
        "role": "viewer", "description": "x", "email": "x@example.com"}


def _walk(patterns: list[Any], prefix: str = "") -> Iterator[tuple[str, URLPattern]]:
    for entry in patterns:
        if isinstance(entry, URLResolver):
            yield from _walk(entry.url_patterns, prefix + str(entry.pattern))
        elif isinstance(entry, URLPattern):
            yield prefix + str(entry.pattern), entry


def tenant_routes() -> list[tuple[str, URLPattern]]:
    routes = [(route, p) for route, p in _walk(get_resolver().url_patterns) if "(?P<tenant_slug>" in route]
    assert len(routes) >= 15, "the URL walk found too few tenant routes; is the router mounted?"
    return routes


def _fill(route: str, kwargs: dict[str, str]) -> str:
    import re

    path = route.replace("^", "").replace("$", "").replace("/?", "/")
    path = re.sub(r"\(\?P<(\w+)>[^)]*\)", lambda m: kwargs.get(m.group(1), "x"), path)
    return "/" + path


def _objects(world: TenantWorld) -> dict[type[Model], Model]:
    cluster = ClusterFactory(tenant=world.tenant)
    objects: dict[type[Model], Model] = {
        Tenant: world.tenant,
        Cluster: cluster,
        Topic: TopicFactory(cluster=cluster),
        AclBinding: AclFactory(cluster=cluster),
        ClientQuota: ClientQuota.objects.create(cluster=cluster, principal=world.service_account.principal,
                                                producer_byte_rate=1024),
        Rebalance: Rebalance.objects.create(cluster=cluster),
        Membership: Membership.objects.filter(tenant=world.tenant, role=Role.MEMBER).get(),
        Invitation: Invitation.objects.create(tenant=world.tenant, email="invited@example.com", role=Role.MEMBER,
                                              invited_by="x", expires_at=timezone.now() + timedelta(days=1)),
        ServiceAccount: world.service_account,
        ApiKey: world.keys[Role.MEMBER][0],
        AuditEvent: AuditEvent.objects.create(tenant=world.tenant, tenant_slug=world.tenant.slug, actor_type="system",
                                              actor_id="system", actor_display="system", action="test.event",
                                              target_type="test", target_id="1"),
    }
    report = Report.objects.create(cluster=cluster, name="r", kind="top_keys", params={"topic": "t", "limit": 10})
    objects[Report] = report
    objects[ReportRun] = ReportRun.objects.create(report=report, status="succeeded", storage="rows")
    return objects


def _snapshot(tenant: Tenant) -> dict[str, list[tuple[Any, ...]]]:
    return {
        "tenant": list(Tenant.objects.filter(pk=tenant.pk).values_list()),
        "members": list(Membership.objects.filter(tenant=tenant).order_by("pk").values_list()),
        "invitations": list(Invitation.objects.filter(tenant=tenant).order_by("pk").values_list()),
        "accounts": list(ServiceAccount.objects.filter(tenant=tenant).order_by("pk").values_list()),
        "keys": list(ApiKey.objects.filter(tenant=tenant).order_by("pk").values_list(
            "pk", "key_id", "description", "revoked_at")),
        "clusters": list(Cluster.objects.filter(tenant=tenant).order_by("pk").values_list()),
        "topics": list(Topic.objects.filter(cluster__tenant=tenant).order_by("pk").values_list()),
        "acls": list(AclBinding.objects.filter(cluster__tenant=tenant).order_by("pk").values_list()),
        "quotas": list(ClientQuota.objects.filter(cluster__tenant=tenant).order_by("pk").values_list()),
        "rebalances": list(Rebalance.objects.filter(cluster__tenant=tenant).order_by("pk").values_list()),
        "reports": list(Report.objects.filter(cluster__tenant=tenant).order_by("pk").values_list()),
        "runs": list(ReportRun.objects.filter(report__cluster__tenant=tenant).order_by("pk").values_list()),
        "audit": list(AuditEvent.objects.filter(tenant=tenant).order_by("pk").values_list("pk")),
    }


def _kwargs_for(view_model: type[Model], lookup: str, objects: dict[type[Model], Model],
                tenant_slug: str) -> dict[str, str]:
    if view_model not in objects:
        pytest.fail(f"No isolation fixture for {view_model.__name__}: add one to _objects()")
    obj = objects[view_model]
    kwargs = {"tenant_slug": tenant_slug, "cluster_pk": str(objects[Cluster].pk), "report_pk": str(objects[Report].pk)}
    kwargs[lookup] = str(getattr(obj, "slug" if view_model is Tenant else lookup if lookup != "pk" else "pk"))
    return kwargs


def test_every_tenant_route_is_a_404_for_another_tenant(world_a: TenantWorld, world_b: TenantWorld) -> None:
    objects = _objects(world_a)
    before = _snapshot(world_a.tenant)
    attacker = world_b.client(Role.OWNER)
    checked = 0
    for route, pattern in tenant_routes():
        view = pattern.callback
        cls = view.cls  # type: ignore[attr-defined]
        actions: dict[str, str] = view.actions  # type: ignore[attr-defined]
        lookup = getattr(cls, "lookup_url_kwarg", None) or getattr(cls, "lookup_field", "pk")
        model = cls.model
        # Each URL twice: tenant A's own path, and B's path naming A's objects.
        for tenant_slug in (world_a.tenant.slug, world_b.tenant.slug):
            kwargs = _kwargs_for(model, lookup, objects, tenant_slug)
            if lookup == "tenant_slug" and tenant_slug == world_b.tenant.slug:
                continue  # the tenant's own detail route with B's slug is B's tenant
            if tenant_slug == world_b.tenant.slug and "cluster_pk" not in route and f"<{lookup}>" not in route:
                continue  # B's own collection: nothing of A's in the URL
            url = _fill(route, kwargs)
            for method in list(actions):
                response = getattr(attacker, method)(url, BODY, format="json")
                assert response.status_code == 404, f"{method.upper()} {url} -> {response.status_code}"
                if method != "head":
                    assert response.json()["code"] == "not_found", url
                checked += 1
    assert checked >= 40
    assert _snapshot(world_a.tenant) == before


def test_session_user_of_another_tenant_gets_404(world_a: TenantWorld, world_b: TenantWorld) -> None:
    from rest_framework.test import APIClient

    objects = _objects(world_a)
    client = APIClient()
    client.force_login(world_b.users[Role.OWNER])
    cluster = objects[Cluster]
    for url in (world_a.base, f"{world_a.base}/clusters", f"{world_a.base}/clusters/{cluster.pk}",
                f"{world_a.base}/clusters/{cluster.pk}/topics", f"{world_a.base}/api-keys"):
        assert client.get(url).status_code == 404, url


def test_tenant_list_shows_only_the_callers_tenants(world_a: TenantWorld, world_b: TenantWorld) -> None:
    body = world_b.client(Role.VIEWER).get("/api/v1/tenants").json()
    assert [t["slug"] for t in body["results"]] == ["beta"]


def test_body_fields_naming_other_tenants_are_refused(world_a: TenantWorld, world_b: TenantWorld) -> None:
    objects = _objects(world_a)
    a_cluster = objects[Cluster]
    b_cluster = ClusterFactory(tenant=world_b.tenant)
    owner_b = world_b.client(Role.OWNER)
    sneaky = {"tenant": world_a.tenant.slug, "tenant_id": world_a.tenant.pk, "cluster_id": str(a_cluster.pk),
              "id": str(a_cluster.pk)}
    before = (Topic.objects.count(), Cluster.objects.count(), ServiceAccount.objects.count(),
              AclBinding.objects.count())

    # Keys the endpoint does not know are refused by name (never read, let alone followed), and nothing is made.
    for url, body in [(f"{world_b.base}/clusters/{b_cluster.pk}/topics", {"name": "t1", "cluster": "x"}),
                      (f"{world_b.base}/clusters", {"name": "c-new"}),
                      (f"{world_b.base}/service-accounts", {"name": "svc"}),
                      (f"{world_b.base}/clusters/{b_cluster.pk}/acls",
                       {"principal": "User:*", "resource_type": "TOPIC", "resource_name": "t1", "operation": "READ"})]:
        response = owner_b.post(url, {**body, **sneaky}, format="json")
        assert response.status_code == 400, (url, response.json())
        assert set(sneaky) <= set(response.json()["extra"]["fields"]), url
    assert (Topic.objects.count(), Cluster.objects.count(), ServiceAccount.objects.count(),
            AclBinding.objects.count()) == before

    # Without them, B's objects land in B, whatever A has.
    response = owner_b.post(f"{world_b.base}/clusters/{b_cluster.pk}/topics", {"name": "t1"}, format="json")
    assert response.status_code == 201, response.json()
    assert Topic.objects.get(name="t1").cluster_id == b_cluster.pk

    # A key for one of A's service accounts cannot be minted from B.
    response = owner_b.post(f"{world_b.base}/api-keys", {"service_account": str(world_a.service_account.pk)},
                            format="json")
    assert response.status_code == 400
    assert "service_account" in response.json()["extra"]["fields"]
    assert not ApiKey.objects.filter(owner_service_account=world_a.service_account).exists()
