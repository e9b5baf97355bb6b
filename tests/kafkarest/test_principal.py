"""REST produce, v2 consumers and the WebSocket tail act on the broker as the caller's principal.

A real broker secured as a managed cluster's (tests/support/secured_broker.py: SASL_PLAINTEXT, the authorizer on, the
control plane's internal super user and the cluster's token key, stored as the cluster row's secrets); the
service's ASGI application served by a real uvicorn server in this process on a free port (so it reads the test
database), and real HTTP, WebSocket and Kafka clients.
The tenant's member has an API key; its owner's principal (``User:u-<id>``) gets ACLs from the test as the
control plane's ACL reconcile would write them.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ConfigResource,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from django.utils import timezone
from kio.schema.types import TopicName

from controlplane.audit.models import AuditEvent
from controlplane.audit.security import KAFKA_AUTH_FAILED, KAFKA_DENIED, REST_DENIED, ROWS_PER_MINUTE, WS_DENIED
from controlplane.clusters.models import Agent, BrokerNode, Cluster
from controlplane.clusters.principals import cluster_token_key
from controlplane.clusters.security_events import security_events_audit
from controlplane.kafkarest.access import clear_caches
from controlplane.kafkarest.produce.loop import produce_loop
from controlplane.kafkarest.v2.routing import router
from controlplane.tenancy.models import Role
from sluice.embedded import free_port
from tests.controlplane.conftest import TenantWorld, make_world
from tests.controlplane.factories import ClusterFactory
from tests.support.broker import BrokerProcess
from tests.support.secured_broker import secured_broker, store_secrets, super_user_config

pytestmark = [pytest.mark.xdist_group("principal"), pytest.mark.django_db(transaction=True)]

FLOOD = 1000


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with secured_broker(tmp_path_factory.mktemp("principal"), f"skc-{uuid.uuid4().hex[:10]}") as broker:
        yield broker


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    """The service's ASGI application on a real uvicorn server in this process (it reads the test database)."""
    import uvicorn

    from controlplane.asgi import application

    port = free_port()
    config = uvicorn.Config(application, host="127.0.0.1", port=port, lifespan="off", log_level="warning",
                            ws="websockets")
    served = uvicorn.Server(config)
    thread = threading.Thread(target=served.run, name="test-uvicorn", daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not served.started:
        assert time.monotonic() < deadline and thread.is_alive(), "uvicorn did not start"
        time.sleep(0.02)  # polling a condition, within the deadline
    try:
        yield f"127.0.0.1:{port}"
    finally:
        served.should_exit = True
        thread.join(30)
        produce_loop.close()  # the DRF paths' producers (uvicorn's loop closed its own) and the instances
        router.close_all()


class Setting:
    """The tenant, its cluster (the broker above) and the member's key; ACLs made on the broker as its admin."""

    def __init__(self, broker: BrokerProcess, world: TenantWorld) -> None:
        self.broker, self.world = broker, world
        key, secret = world.keys[Role.MEMBER]
        self.key = f"{key.key_id}:{secret}"
        self.principal = key.principal
        self.super_user = super_user_config(broker.bootstrap, broker.cluster_id)
        self.admin = AdminClient(self.super_user)
        self.cluster_id = broker.cluster_id

    def topic(self, partitions: int = 1) -> str:
        name = f"t-{uuid.uuid4().hex[:8]}"
        for future in self.admin.create_topics([NewTopic(name, partitions, 1)]).values():
            future.result(30)
        return name

    def grant(self, topic: str, *operations: Any, principal: str | None = None,
              resource: Any = ResourceType.TOPIC) -> None:
        bindings = [AclBinding(resource, topic, ResourcePatternType.LITERAL, principal or self.principal, "*",
                               operation, AclPermissionType.ALLOW) for operation in operations]
        for future in self.admin.create_acls(bindings).values():
            future.result(30)

    def revoke_all(self) -> None:
        match = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, self.principal, None,
                                 AclOperation.ANY, AclPermissionType.ANY)
        for future in self.admin.delete_acls([match]).values():
            future.result(30)

    def records(self, topic: str) -> list[bytes]:
        """Everything in partition 0 of ``topic``, read as the cluster's super user."""
        consumer = Consumer({**self.super_user, "group.id": f"check-{uuid.uuid4().hex[:6]}",
                             "enable.partition.eof": True, "auto.offset.reset": "earliest"})
        try:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10, cached=False)
            if high == low:
                return []
            consumer.assign([TopicPartition(topic, 0, low)])
            found: list[bytes] = []
            deadline = time.monotonic() + 20
            while len(found) < high - low and time.monotonic() < deadline:
                message = consumer.poll(1)
                if message is not None and message.error() is None:
                    found.append(message.value() or b"")
            return found
        finally:
            consumer.close()


@pytest.fixture
def setting(broker: BrokerProcess, server: str) -> Iterator[Setting]:
    clear_caches()
    world = make_world(f"p{uuid.uuid4().hex[:6]}")
    agent = Agent.objects.create(host=f"ext-{uuid.uuid4().hex[:6]}", advertised_host="127.0.0.1",
                                 port_min=broker.port, port_max=broker.port, last_seen=timezone.now(),
                                 started_at=timezone.now())
    cluster: Cluster = ClusterFactory(tenant=world.tenant, kafka_cluster_id=broker.cluster_id)
    store_secrets(cluster)
    BrokerNode.objects.create(cluster=cluster, node_id=1, agent=agent, port=broker.port)
    made = Setting(broker, world)
    try:
        yield made
    finally:
        made.revoke_all()
        clear_caches()


def broker_reports(cluster_id: str) -> list[Any]:
    """Take the security events the test broker wrote to its metadata store (not the test database)."""
    import os

    import psycopg

    from dataplane.cluster.security_store import SecurityStore
    from dataplane.cluster.store import MetadataStore

    with psycopg.connect(os.environ["DATABASE_URL"]) as conn:
        return SecurityStore(MetadataStore(conn, cluster_id)).take_security_events(5000)


def http(server: str, method: str, path: str, body: Any, key: str,
         content_type: str = "application/json") -> tuple[int, Any]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(f"http://{server}{path}", data=data, method=method,
                                     headers={"Content-Type": content_type,
                                              "Authorization": "Basic " + base64.b64encode(key.encode()).decode()})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")


def test_v3_produce_needs_write_on_the_topic_for_the_keys_owner(setting: Setting, server: str) -> None:
    topic = setting.topic()
    path = f"/kafka/v3/clusters/{setting.cluster_id}/topics/{topic}/records"
    record = {"value": {"type": "STRING", "data": "hello"}}

    status, body = http(server, "POST", path, record, setting.key)
    assert (status, body["error_code"]) == (403, 40301), body
    assert topic in body["message"]
    denied = AuditEvent.objects.get(action=REST_DENIED, tenant=setting.world.tenant)  # shown to its admins
    assert (denied.actor_id, denied.target_id) == (setting.principal, f"{setting.cluster_id}/{topic}")

    setting.grant(topic, AclOperation.DESCRIBE)  # it may see the topic, still not write to it
    clear_caches()
    status, body = http(server, "POST", path, record, setting.key)
    assert (status, body["error_code"]) == (403, 40301), body
    assert setting.records(topic) == []  # nothing was written

    setting.grant(topic, AclOperation.WRITE)
    deadline = time.monotonic() + 30  # the failed producer (no WRITE anywhere) is replaced within 5 s
    status, body = http(server, "POST", path, record, setting.key)
    while status == 403 and time.monotonic() < deadline:
        time.sleep(0.2)  # polling for the grant to take effect, within the deadline
        status, body = http(server, "POST", path, record, setting.key)
    assert (status, body["error_code"]) == (200, 200), body
    assert setting.records(topic) == [b"hello"]


def test_records_batch_and_v2_produce_are_refused_without_write(setting: Setting, server: str) -> None:
    topic = setting.topic()
    batch = {"entries": [{"id": "1", "value": {"type": "STRING", "data": "x"}}]}
    status, body = http(server, "POST", f"/kafka/v3/clusters/{setting.cluster_id}/topics/{topic}/records:batch",
                        batch, setting.key)
    assert (status, body["error_code"]) == (403, 40301), body
    status, body = http(server, "POST", f"/kafka/v2/clusters/{setting.cluster_id}/topics/{topic}",
                        {"records": [{"value": base64.b64encode(b"x").decode()}]}, setting.key,
                        content_type="application/vnd.kafka.binary.v2+json")
    assert (status, body["error_code"]) == (403, 40301), body
    assert setting.records(topic) == []

    setting.grant(topic, AclOperation.WRITE)

    def produce_v2() -> tuple[int, Any]:
        return http(server, "POST", f"/kafka/v2/clusters/{setting.cluster_id}/topics/{topic}",
                    {"records": [{"value": base64.b64encode(b"v2").decode()}]}, setting.key,
                    content_type="application/vnd.kafka.binary.v2+json")
    deadline = time.monotonic() + 30  # the failed producer (no WRITE anywhere) is replaced within 5 s
    status, body = produce_v2()
    while (status != 200 or body["offsets"][0].get("error_code")) and time.monotonic() < deadline:
        time.sleep(0.2)  # polling for the grant to take effect, within the deadline
        status, body = produce_v2()
    assert status == 200 and body["offsets"][0].get("error_code") is None, body
    assert setting.records(topic) == [b"v2"]


def test_v3_and_v2_topic_paths_see_and_change_only_what_the_callers_acls_allow(setting: Setting,
                                                                              server: str) -> None:
    from controlplane.resources.models import Topic

    visible, hidden = setting.topic(), setting.topic()
    setting.grant(visible, AclOperation.DESCRIBE)
    v3 = f"/kafka/v3/clusters/{setting.cluster_id}"

    status, body = http(server, "GET", f"{v3}/topics", None, setting.key)
    assert status == 200, body
    names = {t["topic_name"] for t in body["data"]}
    assert visible in names and hidden not in names  # Metadata lists only what the principal may describe
    status, body = http(server, "GET", f"{v3}/topics/{hidden}", None, setting.key)
    assert (status, body["error_code"]) == (404, 40401), body
    status, body = http(server, "GET", f"{v3}/topics/{hidden}/partitions/0/offset", None, setting.key)
    assert (status, body["error_code"]) == (404, 40401), body
    status, body = http(server, "GET", f"/kafka/v2/clusters/{setting.cluster_id}/topics", None, setting.key)
    assert status == 200 and visible in body and hidden not in body, body

    # Changes the member's role allows but the cluster's ACLs do not: refused, and nothing half-made.
    new = f"n-{uuid.uuid4().hex[:8]}"
    status, body = http(server, "POST", f"{v3}/topics", {"topic_name": new, "partitions_count": 1}, setting.key)
    assert (status, body["error_code"]) == (403, 40301), body
    assert not Topic.objects.filter(name=new).exists()
    status, body = http(server, "PATCH", f"{v3}/topics/{visible}", {"partitions_count": 3}, setting.key)
    assert (status, body["error_code"]) == (403, 40301), body
    status, body = http(server, "POST", f"{v3}/topics/{visible}/configs:alter",
                        {"data": [{"name": "retention.ms", "value": "1000"}]}, setting.key)
    assert (status, body["error_code"]) == (403, 40301), body
    status, body = http(server, "DELETE", f"{v3}/topics/{visible}", None, setting.key)
    assert (status, body["error_code"]) == (403, 40301), body
    listed = setting.admin.list_topics(visible, timeout=10).topics[visible]
    assert len(listed.partitions) == 1
    configs = setting.admin.describe_configs([ConfigResource("topic", visible)])
    assert next(iter(configs.values())).result(30)["retention.ms"].value != "1000"

    setting.grant(visible, AclOperation.ALTER)
    status, body = http(server, "PATCH", f"{v3}/topics/{visible}", {"partitions_count": 3}, setting.key)
    assert (status, body.get("partitions_count")) == (200, 3), body


def test_a_v2_consumer_reads_as_its_creator_and_serves_only_it(setting: Setting, server: str) -> None:
    topic = setting.topic()
    group = f"g-{uuid.uuid4().hex[:6]}"
    base = f"/kafka/v2/clusters/{setting.cluster_id}/consumers/{group}"
    v2 = "application/vnd.kafka.v2+json"
    status, made = http(server, "POST", base, {"name": "c1", "format": "binary", "auto.offset.reset": "earliest"},
                        setting.key, content_type=v2)
    assert status == 200, made
    instance = f"{base}/instances/c1"
    try:
        status, body = http(server, "POST", f"{instance}/subscription", {"topics": [topic]}, setting.key,
                            content_type=v2)
        assert status == 204, body

        def read() -> tuple[int, Any]:
            request = urllib.request.Request(
                f"http://{server}{instance}/records?timeout=3000", method="GET",
                headers={"Accept": "application/vnd.kafka.binary.v2+json",
                         "Authorization": "Basic " + base64.b64encode(setting.key.encode()).decode()})
            try:
                with urllib.request.urlopen(request, timeout=60) as response:
                    return response.status, json.loads(response.read())
            except urllib.error.HTTPError as exc:
                return exc.code, json.loads(exc.read())
        deadline = time.monotonic() + 30
        status, body = read()
        while status == 200 and time.monotonic() < deadline:  # the group's join is refused a little later
            status, body = read()
        assert (status, body["error_code"]) == (403, 40301), body

        other_key, other_secret = setting.world.keys[Role.OWNER]  # another principal of the same tenant
        status, body = http(server, "POST", f"{instance}/subscription", {"topics": [topic]},
                            f"{other_key.key_id}:{other_secret}", content_type=v2)
        assert (status, body["error_code"]) == (404, 40403), body
    finally:
        request = urllib.request.Request(f"http://{server}{instance}", method="DELETE", headers={
            "Content-Type": v2, "Authorization": "Basic " + base64.b64encode(setting.key.encode()).decode()})
        urllib.request.urlopen(request, timeout=30).close()


async def _tail_frames(server: str, path: str, key: str, count: int) -> list[dict[str, Any]]:
    from websockets.asyncio.client import connect
    from websockets.exceptions import ConnectionClosed

    frames: list[dict[str, Any]] = []
    headers = {"Authorization": "Basic " + base64.b64encode(key.encode()).decode()}
    async with connect(f"ws://{server}{path}", additional_headers=headers, open_timeout=30) as ws:
        with contextlib.suppress(ConnectionClosed):  # refused at once: the error frame is still there to read
            await ws.send(json.dumps({"type": "subscribe", "from": "earliest"}))
        try:
            while len(frames) < count:
                frames.append(json.loads(await asyncio.wait_for(ws.recv(), 30)))
        except ConnectionClosed:
            pass
        frames.append({"type": "closed", "code": ws.close_code})
    return frames


def test_a_tail_without_read_gets_an_error_frame_then_a_close(setting: Setting, server: str) -> None:
    topic = setting.topic()
    path = f"/ws/clusters/{setting.cluster_id}/topics/{topic}/tail"

    frames = asyncio.run(_tail_frames(server, path, setting.key, 5))  # no ACL at all: the topic is invisible
    assert frames[0]["type"] == "error" and frames[0]["code"] == "not_authorized", frames
    assert frames[-1] == {"type": "closed", "code": 4403}
    assert AuditEvent.objects.filter(action=WS_DENIED, tenant=setting.world.tenant, actor_id=setting.principal,
                                     target_id=f"{setting.cluster_id}/{topic}").exists()

    setting.grant(topic, AclOperation.DESCRIBE)  # sees the topic, may not read it
    clear_caches()
    frames = asyncio.run(_tail_frames(server, path, setting.key, 5))
    errors = [f for f in frames if f["type"] == "error"]
    assert errors and errors[0]["code"] == "not_authorized", frames
    assert frames[-1] == {"type": "closed", "code": 4403}

    admin_producer = Producer(setting.super_user)
    admin_producer.produce(topic, b"visible")
    admin_producer.flush(20)
    setting.grant(topic, AclOperation.READ)
    frames = asyncio.run(_tail_frames(server, path, setting.key, 2))
    assert [f["type"] for f in frames[:2]] == ["subscribed", "records"], frames


def test_brokers_report_sasl_failures_and_acl_denials_into_the_tenants_audit_trail(setting: Setting) -> None:
    from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic

    from dataplane.security.oauthbearer import mint
    from tests.support.wire import KafkaWire

    topic = setting.topic()
    token, _ = mint(cluster_token_key(setting.cluster_id), principal_name=setting.principal.removeprefix("User:"),
                    audience=setting.cluster_id, lifetime_seconds=300)
    named = MetadataRequest(topics=(MetadataRequestTopic(topic_id=None, name=TopicName(topic)),),
                            allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    with KafkaWire(setting.broker.port) as wire:  # a flood of denied requests from one principal
        wire.authenticate_token(token)
        for _ in range(FLOOD):
            answer = wire.call(named)
            assert answer.topics[0].error_code.name == "topic_authorization_failed"
    with KafkaWire(setting.broker.port) as wire, pytest.raises(PermissionError):
        wire.authenticate("PLAIN", "mallory", "guess")

    cluster = Cluster.objects.get(kafka_cluster_id=setting.cluster_id)
    tenant = setting.world.tenant
    denied = AuditEvent.objects.filter(tenant=tenant, action=KAFKA_DENIED, actor_id=setting.principal)
    failed = AuditEvent.objects.filter(tenant=tenant, action=KAFKA_AUTH_FAILED, actor_id="User:mallory")
    deadline = time.monotonic() + 60
    while (sum(denied.values_list("count", flat=True)) < FLOOD or not failed.exists()) \
            and time.monotonic() < deadline:
        # What the beat task's ingest does, from the database the test broker reports to.
        security_events_audit(cluster=cluster, events=broker_reports(setting.cluster_id))
        time.sleep(0.5)  # polling for the broker's next report, within the deadline
    assert sum(denied.values_list("count", flat=True)) == FLOOD
    assert denied.count() <= 2 * ROWS_PER_MINUTE  # a flood of denials is a bounded number of rows
    assert {row.target_id for row in denied} == {f"{setting.cluster_id}/{topic}"}
    assert failed.get().data["detail"] == "PLAIN"


def test_spark_options_read_as_the_reports_principal(setting: Setting) -> None:
    """The options a Spark report passes to the Sluice data source: its clients authenticate as the principal."""
    from controlplane.clusters.principals import spark_options_for
    from dataplane.client.spark.fetch import fetch_range
    from dataplane.client.spark.options import SparkSourceError
    from dataplane.client.spark.options import client_config as source_client_config
    from dataplane.client.spark.plan import OffsetRange

    topic = setting.topic()
    producer = Producer(setting.super_user)
    producer.produce(topic, b"for the report")
    producer.flush(20)
    cluster = Cluster.objects.get(kafka_cluster_id=setting.cluster_id)
    options = spark_options_for(cluster, setting.principal)
    assert all(isinstance(v, str) for v in options.values())  # they travel to Spark executors as strings
    assert "kafka.sasl.password" not in options and options["kafka.sasl.mechanisms"] == "OAUTHBEARER"

    def read() -> list[bytes]:
        batches = fetch_range(source_client_config(options), OffsetRange(topic, 0, 0, 1), poll_timeout_ms=20_000)
        return [value.as_py() for batch in batches for value in batch.column("value")]

    setting.grant(topic, AclOperation.DESCRIBE)  # it may see the topic (a report plans its ranges), not read it
    with pytest.raises(SparkSourceError, match="not authorized"):
        read()
    setting.grant(topic, AclOperation.READ)
    assert read() == [b"for the report"]
