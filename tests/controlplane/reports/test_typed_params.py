"""Typed SQL reports without Spark: the parameters' rules, what the worker hands the runner (schemas inline, no
registry URL or credential), the owner's subject permission at run time, and the inline lookup's answers."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from django.conf import settings
from django.utils import timezone

from controlplane.core.actors import SYSTEM_ACTOR, kafka_principal
from controlplane.reports import engine
from controlplane.reports.kinds import ParamError, normalize_params
from controlplane.reports.models import Report, ReportRun
from controlplane.tenancy.models import Role
from dataplane.client.registry import RegistryError, StaticSchemas
from tests.controlplane.conftest import TenantWorld
from tests.controlplane.factories import ClusterFactory
from tests.support.secured_broker import store_secrets

pytestmark = pytest.mark.django_db

ORDER_V1 = {"type": "record", "name": "Order", "fields": [{"name": "customer", "type": "string"},
                                                          {"name": "amount", "type": "long"}]}
ORDER_V2 = {**ORDER_V1, "fields": [*ORDER_V1["fields"], {"name": "note", "type": "string", "default": ""}]}
OTHER = {"type": "record", "name": "Other", "fields": [{"name": "x", "type": "int"}]}


def test_params_rules() -> None:
    base = {"sql": "SELECT value.customer FROM orders", "topics": ["orders"]}
    assert normalize_params("sql", {**base, "value_format": "AVRO", "value_version": "latest", "mode": "permissive"}) \
        == {**base, "value_format": "avro", "mode": "PERMISSIVE"}
    assert normalize_params("sql", {**base, "value_format": "binary", "mode": "FAILFAST"}) == base
    assert normalize_params("sql", {**base, "key_format": "jsonschema", "key_subject": "ids", "key_version": 2}) == {
        **base, "key_format": "jsonschema", "key_subject": "ids", "key_version": 2}
    assert normalize_params("sql", {**base, "value_format": "protobuf", "value_message": " pkg.Order "}) == {
        **base, "value_format": "protobuf", "value_message": "pkg.Order"}
    refused = [({"value_format": "xml"}, "params.value_format", "must be one of binary, avro, jsonschema"),
               ({"value_format": "avro", "value_message": "M"}, "params.value_message", "needs params.value_format "
                "protobuf"),
               ({"value_message": "M"}, "params.value_message", "needs params.value_format"),
               ({"value_format": "protobuf", "value_message": " "}, "params.value_message", "a message name"),
               ({"value_subject": "s"}, "params.value_subject", "needs params.value_format"),
               ({"value_format": "avro", "value_version": 0}, "params.value_version", "a version number"),
               ({"value_format": "avro", "mode": "LENIENT"}, "params.mode", "FAILFAST or PERMISSIVE")]
    for extra, field, message in refused:
        with pytest.raises(ParamError) as caught:
            normalize_params("sql", {**base, **extra})
        assert caught.value.field == field and message in caught.value.message, extra
    with pytest.raises(ParamError, match="not a parameter of this kind"):
        normalize_params("top_keys", {"topic": "orders", "value_format": "avro"})


def test_bad_formats_are_400s_before_the_cluster_is_asked(world_a: TenantWorld) -> None:
    cluster = ClusterFactory(tenant=world_a.tenant)  # no brokers: a format error must not need them
    response = world_a.client(Role.MEMBER).post(f"{world_a.base}/clusters/{cluster.pk}/reports", {
        "name": "typed", "kind": "sql", "params": {"sql": "SELECT 1 AS x FROM orders", "topics": ["orders"],
                                                   "value_format": "thrift"}}, format="json")
    assert response.status_code == 400
    assert "must be one of" in response.json()["extra"]["fields"]["params.value_format"][0]


def _cluster(world: TenantWorld) -> Any:
    from controlplane.clusters.models import Agent, BrokerNode, Cluster

    cluster = ClusterFactory(tenant=world.tenant, kafka_cluster_id=f"skc-{uuid.uuid4().hex[:16]}")
    Cluster.objects.filter(pk=cluster.pk).update(status={"security_protocol": "SASL_PLAINTEXT"})
    cluster.refresh_from_db()
    store_secrets(cluster)
    now = timezone.now()
    agent = Agent.objects.create(host=f"typed-{uuid.uuid4().hex[:8]}", advertised_host="127.0.0.1",
                                 port_min=19092, port_max=19092, last_seen=now, started_at=now)
    BrokerNode.objects.create(cluster=cluster, node_id=1, agent=agent, port=19092)
    return cluster


def _register(cluster: Any, subject: str, schema: dict[str, Any]) -> int:
    from controlplane.registry.services import schema_register

    return schema_register(cluster=cluster, actor=SYSTEM_ACTOR, subject=subject, body={"schema": json.dumps(schema)})


def _run(cluster: Any, owner: str, params: dict[str, Any]) -> ReportRun:
    report = Report.objects.create(cluster=cluster, name=f"r-{uuid.uuid4().hex[:6]}", kind="sql", params=params,
                                   owner_principal=owner)
    return ReportRun.objects.create(report=report, definition={"kind": "sql", "params": params, "time_range": {},
                                                               "chart": {}})


def _request(run: ReportRun) -> dict[str, Any]:
    from controlplane.reports.runner import _request

    run = ReportRun.objects.select_related("report__cluster").get(pk=run.pk)
    return _request(run, timezone.now())


def test_the_runner_gets_the_subjects_schemas_and_no_registry_access(world_a: TenantWorld) -> None:
    from controlplane.clusters.models import ClusterSecret

    cluster = _cluster(world_a)
    v1, v2 = _register(cluster, "orders-value", ORDER_V1), _register(cluster, "orders-value", ORDER_V2)
    other = _register(cluster, "other-value", OTHER)
    owner = kafka_principal("user", world_a.users[Role.MEMBER].pk)
    params = normalize_params("sql", {"sql": "SELECT value.customer FROM orders", "topics": ["orders"],
                                      "value_format": "avro", "value_version": 1})
    request = _request(_run(cluster, owner, params))

    options = request["typed"]["orders"]
    inline = json.loads(options.pop("schema.registry.inline"))
    assert options == {"mode": "FAILFAST", "value.format": "avro", "value.schema.subject": "orders-value",
                       "value.schema.version": "1"}
    assert set(inline["schemas"]) == {str(v1), str(v2)} and str(other) not in inline["schemas"]
    assert inline["subjects"] == {"orders-value": {"1": v1, "2": v2}}
    # Nothing that reaches the registry or authenticates anywhere but the cluster (as the owner, by token).
    text = json.dumps(request)
    assert "schema.registry.url" not in text and "basic.auth" not in text and "sasl.password" not in text
    assert settings.SECRET_KEY not in text
    assert ClusterSecret.objects.get(cluster=cluster).internal_password not in text
    assert all(secret not in text for _, secret in world_a.keys.values())
    assert request["connection"]["kafka.sasl.mechanisms"] == "OAUTHBEARER"

    # What the runner builds from it answers for these ids only, as the source's registry would.
    lookup = StaticSchemas(json.dumps(inline))
    assert lookup.version("orders-value").id == v2 and lookup.version("orders-value", 1).id == v1
    with pytest.raises(RegistryError) as caught:
        lookup.schema_by_id(other)
    assert caught.value.status == 404 and "not among the schemas of subject 'orders-value'" in str(caught.value)


def test_the_owners_subject_permission_is_checked_at_run_time(world_a: TenantWorld) -> None:
    from controlplane.resources.models import AclBinding

    cluster = _cluster(world_a)
    _register(cluster, "orders-value", ORDER_V1)
    account = kafka_principal("service_account", world_a.service_account.pk)
    params = normalize_params("sql", {"sql": "SELECT value.amount FROM orders", "topics": ["orders"],
                                      "value_format": "avro"})
    with pytest.raises(engine.ReportError, match=r"may not read subject 'orders-value'.*resource type SUBJECT"):
        _request(_run(cluster, account, params))
    AclBinding.objects.create(cluster=cluster, resource_type="SUBJECT", resource_name="orders-",
                              pattern_type="PREFIXED", principal=account, host="*", operation="READ",
                              permission="ALLOW")
    assert "orders" in _request(_run(cluster, account, params))["typed"]
    # A person who left the tenant reads nothing more.
    gone = kafka_principal("user", 10**9)
    with pytest.raises(engine.ReportError, match="may not read subject"):
        _request(_run(cluster, gone, params))
