"""The management API refuses what it does not understand: an unknown body field is a 400 naming it.

The walk below takes every write operation from the live OpenAPI schema, so an endpoint added without a strict
serializer (controlplane.core.serializers) fails here.
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from drf_spectacular.generators import SchemaGenerator
from rest_framework import serializers
from rest_framework.test import APIClient

from controlplane.clusters.models import Rebalance
from controlplane.core.serializers import StrictSerializer, unknown_field_errors
from controlplane.reports.models import Report, ReportRun
from controlplane.resources.models import DEFAULT_PARTITIONS, ClientQuota, Topic
from controlplane.tenancy.models import Invitation, Membership, Role
from tests.controlplane.conftest import TenantWorld
from tests.controlplane.factories import AclFactory, ClusterFactory, TenantFactory, TopicFactory

EXTRA = "sluice_unknown_field"
WRITES = ("post", "put", "patch")


def _write_operations() -> list[tuple[str, str]]:
    """Every POST, PUT and PATCH of the management API, with a body or without (bodiless actions refuse one)."""
    schema = SchemaGenerator().get_schema(request=None, public=True)
    return [(method, path) for path, ops in schema["paths"].items()
            if path.startswith("/api/v1/") for method in ops if method in WRITES]


OPERATIONS = _write_operations()


def test_the_walk_sees_the_api() -> None:
    paths = {path for _, path in OPERATIONS}
    assert "/api/v1/tenants/{tenant_slug}/clusters/{cluster_pk}/topics/" in paths
    assert len(OPERATIONS) >= 30


def _fill(path: str, values: dict[str, str]) -> str:
    return re.sub(r"\{(\w+)\}", lambda match: values[match.group(1)], path)


def _world_objects(world: TenantWorld) -> dict[str, str]:
    """Real rows for every path parameter, so each request gets past its lookups to the body check."""
    cluster = ClusterFactory(tenant=world.tenant)
    topic = TopicFactory(cluster=cluster, name="orders")
    report = Report.objects.create(cluster=cluster, name="r", kind="top_keys", params={"topic": "orders", "limit": 1})
    other = TenantFactory(slug="gamma")
    owner = world.users[Role.OWNER]
    invitation = Invitation.objects.create(tenant=other, email=owner.email,  # type: ignore[attr-defined]
                                           invited_by="x", expires_at=timezone.now() + timedelta(days=1))
    assert world.service_account is not None
    return {
        "tenant_slug": world.tenant.slug, "cluster_pk": str(cluster.pk), "name": topic.name,
        "report_pk": str(report.pk), "group_id": "g", "transactional_id": "tx",
        "key_id": world.keys[Role.VIEWER][0].key_id,
        "/clusters/{id}/": str(cluster.pk),
        "/acls/{id}/": str(AclFactory(cluster=cluster).pk),
        "/quotas/{id}/": str(ClientQuota.objects.create(cluster=cluster, principal="User:*").pk),
        "/rebalances/{id}/": str(Rebalance.objects.create(cluster=cluster).pk),
        "/reports/{id}/": str(report.pk),
        "/runs/{id}/": str(ReportRun.objects.create(report=report).pk),
        "/invitations/{id}/": str(invitation.pk),
        "/members/{id}/": str(Membership.objects.get(tenant=world.tenant, user=world.users[Role.VIEWER]).pk),
        "/service-accounts/{id}/": str(world.service_account.pk),
    }


@pytest.mark.django_db
@pytest.mark.parametrize(("method", "path"), OPERATIONS, ids=[f"{m} {p}" for m, p in OPERATIONS])
def test_every_write_refuses_an_unknown_field(world_a: TenantWorld, method: str, path: str) -> None:
    objects = _world_objects(world_a)
    values = {name: value for name, value in objects.items() if not name.startswith("/")}
    for segment, value in objects.items():
        if segment.startswith("/") and segment in path:
            values["id"] = value
    assert "{id}" not in path or "id" in values, f"no object for {path}: add one to _world_objects"
    url = _fill(path, values)
    client = APIClient()  # signed in (the console's way): some actions refuse API keys
    client.force_login(world_a.users[Role.OWNER])  # type: ignore[arg-type]
    response = getattr(client, method)(url, {EXTRA: 1}, format="json")
    assert response.status_code == 400, (url, response.status_code, response.content)
    body = response.json()
    assert body["code"] == "validation_error"
    assert body["extra"]["fields"][EXTRA][0].startswith("Unknown field."), body


@pytest.mark.django_db
def test_a_misspelt_field_makes_no_topic(world_a: TenantWorld) -> None:
    cluster = ClusterFactory(tenant=world_a.tenant)
    url = f"{world_a.base}/clusters/{cluster.pk}/topics/"
    response = world_a.client(Role.MEMBER).post(url, {"name": "t", "partitons": 6}, format="json")
    assert response.status_code == 400
    body = response.json()
    assert body["extra"]["fields"] == {
        "partitons": ["Unknown field. Known fields: name, partitions, replication_factor, configs."]}
    assert body["message"].startswith("partitons: Unknown field.")
    assert not Topic.objects.exists()


@pytest.mark.django_db
def test_unknown_and_invalid_fields_are_reported_together(world_a: TenantWorld) -> None:
    cluster = ClusterFactory(tenant=world_a.tenant)
    url = f"{world_a.base}/clusters/{cluster.pk}/topics/{TopicFactory(cluster=cluster).name}/"
    response = world_a.client(Role.MEMBER).patch(url, {"partitions": "many", "retention": 1}, format="json")
    assert response.status_code == 400
    assert set(response.json()["extra"]["fields"]) == {"partitions", "retention"}


@pytest.mark.django_db
def test_known_fields_still_work_and_the_default_is_the_schema_default(world_a: TenantWorld) -> None:
    cluster = ClusterFactory(tenant=world_a.tenant)
    url = f"{world_a.base}/clusters/{cluster.pk}/topics/"
    response = world_a.client(Role.MEMBER).post(url, {"name": "t"}, format="json")
    assert response.status_code == 201, response.content
    assert response.json()["partitions"] == DEFAULT_PARTITIONS
    schema = SchemaGenerator().get_schema(request=None, public=True)
    assert schema["components"]["schemas"]["TopicCreateRequest"]["properties"]["partitions"]["default"] == \
        DEFAULT_PARTITIONS


class _Inner(StrictSerializer):
    a = serializers.IntegerField()


class _Outer(StrictSerializer):
    inner = _Inner()
    items = _Inner(many=True)
    shown = serializers.CharField(read_only=True)


@pytest.mark.parametrize(("data", "errors"), [
    ({"inner": {"a": 1}, "items": []}, None),
    ({"inner": {"a": 1, "b": 2}, "items": []}, {"inner": {"b": ["Unknown field. Known fields: a."]}}),
    ({"inner": {"a": 1}, "items": [{"a": 1}, {"c": 1, "a": 2}]},
     {"items": {1: {"c": ["Unknown field. Known fields: a."]}}}),
    ({"inner": {"a": 1}, "items": [], "shown": "x"}, {"shown": ["Unknown field. Known fields: inner, items."]}),
])
def test_nested_objects_are_strict_too(data: dict[str, Any], errors: dict[str, Any] | None) -> None:
    serializer = _Outer(data=data)
    assert serializer.is_valid() == (errors is None)
    if errors is not None:
        assert serializer.errors == errors


@pytest.mark.parametrize(("given", "known", "expected"), [
    ({}, ["a"], {}),
    ({"a": 1}, ["a"], {}),
    ({"b": 1}, ["a", "c"], {"b": ["Unknown field. Known fields: a, c."]}),
    ({"b": 1}, [], {"b": ["Unknown field. Known fields: none."]}),
    ([1, 2], ["a"], {}),
    ("text", ["a"], {}),
])
def test_unknown_field_errors(given: Any, known: list[str], expected: dict[str, list[str]]) -> None:
    assert unknown_field_errors(given, known) == expected
