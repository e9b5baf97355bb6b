"""Bad input gets a 400 (or 409) naming the field, and changes nothing."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controlplane.resources.models import AclBinding, Topic
from controlplane.tenancy.models import Role
from dataplane.config.topic import ConfigError, parse_topic_config
from dataplane.naming import InvalidTopicName, validate_topic_name
from tests.controlplane.conftest import TenantWorld
from tests.controlplane.factories import ClusterFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def topics_url(world_a: TenantWorld) -> str:
    cluster = ClusterFactory(tenant=world_a.tenant, spec={"broker_count": 3, "max_partitions": 20})
    return f"{world_a.base}/clusters/{cluster.pk}/topics"


def _post(world: TenantWorld, url: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    response = world.client(Role.MEMBER).post(url, body, format="json")
    return response.status_code, response.json()


TIERED = {"remote.storage.enable": "true"}
STORE = {"endpoint": "http://127.0.0.1:9", "bucket": "tier", "prefix": "", "region": "us-east-1", "access_key": "a",
         "secret_key": "s"}


@pytest.mark.parametrize(("configs", "field", "words"), [
    ({**TIERED, "cleanup.policy": "compact"}, "configs.remote.storage.enable", "compacted"),
    ({**TIERED, "retention.ms": 1000, "local.retention.ms": 2000}, "configs.local.retention.ms", "more than"),
    ({**TIERED, "retention.bytes": 1000, "local.retention.bytes": -1}, "configs.local.retention.bytes", "not be -1"),
    ({**TIERED, "local.retention.ms": -3}, "configs.local.retention.ms", ""),
])
def test_bad_tiering_configs_are_400_with_kafkas_reason(world_a: TenantWorld, topics_url: str, settings: Any,
                                                         configs: dict[str, Any], field: str, words: str) -> None:
    settings.SLUICE_REMOTE_STORAGE = STORE
    status, error = _post(world_a, topics_url, {"name": "tiered", "configs": configs})
    assert status == 400 and field in error["extra"]["fields"], error
    assert words in " ".join(error["extra"]["fields"][field])
    assert not Topic.objects.exists()


def test_tiering_needs_the_deployments_object_store_and_cannot_be_turned_off(
        world_a: TenantWorld, topics_url: str, settings: Any) -> None:
    settings.SLUICE_REMOTE_STORAGE = {**STORE, "endpoint": "", "bucket": ""}
    status, error = _post(world_a, topics_url, {"name": "tiered", "configs": TIERED})
    assert status == 400 and "no object store" in error["extra"]["fields"]["configs.remote.storage.enable"][0]
    settings.SLUICE_REMOTE_STORAGE = STORE
    status, topic = _post(world_a, topics_url, {"name": "tiered", "configs": {**TIERED, "local.retention.ms": 60000}})
    assert status == 201 and topic["configs"]["remote.storage.enable"] == "true", topic
    off = world_a.client(Role.MEMBER).patch(f"{topics_url}/tiered", {"configs": {"remote.storage.enable": "false"}},
                                            format="json")
    assert off.status_code == 400 and "not supported" in str(off.json()["extra"]["fields"])
    assert Topic.objects.get(name="tiered").configs["remote.storage.enable"] == "true"


@pytest.mark.parametrize(("body", "field"), [
    ({"name": ""}, "name"),
    ({"name": "."}, "name"),
    ({"name": ".."}, "name"),
    ({"name": "a" * 250}, "name"),
    ({"name": "has space"}, "name"),
    ({"name": "ünïcode"}, "name"),
    ({"name": "slash/name"}, "name"),
    ({"name": "newline\n"}, "name"),
    ({"name": "__internal"}, "name"),
    ({"name": "ok", "partitions": 0}, "partitions"),
    ({"name": "ok", "partitions": -3}, "partitions"),
    ({"name": "ok", "partitions": "many"}, "partitions"),
    ({"name": "ok", "replication_factor": 4}, "replication_factor"),
    ({"name": "ok", "replication_factor": 0}, "replication_factor"),
    ({"name": "ok", "configs": {"retention.mss": "1"}}, "configs.retention.mss"),
    ({"name": "ok", "configs": {"retention.ms": "soon"}}, "configs.retention.ms"),
    ({"name": "ok", "configs": {"retention.ms": -2}}, "configs.retention.ms"),
    ({"name": "ok", "configs": {"segment.bytes": 2**31}}, "configs.segment.bytes"),
    ({"name": "ok", "configs": {"cleanup.policy": "compact,shred"}}, "configs.cleanup.policy"),
    ({"name": "ok", "configs": {"compression.type": "brotli"}}, "configs.compression.type"),
    ({"name": "ok", "configs": {"min.insync.replicas": 0}}, "configs.min.insync.replicas"),
    ({"name": "ok", "configs": {"min.insync.replicas": 3}, "replication_factor": 2}, "configs.min.insync.replicas"),
    ({"name": "ok", "configs": {"message.timestamp.type": "WallClock"}}, "configs.message.timestamp.type"),
    ({"name": "ok", "configs": {"preallocate": "yes"}}, "configs.preallocate"),
    ({"name": "ok", "configs": {"min.cleanable.dirty.ratio": 1.5}}, "configs.min.cleanable.dirty.ratio"),
    ({"name": "ok", "configs": {"max.message.bytes": {"nested": 1}}}, "configs.max.message.bytes"),
    ({"name": "ok", "configs": "retention.ms=1"}, "configs"),
])
def test_bad_topics_are_400_with_the_field_named(world_a: TenantWorld, topics_url: str, body: dict[str, Any],
                                                 field: str) -> None:
    status, error = _post(world_a, topics_url, body)
    assert status == 400, error
    assert error["code"] == "validation_error"
    assert field in error["extra"]["fields"], error
    assert error["message"]
    assert not Topic.objects.exists()


def test_good_configs_are_stored_canonically(world_a: TenantWorld, topics_url: str) -> None:
    status, topic = _post(world_a, topics_url, {"name": "orders.v1", "partitions": 2, "configs": {
        "retention.ms": 86400000, "cleanup.policy": "compact, delete", "preallocate": "TRUE",
        "min.insync.replicas": "2", "compression.type": "zstd"}})
    assert status == 201, topic
    assert topic["configs"] == {"retention.ms": "86400000", "cleanup.policy": "compact,delete",
                                "preallocate": "true", "min.insync.replicas": "2", "compression.type": "zstd"}


def test_colliding_and_duplicate_names_conflict(world_a: TenantWorld, topics_url: str) -> None:
    assert _post(world_a, topics_url, {"name": "a.b", "partitions": 1})[0] == 201
    status, error = _post(world_a, topics_url, {"name": "a.b", "partitions": 1})
    assert status == 409 and error["code"] == "topic_exists"
    status, error = _post(world_a, topics_url, {"name": "a_b", "partitions": 1})
    assert status == 409 and "collides" in error["message"]


def test_partition_budget_and_growth_rules(world_a: TenantWorld, topics_url: str) -> None:
    assert _post(world_a, topics_url, {"name": "big", "partitions": 15})[0] == 201
    status, error = _post(world_a, topics_url, {"name": "more", "partitions": 6})
    assert status == 400 and error["code"] == "quota_exceeded" and error["extra"]["limit"] == 20
    client = world_a.client(Role.MEMBER)
    shrink = client.patch(f"{topics_url}/big", {"partitions": 3}, format="json")
    assert shrink.status_code == 400 and "partitions" in shrink.json()["extra"]["fields"]
    grow = client.patch(f"{topics_url}/big", {"partitions": 20}, format="json")
    assert grow.status_code == 200 and grow.json()["partitions"] == 20 and grow.json()["generation"] == 2


def test_config_patch_merges_and_put_replaces(world_a: TenantWorld, topics_url: str) -> None:
    _post(world_a, topics_url, {"name": "t", "partitions": 1, "configs": {"retention.ms": 1000, "flush.ms": 5}})
    client = world_a.client(Role.MEMBER)
    merged = client.patch(f"{topics_url}/t", {"configs": {"retention.ms": None, "segment.ms": 60000}},
                          format="json").json()
    assert merged["configs"] == {"flush.ms": "5", "segment.ms": "60000"}
    replaced = client.put(f"{topics_url}/t", {"configs": {"retention.bytes": 10}}, format="json").json()
    assert replaced["configs"] == {"retention.bytes": "10"}
    bad = client.patch(f"{topics_url}/t", {"configs": {"retention.bytes": "lots"}}, format="json")
    assert bad.status_code == 400
    assert Topic.objects.get(name="t").configs == {"retention.bytes": "10"}


@pytest.mark.parametrize(("body", "field"), [
    ({"principal": "alice", "resource_type": "TOPIC", "resource_name": "t", "operation": "READ"}, "principal"),
    ({"principal": "User:*", "resource_type": "TOPIC", "resource_name": "t", "operation": "IDEMPOTENT_WRITE"},
     "operation"),
    ({"principal": "User:*", "resource_type": "CLUSTER", "resource_name": "t", "operation": "ALTER"},
     "resource_name"),
    ({"principal": "User:*", "resource_type": "TOPIC", "resource_name": "t", "operation": "READ",
      "host": "not-an-ip"}, "host"),
    ({"principal": "User:*", "resource_type": "TOPIC", "resource_name": "*", "operation": "READ",
      "pattern_type": "PREFIXED"}, "resource_name"),
    ({"principal": "User:*", "resource_type": "TABLE", "resource_name": "t", "operation": "READ"}, "resource_type"),
    ({"principal": "User:ghost", "resource_type": "TOPIC", "resource_name": "t", "operation": "READ"}, "principal"),
])
def test_bad_acls_are_400_with_the_field_named(world_a: TenantWorld, body: dict[str, Any], field: str) -> None:
    cluster = ClusterFactory(tenant=world_a.tenant)
    response = world_a.client(Role.ADMIN).post(f"{world_a.base}/clusters/{cluster.pk}/acls", body, format="json")
    assert response.status_code == 400, response.json()
    assert field in response.json()["extra"]["fields"]
    assert not AclBinding.objects.exists()


def test_acl_for_a_tenant_principal_and_duplicates(world_a: TenantWorld) -> None:
    cluster = ClusterFactory(tenant=world_a.tenant)
    url = f"{world_a.base}/clusters/{cluster.pk}/acls"
    body = {"principal": world_a.service_account.principal, "resource_type": "TOPIC", "pattern_type": "PREFIXED",
            "resource_name": "orders.", "operation": "WRITE", "host": "10.0.0.1"}
    admin = world_a.client(Role.ADMIN)
    assert admin.post(url, body, format="json").status_code == 201
    again = admin.post(url, body, format="json")
    assert again.status_code == 409 and again.json()["code"] == "acl_exists"


@pytest.mark.parametrize(("body", "field"), [
    ({"name": "bad name"}, "name"),
    ({"name": "trailing-newline\n"}, "name"),
    ({"name": "c", "plan": "gold"}, "plan"),
    ({"name": "c", "plan": "basic", "broker_count": 3}, "broker_count"),
    ({"name": "c", "plan": "dedicated", "broker_count": 13}, "broker_count"),
    ({"name": "c", "plan": "basic", "max_partitions": 101}, "max_partitions"),
])
def test_bad_clusters_are_400(world_a: TenantWorld, body: dict[str, Any], field: str) -> None:
    response = world_a.client(Role.ADMIN).post(f"{world_a.base}/clusters", body, format="json")
    assert response.status_code == 400 and field in response.json()["extra"]["fields"], response.json()


def test_cluster_spec_change_bumps_generation(world_a: TenantWorld) -> None:
    admin = world_a.client(Role.ADMIN)
    cluster = admin.post(f"{world_a.base}/clusters", {"name": "d", "plan": "dedicated"}, format="json").json()
    assert cluster["generation"] == 1 and cluster["spec"] == {"broker_count": 3, "max_partitions": 4500}
    url = f"{world_a.base}/clusters/{cluster['id']}"
    renamed = admin.patch(url, {"name": "d2"}, format="json").json()
    assert renamed["generation"] == 1
    grown = admin.patch(url, {"broker_count": 6}, format="json").json()
    assert grown["generation"] == 2 and grown["spec"]["broker_count"] == 6
    assert grown["status"]["observed_generation"] == 0


def test_malformed_json_is_a_parse_error(world_a: TenantWorld, topics_url: str) -> None:
    response = world_a.client(Role.MEMBER).generic("POST", topics_url, b"{not json", content_type="application/json")
    assert response.status_code == 400 and response.json()["code"] == "parse_error"
    response = world_a.client(Role.MEMBER).generic("POST", topics_url, b"name=x",
                                                   content_type="application/x-www-form-urlencoded")
    assert response.status_code == 415 and response.json()["code"] == "unsupported_media_type"


def test_unknown_routes_and_bad_ids_are_json_404(world_a: TenantWorld) -> None:
    client = world_a.client(Role.OWNER)
    for url in ("/api/v1/nothing-here", f"{world_a.base}/clusters/not-a-uuid/topics",
                f"{world_a.base}/clusters/{'0' * 8}-0000-0000-0000-{'0' * 12}",
                f"{world_a.base}/clusters/------------------------------------"):
        response = client.get(url)
        assert response.status_code == 404, url
        assert response.json()["code"] == "not_found"


@settings(max_examples=200, deadline=None)
@given(st.text(min_size=0, max_size=260))
def test_topic_name_rule_matches_kafka(name: str) -> None:
    legal = (0 < len(name) <= 249 and name not in {".", ".."}
             and all(c.isascii() and (c.isalnum() or c in "._-") for c in name))
    try:
        validate_topic_name(name)
        assert legal
    except InvalidTopicName:
        assert not legal


@settings(max_examples=200, deadline=None)
@given(st.integers(min_value=-(2**70), max_value=2**70))
def test_int_config_bounds(value: int) -> None:
    try:
        parse_topic_config("segment.bytes", value)
        assert 14 <= value < 2**31
    except ConfigError:
        assert not 14 <= value < 2**31


def test_tenant_slug_rules(world_a: TenantWorld) -> None:
    from rest_framework.test import APIClient

    client = APIClient()
    client.force_login(world_a.users[Role.OWNER])
    for slug in ("ab", "UPPER", "-lead", "trail-", "new\n", "x" * 64):
        response = client.post("/api/v1/tenants", {"slug": slug}, format="json")
        assert response.status_code == 400, slug
        assert "slug" in response.json()["extra"]["fields"]
