"""SASL and ACLs on a real broker with real clients (confluent-kafka, kafka-python, aiokafka) and wire requests.

One broker with a SASL_PLAINTEXT listener and the authorizer on; credentials are
seeded into the metadata store before it starts, as the control plane would write
them (PLAIN hashes, SCRAM credentials), and ACLs go in through CreateAcls.
"""

from __future__ import annotations

import asyncio
import datetime
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from confluent_kafka import Consumer, KafkaException, Producer
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
from kio.schema.describe_acls.v3.request import DescribeAclsRequest
from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.metadata.v12.request import MetadataRequest
from kio.schema.offset_commit.v9.request import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from kio.schema.types import BrokerId, GroupId, TopicName
from kio.static.primitive import i8, i32, i32Timedelta, i64

from dataplane.cluster.migrations import migrate
from dataplane.cluster.security_store import SecurityStore
from dataplane.cluster.store import MetadataStore
from dataplane.security.sasl import plain_hash
from dataplane.security.scram import derive
from tests.support.broker import BrokerProcess
from tests.support.wire import KafkaWire

pytestmark = pytest.mark.xdist_group("security")

MECHANISMS = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
USERS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
QUIET = {"log_level": 0, "logger": lambda *args: None}
TOPIC_AUTHORIZATION_FAILED, GROUP_AUTHORIZATION_FAILED, CLUSTER_AUTHORIZATION_FAILED = 29, 30, 31


def seed_credentials(cluster_id: str) -> None:
    """What the control plane does when an API key is made: hashes and SCRAM credentials, never the secret."""
    url = os.environ["DATABASE_URL"]
    migrate(url, "sluice_meta")
    with psycopg.connect(url) as conn:
        store = MetadataStore(conn, cluster_id)
        store.ensure_cluster()
        security = SecurityStore(store)
        for user, secret in USERS.items():
            security.set_plain_credential(user, plain_hash(secret))
            for mechanism in MECHANISMS[1:]:
                security.set_scram_credential(user, mechanism, derive(mechanism, secret))


def sasl_config_file(directory: Path) -> Path:
    path = directory / "broker.toml"
    path.write_text('listeners = "SASL_PLAINTEXT://127.0.0.1:0"\n'
                    "authorizer.enabled = true\n"
                    'super.users = "User:admin"\n'
                    'inter.broker.sasl.username = "broker"\n'
                    'inter.broker.sasl.password = "broker-secret"\n')
    return path


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    root = tmp_path_factory.mktemp("secure")
    broker = BrokerProcess(root / "data", f"test-{uuid.uuid4().hex[:12]}",
                          extra_args=["--config", str(sasl_config_file(root))])
    seed_credentials(broker.cluster_id)
    broker.start()
    try:
        admin = admin_client(broker, "admin")
        for future in admin.create_topics([NewTopic("orders", 1, 1), NewTopic("secret", 1, 1)]).values():
            future.result(30)
        alice = [
            AclBinding(ResourceType.TOPIC, "orders", ResourcePatternType.LITERAL, "User:alice", "*",
                       AclOperation.WRITE, AclPermissionType.ALLOW),
            AclBinding(ResourceType.TOPIC, "ord", ResourcePatternType.PREFIXED, "User:alice", "*",
                       AclOperation.READ, AclPermissionType.ALLOW),
            AclBinding(ResourceType.GROUP, "g1", ResourcePatternType.LITERAL, "User:alice", "*",
                       AclOperation.READ, AclPermissionType.ALLOW),
        ]
        for future in admin.create_acls(alice).values():
            future.result(30)
        yield broker
    finally:
        broker.stop()


def client_config(broker: BrokerProcess, user: str, mechanism: str = "PLAIN",
                  password: str | None = None) -> dict[str, Any]:
    return {"bootstrap.servers": broker.bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": mechanism, "sasl.username": user,
            "sasl.password": USERS.get(user, "") if password is None else password, **QUIET}


def admin_client(broker: BrokerProcess, user: str, mechanism: str = "PLAIN") -> AdminClient:
    return AdminClient(client_config(broker, user, mechanism))


# ---------------------------------------------------------------------- authentication, three client libraries


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_confluent_kafka_authenticates_and_a_wrong_secret_is_refused(secure: BrokerProcess, mechanism: str) -> None:
    topics = AdminClient(client_config(secure, "alice", mechanism)).list_topics(timeout=20).topics
    assert "orders" in topics and "secret" not in topics  # Metadata lists what alice may describe
    wrong = AdminClient(client_config(secure, "alice", mechanism, password="nope"))
    with pytest.raises(KafkaException):
        wrong.list_topics(timeout=5)


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_kafka_python_authenticates_and_a_wrong_secret_is_refused(secure: BrokerProcess, mechanism: str,
                                                                  caplog: pytest.LogCaptureFixture) -> None:
    from kafka import KafkaConsumer
    from kafka.errors import KafkaError

    def consumer(password: str) -> KafkaConsumer:
        return KafkaConsumer(bootstrap_servers=secure.bootstrap, security_protocol="SASL_PLAINTEXT",
                             sasl_mechanism=mechanism, sasl_plain_username="alice", sasl_plain_password=password,
                             request_timeout_ms=10_000)
    good = consumer(USERS["alice"])
    try:
        assert "orders" in good.topics() and "secret" not in good.topics()
    finally:
        good.close()
    from kafka.admin import KafkaAdminClient
    with pytest.raises(KafkaError):  # it retries the bootstrap, then gives up
        KafkaAdminClient(bootstrap_servers=secure.bootstrap, security_protocol="SASL_PLAINTEXT",
                         sasl_mechanism=mechanism, sasl_plain_username="alice", sasl_plain_password="nope",
                         bootstrap_timeout_ms=3_000)
    assert "SaslAuthenticationFailedError" in caplog.text  # ... having been told why


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_aiokafka_authenticates_and_a_wrong_secret_is_refused(secure: BrokerProcess, mechanism: str) -> None:
    from aiokafka import AIOKafkaProducer
    from aiokafka.errors import KafkaError

    async def produce(password: str) -> None:
        producer = AIOKafkaProducer(bootstrap_servers=secure.bootstrap, security_protocol="SASL_PLAINTEXT",
                                    sasl_mechanism=mechanism, sasl_plain_username="alice",
                                    sasl_plain_password=password, request_timeout_ms=10_000)
        try:
            await producer.start()
            await producer.send_and_wait("orders", b"from aiokafka")
        finally:
            await producer.stop()
    asyncio.run(produce(USERS["alice"]))
    with pytest.raises(KafkaError):
        asyncio.run(produce("nope"))


def test_unauthenticated_requests_are_refused_and_the_connection_closed(secure: BrokerProcess) -> None:
    with KafkaWire(secure.port) as wire, pytest.raises(ConnectionError):
        wire.call(MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                  include_topic_authorized_operations=False))
    with KafkaWire(secure.port) as wire:
        with pytest.raises(PermissionError, match=r"(?i)sasl_authentication_failed"):
            wire.authenticate("SCRAM-SHA-256", "mallory", "guess")
        with pytest.raises((ConnectionError, OSError)):  # closed after the failure's answer
            wire.authenticate("PLAIN", "alice", USERS["alice"])
    with KafkaWire(secure.port) as wire, pytest.raises(PermissionError, match=r"(?i)unsupported_sasl_mechanism"):
        wire.authenticate("GSSAPI", "alice", "x")


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_handshake_v0_logs_in_with_bare_token_frames(secure: BrokerProcess, mechanism: str) -> None:
    """KIP-43's framing, which Kafka 4.0 still serves: after SaslHandshake v0 the tokens travel as bare frames."""
    metadata = MetadataRequest(topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    with KafkaWire(secure.port) as wire:
        wire.authenticate(mechanism, "alice", USERS["alice"], handshake_version=0)
        topics = {str(topic.name) for topic in wire.call(metadata).topics}
        assert "orders" in topics and "secret" not in topics  # requests again, as alice
    with KafkaWire(secure.port) as wire, pytest.raises(ConnectionError):  # no answer to a bad login: a close
        wire.authenticate(mechanism, "alice", "nope", handshake_version=0)


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_kafka_python_as_a_0_10_client_logs_in_with_handshake_v0(secure: BrokerProcess, mechanism: str) -> None:
    """kafka-python pinned to broker 0.10.0 has no SaslAuthenticate (Kafka 1.0): handshake v0 and bare tokens."""
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(bootstrap_servers=secure.bootstrap, security_protocol="SASL_PLAINTEXT",
                             api_version=(0, 10, 0), sasl_mechanism=mechanism, sasl_plain_username="alice",
                             sasl_plain_password=USERS["alice"], request_timeout_ms=10_000)
    try:
        topics = consumer.topics()
        assert "orders" in topics and "secret" not in topics
    finally:
        consumer.close()


def test_handshake_v0_is_advertised_for_librdkafka(secure: BrokerProcess) -> None:
    """librdkafka tests SaslHandshake 0..0 before any SASL login ("SASL Handshake not supported by broker")."""
    from kio.schema.api_versions.v3.request import ApiVersionsRequest

    with KafkaWire(secure.port) as wire:
        versions = wire.call(ApiVersionsRequest(client_software_name="t", client_software_version="1"))
    [entry] = [entry for entry in versions.api_keys if entry.api_key == 17]
    assert (entry.min_version, entry.max_version) == (0, 1)


# ---------------------------------------------------------------------- authorization


def fetch_request(topic: str, replica_id: int = -1) -> FetchRequest:
    return FetchRequest(
        cluster_id=None, replica_id=BrokerId(replica_id), max_wait=i32Timedelta.parse(datetime.timedelta(0)),
        min_bytes=i32(0), max_bytes=i32(1 << 20), isolation_level=i8(0), session_id=i32(0), session_epoch=i32(-1),
        topics=(FetchTopic(topic=TopicName(topic), partitions=(FetchPartition(
            partition=i32(0), current_leader_epoch=i32(-1), fetch_offset=i64(0), last_fetched_epoch=i32(-1),
            log_start_offset=i64(-1), partition_max_bytes=i32(1 << 20)),)),),
        forgotten_topics_data=(), rack_id="")


def test_produce_consume_and_groups_follow_the_acls(secure: BrokerProcess) -> None:
    producer = Producer(client_config(secure, "alice", "SCRAM-SHA-512"))
    outcomes: dict[str, int | None] = {}
    for topic in ("orders", "secret"):
        producer.produce(topic, b"v", on_delivery=lambda err, msg, t=topic: outcomes.__setitem__(
            t, None if err is None else err.code()))
    producer.flush(30)
    assert outcomes == {"orders": None, "secret": TOPIC_AUTHORIZATION_FAILED}

    consumer = Consumer({**client_config(secure, "alice", "SCRAM-SHA-256"), "group.id": "g1",
                         "auto.offset.reset": "earliest"})
    consumer.subscribe(["orders"])
    try:
        message = None
        for _ in range(60):
            message = consumer.poll(1)
            if message is not None and message.error() is None:
                break
        assert message is not None and message.error() is None  # READ on the topic (prefixed) and the group
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()

    denied = Consumer({**client_config(secure, "alice"), "group.id": "g2", "auto.offset.reset": "earliest"})
    denied.subscribe(["orders"])
    try:
        error = None
        for _ in range(60):
            message = denied.poll(1)
            if message is not None and message.error() is not None:
                error = message.error().code()
                break
        assert error == GROUP_AUTHORIZATION_FAILED
    finally:
        denied.close()


def test_wire_level_error_codes(secure: BrokerProcess) -> None:
    with KafkaWire(secure.port) as wire:
        wire.authenticate("PLAIN", "alice", USERS["alice"])
        fetched = wire.call(fetch_request("secret"))
        assert fetched.responses[0].partitions[0].error_code.value == TOPIC_AUTHORIZATION_FAILED
        assert wire.call(fetch_request("orders")).responses[0].partitions[0].error_code.value == 0
        commit = wire.call(OffsetCommitRequest(
            group_id=GroupId("g2"), generation_id_or_member_epoch=i32(-1), member_id="", group_instance_id=None,
            topics=(OffsetCommitRequestTopic(name=TopicName("orders"), partitions=(OffsetCommitRequestPartition(
                partition_index=i32(0), committed_offset=i64(0), committed_leader_epoch=i32(-1),
                committed_metadata=None),)),)))
        assert commit.topics[0].partitions[0].error_code.value == GROUP_AUTHORIZATION_FAILED
        listed = wire.call(MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                           include_topic_authorized_operations=True))
        assert [t.name for t in listed.topics] == ["orders"]
        assert listed.topics[0].topic_authorized_operations == (1 << 3) | (1 << 4) | (1 << 8)  # READ WRITE DESCRIBE


def test_a_forged_replica_id_fetch_is_refused_and_changes_nothing(secure: BrokerProcess) -> None:
    with KafkaWire(secure.port) as wire:
        wire.authenticate("SCRAM-SHA-256", "alice", USERS["alice"])
        refused = wire.call(fetch_request("orders", replica_id=7))
        assert refused.error_code.value == CLUSTER_AUTHORIZATION_FAILED
        assert refused.responses[0].partitions[0].error_code.value == CLUSTER_AUTHORIZATION_FAILED
        assert refused.responses[0].partitions[0].records in (b"", None)
    with KafkaWire(secure.port) as wire:  # the broker's own principal may
        wire.authenticate("SCRAM-SHA-512", "broker", "broker-secret")
        assert wire.call(fetch_request("orders", replica_id=7)).error_code.value == 0


def test_admin_apis_need_cluster_and_topic_rights(secure: BrokerProcess) -> None:
    alice = admin_client(secure, "alice")
    [created] = alice.create_topics([NewTopic("alices", 1, 1)]).values()
    with pytest.raises(KafkaException) as caught:
        created.result(30)
    assert caught.value.args[0].code() == TOPIC_AUTHORIZATION_FAILED
    [described] = alice.describe_configs([ConfigResource(ConfigResource.Type.BROKER, "1")]).values()
    with pytest.raises(KafkaException) as caught:
        described.result(30)
    assert caught.value.args[0].code() == CLUSTER_AUTHORIZATION_FAILED
    with KafkaWire(secure.port) as wire:
        wire.authenticate("PLAIN", "alice", USERS["alice"])
        described_acls = wire.call(DescribeAclsRequest(
            resource_type_filter=i8(1), resource_name_filter=None, pattern_type_filter=i8(1), principal_filter=None,
            host_filter=None, operation=i8(1), permission_type=i8(1)))
        assert described_acls.error_code.value == CLUSTER_AUTHORIZATION_FAILED and not described_acls.resources


def test_describe_and_delete_acls_with_filters(secure: BrokerProcess) -> None:
    admin = admin_client(secure, "admin", "SCRAM-SHA-256")
    temporary = AclBinding(ResourceType.TOPIC, "temp", ResourcePatternType.PREFIXED, "User:bob", "*",
                           AclOperation.READ, AclPermissionType.DENY)
    for future in admin.create_acls([temporary]).values():
        future.result(30)
    match = AclBindingFilter(ResourceType.TOPIC, "temporary", ResourcePatternType.MATCH, None, None,
                             AclOperation.ANY, AclPermissionType.ANY)
    assert admin.describe_acls(match).result(30) == [temporary]
    everything = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                                  AclPermissionType.ANY)
    assert len(admin.describe_acls(everything).result(30)) == 4
    [deleted] = admin.delete_acls([match]).values()
    assert deleted.result(30) == [temporary]
    assert len(admin.describe_acls(everything).result(30)) == 3


def test_scram_credentials_through_the_admin_api(secure: BrokerProcess) -> None:
    from confluent_kafka.admin import ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion

    admin = admin_client(secure, "admin")
    upsert = UserScramCredentialUpsertion("carol", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096),
                                          b"carol-secret")
    for future in admin.alter_user_scram_credentials([upsert]).values():
        future.result(30)
    described = {user: future.result(30)
                 for user, future in admin.describe_user_scram_credentials(["carol"]).items()}
    assert [(i.mechanism, i.iterations) for i in described["carol"].scram_credential_infos] == \
        [(ScramMechanism.SCRAM_SHA_256, 4096)]
    with KafkaWire(secure.port) as wire:  # the broker that answered re-read its credentials before answering
        wire.authenticate("SCRAM-SHA-256", "carol", "carol-secret")
    alice = admin_client(secure, "alice")  # kept referenced: a collected client fails its futures with _DESTROY
    refused = alice.alter_user_scram_credentials([upsert])
    with pytest.raises(KafkaException) as caught:
        next(iter(refused.values())).result(30)
    assert caught.value.args[0].code() == CLUSTER_AUTHORIZATION_FAILED


# ---------------------------------------------------------------------- credentials with a principal; revocation


def _security(cluster_id: str) -> Iterator[SecurityStore]:
    with psycopg.connect(os.environ["DATABASE_URL"]) as conn:
        yield SecurityStore(MetadataStore(conn, cluster_id))


def test_a_credential_authenticates_as_the_principal_it_names(secure: BrokerProcess) -> None:
    """An API key (username = key id) acts as its owner: the owner's ACLs apply, not User:<key id>."""
    for security in _security(secure.cluster_id):
        security.set_plain_credential("KEYOWNEDBYALICE1", plain_hash("key-secret"), principal="User:alice")
        security.set_scram_credential("KEYOWNEDBYALICE1", "SCRAM-SHA-512", derive("SCRAM-SHA-512", "key-secret"),
                                      principal="User:alice")
    for mechanism in ("PLAIN", "SCRAM-SHA-512"):
        config = {**client_config(secure, "KEYOWNEDBYALICE1", mechanism, password="key-secret")}
        deadline = datetime.datetime.now() + datetime.timedelta(seconds=10)
        while True:  # the broker hears of the new credential within a notification
            try:
                topics = AdminClient(config).list_topics(timeout=5).topics
                break
            except KafkaException:
                if datetime.datetime.now() > deadline:
                    raise
        assert "orders" in topics and "secret" not in topics  # alice's ACLs, as for alice herself
    with KafkaWire(secure.port) as wire:
        wire.authenticate("PLAIN", "KEYOWNEDBYALICE1", "key-secret")
        assert wire.call(fetch_request("orders")).responses[0].partitions[0].error_code.value == 0
        assert wire.call(fetch_request("secret")).responses[0].partitions[0].error_code.value == \
            TOPIC_AUTHORIZATION_FAILED


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_deleting_a_credential_closes_its_open_connections(secure: BrokerProcess, mechanism: str) -> None:
    user = f"REVOKE{mechanism.replace('-', '')[:10]}"
    for security in _security(secure.cluster_id):
        if mechanism == "PLAIN":
            security.set_plain_credential(user, plain_hash("gone-soon"), principal="User:alice")
        else:
            security.set_scram_credential(user, mechanism, derive(mechanism, "gone-soon"), principal="User:alice")
    deadline = datetime.datetime.now() + datetime.timedelta(seconds=10)
    while True:
        wire = KafkaWire(secure.port, timeout=10)
        try:
            wire.authenticate(mechanism, user, "gone-soon")
            break
        except (PermissionError, ConnectionError):
            wire.close()
            assert datetime.datetime.now() < deadline, "the new credential never reached the broker"
    with wire, KafkaWire(secure.port) as bystander:
        bystander.authenticate(mechanism, "alice", USERS["alice"])
        assert wire.call(fetch_request("orders")).responses[0].partitions[0].error_code.value == 0
        for security in _security(secure.cluster_id):
            if mechanism == "PLAIN":
                security.apply_credentials(delete_plain=[user])
            else:
                security.apply_credentials(delete_scram=[(user, mechanism)])
        wire.sock.settimeout(5)  # the bound the service promises: closed within 5 s (a timeout fails the test)
        assert wire.sock.recv(1) == b""
        # Other principals' connections stay open.
        assert bystander.call(fetch_request("orders")).responses[0].partitions[0].error_code.value == 0
    with KafkaWire(secure.port) as again, pytest.raises(PermissionError, match=r"(?i)sasl_authentication_failed"):
        again.authenticate(mechanism, user, "gone-soon")
