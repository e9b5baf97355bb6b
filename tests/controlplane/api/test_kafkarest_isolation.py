"""Tenant isolation on the REST Proxy, found by walking the URL map.

Every route naming a ``cluster_id`` under /kafka/ is called with every method its view serves, by another
tenant's owner (API key and browser session): each answer is Confluent's 404 body and tenant A's rows are
untouched. The cluster is looked up before anything talks to Kafka, so no broker is needed here; the same
refusal on the streaming produce path, which runs outside Django, is in tests/kafkarest.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.urls import URLPattern
from rest_framework.test import APIClient

from controlplane.clusters.models import Cluster
from controlplane.kafkarest.access import clear_caches
from controlplane.resources.models import AclBinding, Topic
from controlplane.tenancy.models import Role
from tests.controlplane.api.test_isolation import _walk
from tests.controlplane.conftest import TenantWorld
from tests.controlplane.factories import AclFactory, ClusterFactory, TopicFactory

pytestmark = pytest.mark.django_db

METHODS = ("get", "post", "put", "patch", "delete")


def kafka_routes() -> list[tuple[str, URLPattern]]:
    from django.urls import get_resolver

    routes = [(route, p) for route, p in _walk(get_resolver().url_patterns)
              if route.startswith("kafka/") and "(?P<cluster_id>" in route]
    assert len(routes) >= 20, "the URL walk found too few REST Proxy routes; is kafkarest mounted?"
    return routes


def _fill(route: str, cluster_id: str) -> str:
    path = route.replace("^", "").replace("$", "").replace("/?", "/")
    path = re.sub(r"\(\?P<cluster_id>[^)]*\)", cluster_id, path)
    path = re.sub(r"\(\?P<(\w+)>[^)]*\)", lambda m: "0" if m.group(1).endswith("_id") else "x", path)
    return "/" + path


def _snapshot(cluster: Cluster) -> tuple[Any, ...]:
    return (list(Topic.objects.filter(cluster=cluster).values_list()),
            list(AclBinding.objects.filter(cluster=cluster).values_list()),
            list(Cluster.objects.filter(pk=cluster.pk).values_list()))


@pytest.mark.parametrize("how", ["api_key", "session"])
def test_every_rest_proxy_route_is_a_404_for_another_tenant(world_a: TenantWorld, world_b: TenantWorld,
                                                             how: str) -> None:
    clear_caches()
    cluster = ClusterFactory(tenant=world_a.tenant)
    TopicFactory(cluster=cluster, name="x")
    AclFactory(cluster=cluster)
    before = _snapshot(cluster)
    if how == "api_key":
        attacker = world_b.client(Role.OWNER)
    else:
        attacker = APIClient()
        attacker.force_login(world_b.users[Role.OWNER])
    checked = 0
    for route, pattern in kafka_routes():
        view_class = pattern.callback.view_class  # type: ignore[attr-defined]
        url = _fill(route, cluster.kafka_cluster_id)
        for method in METHODS:
            if not hasattr(view_class, method):
                continue
            response = getattr(attacker, method)(url, {"topic_name": "x"}, format="json")
            assert response.status_code == 404, f"{method.upper()} {url} -> {response.status_code}"
            assert response.json()["error_code"] == 404, url
            checked += 1
    assert checked >= 30
    assert _snapshot(cluster) == before


def test_a_tenants_own_key_reaches_its_cluster_and_unknown_ids_are_404(world_a: TenantWorld) -> None:
    clear_caches()
    cluster = ClusterFactory(tenant=world_a.tenant)
    client = world_a.client(Role.VIEWER)
    listed = client.get("/kafka/v3/clusters").json()
    assert [c["cluster_id"] for c in listed["data"]] == [cluster.kafka_cluster_id]
    missing = client.get("/kafka/v3/clusters/skc-nope/topics")
    assert (missing.status_code, missing.json()["error_code"]) == (404, 404)
    anonymous = APIClient().get(f"/kafka/v3/clusters/{cluster.kafka_cluster_id}/topics")
    assert (anonymous.status_code, anonymous.json()["error_code"]) == (401, 401)


def test_a_browser_session_can_post_records_with_its_csrf_token(world_a: TenantWorld) -> None:
    """The console produces with its session: the CSRF check must not trip over the records view's raw body."""
    from django.test import Client
    from django.utils.crypto import get_random_string

    browser = Client(enforce_csrf_checks=True)
    browser.force_login(world_a.users[Role.OWNER])  # type: ignore[arg-type]
    token = get_random_string(32)
    browser.cookies["csrftoken"] = token
    path = "/kafka/v3/clusters/skc-nosuchcluster/topics/t/records"
    body = b'{"value": {"type": "STRING", "data": "x"}}'
    refused = browser.post(path, body, content_type="application/json")
    assert refused.status_code == 403  # no token: refused before anything else
    answer = browser.post(path, body, content_type="application/json", headers={"X-CSRFToken": token})
    assert answer.status_code == 404, answer.content  # past authentication: the unknown cluster is what is said
    assert answer.json()["error_code"] == 404
