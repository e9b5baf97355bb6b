"""API keys as Kafka credentials on managed clusters: real agents, real brokers, real clients.

A managed cluster's listener is SASL_PLAINTEXT with the authorizer on; an API key logs in with
username = key id and password = secret (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512) as its owner's principal,
so the ACLs bound to the owner decide. confluent-kafka, kafka-python and aiokafka each produce and
consume; a wrong secret, another tenant's key and a key scoped to another cluster are refused with
SASL_AUTHENTICATION_FAILED; revoking a key closes its open connection within 5 s.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.types import TopicName

from controlplane.tenancy.models import Role
from tests.controlplane.conftest import TenantWorld, make_world
from tests.controlplane.managed.conftest import Stack, wait_for
from tests.controlplane.managed.test_lifecycle import _condition, _delete_and_wait, _ready, _status
from tests.support.wire import KafkaWire

pytestmark = [pytest.mark.xdist_group("heavy"), pytest.mark.timeout(600)]

MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
TOPIC_AUTHORIZATION_FAILED = 29
QUIET = {"log_level": 0, "logger": lambda *args: None}


def _create_cluster(world: TenantWorld, name: str) -> str:
    created = world.client(Role.ADMIN).post(f"{world.base}/clusters", {"name": name, "plan": "basic"}, format="json")
    assert created.status_code == 201, created.content
    return str(created.json()["id"])


def _api(world: TenantWorld, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
    client = world.client(Role.OWNER)
    response = getattr(client, method)(f"{world.base}{path}", body, format="json")
    assert response.status_code < 300, (response.status_code, response.content)
    return response.json() if response.content else None


def _service_account_key(world: TenantWorld, cluster_id: str | None = None) -> tuple[str, str, str]:
    """A new service account (role member) and a key of its own: (principal, key id, secret)."""
    account = _api(world, "post", "/service-accounts", {"name": f"app-{uuid.uuid4().hex[:6]}", "role": "member"})
    made = _api(world, "post", "/api-keys", {"service_account": account["id"],
                                             **({"cluster": cluster_id} if cluster_id else {})})
    assert made["sasl_mechanisms"] == list(MECHANISMS)
    return f"User:sa-{account['id']}", made["key_id"], made["secret"]


def _config(bootstrap: str, key_id: str, secret: str, mechanism: str = "PLAIN") -> dict[str, Any]:
    return {"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mechanism,
            "sasl.username": key_id, "sasl.password": secret, **QUIET}


def _wire(bootstrap: str) -> KafkaWire:
    host, _, port = bootstrap.split(",")[0].rpartition(":")
    return KafkaWire(int(port), host=host, timeout=10)


def _logs_in(bootstrap: str, key_id: str, secret: str, mechanism: str = "PLAIN") -> bool:
    """One SASL exchange on a fresh connection: whether the broker accepted it."""
    with _wire(bootstrap) as wire:
        try:
            wire.authenticate(mechanism, key_id, secret)
        except PermissionError as refused:
            assert "sasl_authentication_failed" in str(refused).lower(), refused
            return False
    return True


def _eventually(check: Callable[[], bool], what: str, stack: Stack, timeout: float = 30) -> None:
    wait_for(check, timeout, what, stack)


def _round_trip_confluent(config: dict[str, Any], topic: str, value: bytes) -> None:
    producer = Producer(config)
    errors: list[Any] = []
    producer.produce(topic, value, on_delivery=lambda err, msg: errors.append(err))
    assert producer.flush(30) == 0 and errors == [None], errors
    consumer = Consumer({**config, "group.id": f"g-{uuid.uuid4().hex[:6]}", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            message = consumer.poll(1)
            if message is not None and message.error() is None and message.value() == value:
                return
        raise AssertionError(f"confluent-kafka never read {value!r} back")
    finally:
        consumer.close()


def _kafka_python_kwargs(bootstrap: str, key_id: str, secret: str, mechanism: str) -> dict[str, Any]:
    return {"bootstrap_servers": bootstrap.split(","), "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": mechanism, "sasl_plain_username": key_id, "sasl_plain_password": secret,
            "request_timeout_ms": 15_000}


def _round_trip_kafka_python(kwargs: dict[str, Any], topic: str, value: bytes) -> None:
    from kafka import KafkaConsumer, KafkaProducer

    producer = KafkaProducer(**kwargs)
    try:
        producer.send(topic, value).get(timeout=30)
    finally:
        producer.close()
    consumer = KafkaConsumer(topic, group_id=f"g-{uuid.uuid4().hex[:6]}", auto_offset_reset="earliest",
                             consumer_timeout_ms=20_000, **kwargs)
    try:
        assert value in {m.value for m in consumer}, f"kafka-python never read {value!r} back"
    finally:
        consumer.close()


def _round_trip_aiokafka(kwargs: dict[str, Any], topic: str, value: bytes) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    async def run() -> None:
        producer = AIOKafkaProducer(**kwargs)
        await producer.start()
        try:
            await producer.send_and_wait(topic, value)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(topic, group_id=f"g-{uuid.uuid4().hex[:6]}", auto_offset_reset="earliest",
                                    **kwargs)
        await consumer.start()
        try:
            async with asyncio.timeout(30):
                async for message in consumer:
                    if message.value == value:
                        return
        finally:
            await consumer.stop()
    asyncio.run(run())


def _grant(world: TenantWorld, cluster_id: str, principal: str, topic: str) -> None:
    for operation in ("WRITE", "READ"):
        _api(world, "post", f"/clusters/{cluster_id}/acls",
             {"principal": principal, "resource_type": "TOPIC", "resource_name": topic, "operation": operation})
    _api(world, "post", f"/clusters/{cluster_id}/acls",
         {"principal": principal, "resource_type": "GROUP", "pattern_type": "PREFIXED", "resource_name": "g-",
          "operation": "READ"})


def _acls_applied(cluster_id: str, principal: str, count: int) -> bool:
    """Whether the cluster holds ``count`` ACLs of ``principal`` (asked as the control plane asks)."""
    from controlplane.clusters.kafka_clients import admin_as_internal
    from controlplane.clusters.models import Cluster

    with admin_as_internal(Cluster.objects.get(pk=cluster_id)) as admin:
        return sum(1 for acl in admin.acls() if acl.principal == principal) == count


@pytest.mark.django_db(transaction=True)
def test_api_keys_authenticate_as_their_owner_and_acls_decide(stack: Stack) -> None:
    world, other_tenant = make_world(f"k{uuid.uuid4().hex[:6]}"), make_world(f"n{uuid.uuid4().hex[:6]}")
    cluster_id = _create_cluster(world, "creds")
    try:
        body = wait_for(lambda: _ready(world, cluster_id), 90, "Ready", stack,
                        lambda: _status(world, cluster_id)["status"])
        status = body["status"]
        bootstrap = status["bootstrap_servers"]
        assert status["security_protocol"] == "SASL_PLAINTEXT"
        assert status["sasl_mechanisms"] == list(MECHANISMS)
        _api(world, "post", f"/clusters/{cluster_id}/topics", {"name": "orders", "partitions": 1})
        wait_for(lambda: _condition(_api(world, "get", f"/clusters/{cluster_id}/topics/orders"), "Ready").get(
            "status") == "True", 60, "the topic", stack)

        # Nobody gets in without credentials, or with a wrong secret.
        with _wire(bootstrap) as wire, pytest.raises(ConnectionError):
            wire.call(MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                      include_topic_authorized_operations=False))
        principal, key_id, secret = _service_account_key(world)
        _eventually(lambda: _logs_in(bootstrap, key_id, secret), "the new key to log in", stack)
        for mechanism in MECHANISMS:
            assert _logs_in(bootstrap, key_id, secret, mechanism)
            assert not _logs_in(bootstrap, key_id, secret[:-1] + ("A" if secret[-1] != "A" else "B"), mechanism)
        with pytest.raises(KafkaException):
            AdminClient(_config(bootstrap, key_id, "wrong")).list_topics(timeout=5)

        # Another tenant's key is unknown here.
        foreign_key, foreign_secret = other_tenant.keys[Role.OWNER]
        assert not _logs_in(bootstrap, foreign_key.key_id, foreign_secret)

        # A principal without ACLs is denied; with them, every client and mechanism produces and consumes.
        producer = Producer(_config(bootstrap, key_id, secret, "SCRAM-SHA-256"))
        denied: list[Any] = []
        producer.produce("orders", b"no", on_delivery=lambda err, msg: denied.append(err))
        producer.flush(30)
        assert denied and denied[0] is not None and denied[0].code() == TOPIC_AUTHORIZATION_FAILED
        with _wire(bootstrap) as wire:
            wire.authenticate("PLAIN", key_id, secret)
            answer = wire.call(MetadataRequest(topics=(MetadataRequestTopic(topic_id=uuid.UUID(int=0),
                                                                            name=TopicName("orders")),),
                                               allow_auto_topic_creation=False,
                                               include_topic_authorized_operations=False))
            assert answer.topics[0].error_code.value == TOPIC_AUTHORIZATION_FAILED
        _grant(world, cluster_id, principal, "orders")
        _eventually(lambda: _acls_applied(cluster_id, principal, 3), "the ACLs in the cluster", stack, 60)
        for mechanism in MECHANISMS:
            tag = f"{mechanism}-{uuid.uuid4().hex[:6]}".encode()
            _round_trip_confluent(_config(bootstrap, key_id, secret, mechanism), "orders", b"ck-" + tag)
            kwargs = _kafka_python_kwargs(bootstrap, key_id, secret, mechanism)
            _round_trip_kafka_python(kwargs, "orders", b"kp-" + tag)
            _round_trip_aiokafka(kwargs, "orders", b"aio-" + tag)

        # The tenant's owner may do anything with a key of their own (allow-all derived from the role).
        owner_key, owner_secret = world.keys[Role.OWNER]
        _round_trip_confluent(_config(bootstrap, owner_key.key_id, owner_secret), "orders", b"from the owner")
    finally:
        _delete_and_wait(world, cluster_id, stack)


@pytest.mark.django_db(transaction=True)
def test_revocation_closes_connections_and_scoped_keys_stay_on_their_cluster(stack: Stack) -> None:
    world = make_world(f"r{uuid.uuid4().hex[:6]}")
    first, second = _create_cluster(world, "first"), _create_cluster(world, "second")
    try:
        bootstraps = {}
        for cluster_id in (first, second):
            body = wait_for(lambda c=cluster_id: _ready(world, c), 90, "Ready", stack,
                            lambda c=cluster_id: _status(world, c)["status"])
            bootstraps[cluster_id] = body["status"]["bootstrap_servers"]

        # A key scoped to the second cluster logs in there only.
        made = _api(world, "post", "/api-keys", {"cluster": second})
        _eventually(lambda: _logs_in(bootstraps[second], made["key_id"], made["secret"], "SCRAM-SHA-512"),
                    "the scoped key on its cluster", stack)
        for mechanism in MECHANISMS:
            assert not _logs_in(bootstraps[first], made["key_id"], made["secret"], mechanism)

        # Revoking a key closes its open connections within 5 s; it logs in nowhere after that.
        _, key_id, secret = _service_account_key(world)
        for cluster_id in (first, second):
            _eventually(lambda c=cluster_id: _logs_in(bootstraps[c], key_id, secret), "the key to log in", stack)
        wires = []
        for cluster_id, mechanism in ((first, "PLAIN"), (second, "SCRAM-SHA-256")):
            wire = _wire(bootstraps[cluster_id])
            wire.authenticate(mechanism, key_id, secret)
            wires.append(wire)
        try:
            response = world.client(Role.OWNER).delete(f"{world.base}/api-keys/{key_id}")
            assert response.status_code in (200, 204), response.content
            for wire in wires:
                wire.sock.settimeout(5)  # the promise: closed by the broker within 5 s of the revocation
                assert wire.sock.recv(1) == b""
        finally:
            for wire in wires:
                wire.close()
        for cluster_id in (first, second):
            for mechanism in MECHANISMS:
                assert not _logs_in(bootstraps[cluster_id], key_id, secret, mechanism)
    finally:
        for cluster_id in (first, second):
            _delete_and_wait(world, cluster_id, stack)


def _kcat(bootstrap: str, key_id: str, secret: str, mechanism: str, *args: str, given: bytes = b"") -> list[bytes]:
    """Run Debian's kcat (librdkafka 2.0) logged in with an API key; its output lines."""
    done = subprocess.run(["kcat", "-b", bootstrap, "-X", "security.protocol=SASL_PLAINTEXT",
                           "-X", f"sasl.mechanisms={mechanism}", "-X", f"sasl.username={key_id}",
                           "-X", f"sasl.password={secret}", *args], input=given, capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    return done.stdout.splitlines()


def _ready_with_owner_key(world: Any, cluster_id: str, stack: Stack) -> tuple[str, Any, str]:
    """(bootstrap, key, secret) once the cluster is Ready and the owner's key logs in to it."""
    body = wait_for(lambda: _ready(world, cluster_id), 90, "Ready", stack,
                    lambda: _status(world, cluster_id)["status"])
    bootstrap = body["status"]["bootstrap_servers"]
    key, secret = world.keys[Role.OWNER]
    _eventually(lambda: _logs_in(bootstrap, key.key_id, secret), "the key to log in", stack)
    return bootstrap, key, secret


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed (`make kcat` installs Debian's)")
@pytest.mark.django_db(transaction=True)
def test_kcat_produces_and_consumes_with_an_api_key(stack: Stack) -> None:
    """librdkafka 2.0 (kcat) checks SaslHandshake 0..0 is advertised before it logs in at all."""
    world = make_world(f"c{uuid.uuid4().hex[:6]}")
    cluster_id = _create_cluster(world, "kcat")
    try:
        bootstrap, key, secret = _ready_with_owner_key(world, cluster_id, stack)
        for mechanism in MECHANISMS:
            topic = f"kcat-{mechanism.lower()}"
            _api(world, "post", f"/clusters/{cluster_id}/topics", {"name": topic, "partitions": 2})
            wait_for(lambda t=topic: _condition(_api(world, "get", f"/clusters/{cluster_id}/topics/{t}"),
                                                "Ready").get("status") == "True", 60, "the topic", stack)
            lines = [f"{mechanism}-{n}".encode() for n in range(10)]
            _kcat(bootstrap, key.key_id, secret, mechanism, "-P", "-t", topic, "-z", "gzip",
                  given=b"\n".join(lines) + b"\n")
            read = _kcat(bootstrap, key.key_id, secret, mechanism, "-C", "-t", topic, "-o", "beginning", "-e")
            assert sorted(read) == sorted(lines)
            grouped = _kcat(bootstrap, key.key_id, secret, mechanism, "-G", f"g-kcat-{mechanism.lower()}", "-e",
                            "-X", "auto.offset.reset=earliest", topic)
            assert sorted(grouped) == sorted(lines)
    finally:
        _delete_and_wait(world, cluster_id, stack)


POLICY_VIOLATION = 44


def _kafka_error(future: Any) -> Any:
    with pytest.raises(KafkaException) as caught:
        future.result(30)
    return caught.value.args[0]


@pytest.mark.django_db(transaction=True)
def test_the_plans_partition_limit_holds_over_the_kafka_protocol(stack: Stack) -> None:
    """CreateTopics and CreatePartitions from a Kafka client meet max_partitions; raising it reaches the brokers.
    (Here rather than in a module of its own: this module's stack is already running.)"""
    from confluent_kafka.admin import NewPartitions, NewTopic

    world = make_world(f"p{uuid.uuid4().hex[:6]}")
    created = world.client(Role.ADMIN).post(f"{world.base}/clusters", {"name": "limited", "plan": "basic",
                                                                       "max_partitions": 4}, format="json")
    assert created.status_code == 201, created.content
    cluster_id = str(created.json()["id"])
    try:
        bootstrap, key, secret = _ready_with_owner_key(world, cluster_id, stack)
        admin = AdminClient(_config(bootstrap, key.key_id, secret, "SCRAM-SHA-512"))
        [fits] = admin.create_topics([NewTopic("fits", 3)]).values()
        fits.result(30)
        for validate_only in (True, False):
            [over] = admin.create_topics([NewTopic("over", 2)], validate_only=validate_only).values()
            error = _kafka_error(over)
            assert error.code() == POLICY_VIOLATION, error
            assert "allows 4 partitions" in error.str() and "3 are in use" in error.str(), error.str()
        [grow] = admin.create_partitions([NewPartitions("fits", 5)]).values()
        assert _kafka_error(grow).code() == POLICY_VIOLATION
        assert "over" not in admin.list_topics(timeout=10).topics

        _api(world, "patch", f"/clusters/{cluster_id}", {"max_partitions": 6})

        def grown() -> bool:
            [again] = admin.create_partitions([NewPartitions("fits", 5)]).values()
            try:
                again.result(30)
            except KafkaException as exc:
                assert exc.args[0].code() == POLICY_VIOLATION, exc
                return False
            return True
        _eventually(grown, "the raised limit to reach the brokers", stack, 60)
        [still_over] = admin.create_topics([NewTopic("over", 2)]).values()
        assert _kafka_error(still_over).code() == POLICY_VIOLATION  # 5 in use, 6 allowed
    finally:
        _delete_and_wait(world, cluster_id, stack)
