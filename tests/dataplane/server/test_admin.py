"""The admin APIs against a real broker process, driven by unmodified Kafka admin clients.

Each test checks effects (Metadata, directories on disk, what a producer or a
consumer sees afterwards), not just the absence of an error.
"""

from __future__ import annotations

import asyncio
import signal
import uuid
from collections.abc import Iterator
from typing import Any, TypeVar

import pytest

from tests.support.broker import BrokerProcess
from tests.support.polling import wait_until
from tests.support.wire import KafkaWire

T = TypeVar("T")

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


until = wait_until  # the name this module's tests use


# ---------------------------------------------------------------------------- confluent-kafka (librdkafka)


@pytest.fixture
def admin(broker: BrokerProcess) -> Iterator[Any]:
    from confluent_kafka.admin import AdminClient

    yield AdminClient({"bootstrap.servers": broker.bootstrap})


def error_code(future: Any) -> int:
    from confluent_kafka import KafkaException

    with pytest.raises(KafkaException) as caught:
        future.result(30)
    return int(caught.value.args[0].code())


def produce(broker: BrokerProcess, topic: str, values: list[bytes], partition: int = 0) -> list[Any]:
    """Produce one batch per value (linger 0, flush between) and return the delivery errors (None if fine)."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0, "message.max.bytes": 10_000_000,
                         "topic.metadata.refresh.interval.ms": 100})
    outcomes: list[Any] = []
    for value in values:
        producer.produce(topic, value=value, partition=partition,
                         on_delivery=lambda err, _msg: outcomes.append(err))
        assert producer.flush(30) == 0
    return outcomes


def topic_names(broker: BrokerProcess) -> set[str]:
    """Every topic in Metadata (through kafka-python: librdkafka's all-topics Metadata v12 request
    currently fails to decode in the broker, see the report)."""
    from kafka.admin import KafkaAdminClient

    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        return set(client.list_topics())
    finally:
        client.close()


def test_confluent_create_grow_and_delete_topics(broker: BrokerProcess, admin: Any) -> None:
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import NewPartitions, NewTopic

    admin.create_topics([NewTopic("orders", 2, 1), NewTopic("audit", 1, 1)])["orders"].result(30)
    assert {"orders", "audit"} <= topic_names(broker)
    assert produce(broker, "orders", [b"a"], partition=1) == [None]
    assert (broker.data_dir / "orders-1").is_dir()

    admin.create_partitions([NewPartitions("orders", 6)], validate_only=True)["orders"].result(30)
    assert len(admin.list_topics("orders", timeout=30).topics["orders"].partitions) == 2
    admin.create_partitions([NewPartitions("orders", 4)])["orders"].result(30)
    assert len(admin.list_topics("orders", timeout=30).topics["orders"].partitions) == 4
    assert produce(broker, "orders", [b"new"], partition=3) == [None]

    fs = admin.create_partitions([NewPartitions("orders", 3), NewPartitions("missing", 3)])
    assert error_code(fs["orders"]) == KafkaError.INVALID_PARTITIONS
    assert error_code(fs["missing"]) == KafkaError.UNKNOWN_TOPIC_OR_PART
    assert error_code(admin.create_partitions([NewPartitions("orders", 5, [[7]])])["orders"]) == \
        KafkaError.INVALID_REPLICA_ASSIGNMENT

    admin.delete_topics(["orders"])["orders"].result(30)
    assert "orders" not in topic_names(broker) and "audit" in topic_names(broker)
    assert not any(broker.data_dir.glob("orders-*"))
    assert error_code(admin.delete_topics(["orders"])["orders"]) == KafkaError.UNKNOWN_TOPIC_OR_PART

    # A new topic of the same name starts empty.
    admin.create_topics([NewTopic("orders", 1, 1)])["orders"].result(30)
    assert produce(broker, "orders", [b"again"]) == [None]
    assert _offsets(broker, "orders") == (0, 1)


def _offsets(broker: BrokerProcess, topic: str, partition: int = 0) -> tuple[int, int]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unused"})
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=30)
        return int(low), int(high)
    finally:
        consumer.close()


def describe(admin: Any, resource: Any, **kwargs: Any) -> dict[str, Any]:
    return dict(admin.describe_configs([resource], **kwargs)[resource].result(30))


def test_confluent_describe_and_alter_topic_configs(broker: BrokerProcess, admin: Any) -> None:
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import (
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ConfigSource,
        NewTopic,
        ResourceType,
    )

    admin.create_topics([NewTopic("cfg", 1, 1, config={"retention.ms": "86400000"})])["cfg"].result(30)
    topic = ConfigResource(ResourceType.TOPIC, "cfg")
    described = describe(admin, topic)
    assert described["retention.ms"].value == "86400000"
    assert described["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert described["max.message.bytes"].value == "1048588"
    assert described["max.message.bytes"].source == ConfigSource.DEFAULT_CONFIG.value
    assert not any(e.is_read_only or e.is_sensitive for e in described.values())

    def alter(*entries: ConfigEntry, validate_only: bool = False) -> Any:
        resource = ConfigResource(ResourceType.TOPIC, "cfg", incremental_configs=list(entries))
        return admin.incremental_alter_configs([resource], validate_only=validate_only)[resource]

    set_max = ConfigEntry("max.message.bytes", "2000", incremental_operation=AlterConfigOpType.SET)
    alter(set_max, validate_only=True).result(30)
    assert describe(admin, topic)["max.message.bytes"].value == "1048588"
    alter(set_max, ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND),
          ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE)).result(30)
    described = describe(admin, topic)
    assert described["max.message.bytes"].value == "2000"
    assert described["cleanup.policy"].value == "delete,compact"
    assert described["retention.ms"].value == "604800000"
    assert described["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value

    # The live log enforces the new limit: a batch above 2000 bytes is refused, a small one is not.
    errors = produce(broker, "cfg", [b"k" * 5000])
    assert errors[0] is not None and errors[0].code() == KafkaError.MSG_SIZE_TOO_LARGE
    assert _keyed_produce(broker, "cfg", b"small") is None

    alter(ConfigEntry("cleanup.policy", "delete", incremental_operation=AlterConfigOpType.SUBTRACT)).result(30)
    assert describe(admin, topic)["cleanup.policy"].value == "compact"

    bad = {
        "unknown": ConfigEntry("no.such.config", "1", incremental_operation=AlterConfigOpType.SET),
        "bad value": ConfigEntry("retention.ms", "soon", incremental_operation=AlterConfigOpType.SET),
        "below minimum": ConfigEntry("segment.bytes", "1", incremental_operation=AlterConfigOpType.SET),
        "append to a scalar": ConfigEntry("retention.ms", "1", incremental_operation=AlterConfigOpType.APPEND),
        "bad list item": ConfigEntry("cleanup.policy", "shred", incremental_operation=AlterConfigOpType.APPEND),
    }
    for case, entry in bad.items():
        assert error_code(alter(entry)) == KafkaError.INVALID_CONFIG, case
    assert describe(admin, topic)["max.message.bytes"].value == "2000"

    # AlterConfigs replaces the whole set of overrides.
    whole = ConfigResource(ResourceType.TOPIC, "cfg", set_config={"retention.bytes": "100000"})
    admin.alter_configs([whole])[whole].result(30)
    described = describe(admin, topic)
    assert described["retention.bytes"].value == "100000"
    assert described["max.message.bytes"].source == ConfigSource.DEFAULT_CONFIG.value
    assert described["cleanup.policy"].value == "delete"
    assert produce(broker, "cfg", [b"k" * 5000]) == [None]

    missing = ConfigResource(ResourceType.TOPIC, "missing")
    assert error_code(admin.describe_configs([missing])[missing]) == KafkaError.UNKNOWN_TOPIC_OR_PART
    missing_alter = ConfigResource(ResourceType.TOPIC, "missing", incremental_configs=[set_max])
    assert error_code(admin.incremental_alter_configs([missing_alter])[missing_alter]) == \
        KafkaError.UNKNOWN_TOPIC_OR_PART


def _keyed_produce(broker: BrokerProcess, topic: str, value: bytes) -> Any:
    """Compacted topics refuse null keys, so produce one keyed record; returns the delivery error."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    outcome: list[Any] = []
    producer.produce(topic, key=b"k", value=value, on_delivery=lambda err, _msg: outcome.append(err))
    assert producer.flush(30) == 0
    return outcome[0]


def test_config_changes_reach_the_live_log_and_survive_a_restart(broker: BrokerProcess, admin: Any) -> None:
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic, ResourceType

    admin.create_topics([NewTopic("rolls", 1, 1)])["rolls"].result(30)
    assert produce(broker, "rolls", [b"x" * 100]) == [None]  # the log exists before the change
    resource = ConfigResource(ResourceType.TOPIC, "rolls", incremental_configs=[
        ConfigEntry("segment.bytes", "1024", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("max.message.bytes", "3000", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([resource])[resource].result(30)
    assert produce(broker, "rolls", [b"x" * 600] * 6) == [None] * 6
    segments = sorted((broker.data_dir / "rolls-0").glob("*.log"))
    assert len(segments) >= 3, "segment.bytes=1024 should roll every couple of batches"

    assert broker.stop(signal.SIGTERM) == 0
    broker.start()
    from confluent_kafka.admin import AdminClient

    again = AdminClient({"bootstrap.servers": broker.bootstrap})
    plain = ConfigResource(ResourceType.TOPIC, "rolls")
    described = describe(again, plain)
    assert (described["segment.bytes"].value, described["max.message.bytes"].value) == ("1024", "3000")
    errors = produce(broker, "rolls", [b"x" * 5000])
    assert errors[0] is not None and errors[0].code() == KafkaError.MSG_SIZE_TOO_LARGE


def test_confluent_broker_configs_are_cluster_defaults(broker: BrokerProcess, admin: Any) -> None:
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import (
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ConfigSource,
        NewTopic,
        ResourceType,
    )

    admin.create_topics([NewTopic("inherits", 1, 1), NewTopic("own", 1, 1, config={"retention.ms": "5000"})])[
        "own"].result(30)
    node = ConfigResource(ResourceType.BROKER, "1")
    described = describe(admin, node)
    assert described["log.retention.ms"].value == "604800000"
    assert described["log.retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value
    assert described["broker.id"].value == "1" and described["broker.id"].is_read_only
    assert described["broker.id"].source == ConfigSource.STATIC_BROKER_CONFIG.value

    # Brokers have no configs of their own: a BROKER resource alters the cluster-wide defaults.
    cluster = ConfigResource(ResourceType.BROKER, "1", incremental_configs=[
        ConfigEntry("log.retention.ms", "1234", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("message.max.bytes", "2500", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([cluster])[cluster].result(30)
    described = describe(admin, node)
    assert described["log.retention.ms"].value == "1234"
    assert described["log.retention.ms"].source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value

    retention = describe(admin, ConfigResource(ResourceType.TOPIC, "inherits"))["retention.ms"]
    assert retention.value == "1234" and retention.source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value
    own = describe(admin, ConfigResource(ResourceType.TOPIC, "own"))["retention.ms"]
    assert own.value == "5000" and own.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    # In one request (where topics with equal overrides share their described entries), each its own.
    both = [ConfigResource(ResourceType.TOPIC, "inherits"), ConfigResource(ResourceType.TOPIC, "own")]
    described_both = {r.name: f.result(30)["retention.ms"].value for r, f in admin.describe_configs(both).items()}
    assert described_both == {"inherits": "1234", "own": "5000"}
    # The cluster default reaches existing logs too.
    errors = produce(broker, "inherits", [b"x" * 5000])
    assert errors[0] is not None and errors[0].code() == KafkaError.MSG_SIZE_TOO_LARGE

    read_only = ConfigResource(ResourceType.BROKER, "1", incremental_configs=[
        ConfigEntry("broker.id", "2", incremental_operation=AlterConfigOpType.SET)])
    assert error_code(admin.incremental_alter_configs([read_only])[read_only]) == KafkaError.INVALID_CONFIG
    reset = ConfigResource(ResourceType.BROKER, "1", incremental_configs=[
        ConfigEntry("log.retention.ms", None, incremental_operation=AlterConfigOpType.DELETE)])
    admin.incremental_alter_configs([reset])[reset].result(30)
    assert describe(admin, ConfigResource(ResourceType.TOPIC, "inherits"))["retention.ms"].value == "604800000"


def test_replication_throttle_is_a_dynamic_broker_config(broker: BrokerProcess, admin: Any) -> None:
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource, ResourceType

    name = "follower.replication.throttled.rate"
    node = ConfigResource(ResourceType.BROKER, "1")
    before = describe(admin, node)[name]
    assert before.source == ConfigSource.STATIC_BROKER_CONFIG.value and not before.is_read_only

    def alter(op: Any, value: str | None, resource_name: str = "1") -> Any:
        resource = ConfigResource(ResourceType.BROKER, resource_name, incremental_configs=[
            ConfigEntry(name, value, incremental_operation=op)])
        return admin.incremental_alter_configs([resource])[resource]

    alter(AlterConfigOpType.SET, "52428800").result(30)
    now = describe(admin, node)[name]
    assert (now.value, now.source) == ("52428800", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
    # A per-broker value is this broker's own: the topic defaults and the cluster default are untouched.
    assert describe(admin, node)["log.retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value

    for op, value in ((AlterConfigOpType.SET, "-1"), (AlterConfigOpType.SET, "fast"),
                      (AlterConfigOpType.APPEND, "5")):
        assert error_code(alter(op, value)) == KafkaError.INVALID_CONFIG
    assert describe(admin, node)[name].value == "52428800"  # nothing half-applied

    alter(AlterConfigOpType.DELETE, None).result(30)
    after = describe(admin, node)[name]
    assert (after.value, after.source) == (before.value, ConfigSource.STATIC_BROKER_CONFIG.value)


def test_confluent_delete_records_moves_the_low_watermark(broker: BrokerProcess, admin: Any) -> None:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition
    from confluent_kafka.admin import NewTopic

    admin.create_topics([NewTopic("trim", 1, 1)])["trim"].result(30)
    assert produce(broker, "trim", [b"%d" % i for i in range(10)]) == [None] * 10

    deleted = admin.delete_records([TopicPartition("trim", 0, 4)])
    assert next(iter(deleted.values())).result(30).low_watermark == 4
    assert _offsets(broker, "trim") == (4, 10)

    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unused", "enable.auto.commit": False})
    consumer.assign([TopicPartition("trim", 0, OFFSET_BEGINNING)])
    try:
        first = until(lambda: _poll_record(consumer))
    finally:
        consumer.close()
    assert (first.offset(), first.value()) == (4, b"4")

    beyond = admin.delete_records([TopicPartition("trim", 0, 11)])
    assert error_code(next(iter(beyond.values()))) == KafkaError.OFFSET_OUT_OF_RANGE
    to_end = admin.delete_records([TopicPartition("trim", 0, -1)])
    assert next(iter(to_end.values())).result(30).low_watermark == 10
    assert _offsets(broker, "trim") == (10, 10)


def _poll_record(consumer: Any) -> Any:
    message = consumer.poll(0.5)
    if message is None or message.error():
        return None
    return message


def test_describe_cluster(broker: BrokerProcess, admin: Any) -> None:
    from kafka.admin import KafkaAdminClient

    # librdkafka answers describe_cluster from Metadata; kafka-python sends DescribeCluster itself.
    described = admin.describe_cluster().result(30)
    assert described.cluster_id == broker.cluster_id and described.controller.id == 1
    assert [(n.id, n.host, n.port) for n in described.nodes] == [(1, "127.0.0.1", broker.port)]

    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        cluster = client.describe_cluster()
    finally:
        client.close()
    assert (cluster["cluster_id"], cluster["controller_id"]) == (broker.cluster_id, 1)
    assert [(b["broker_id"], b["host"], b["port"], b["is_fenced"]) for b in cluster["brokers"]] == [
        (1, "127.0.0.1", broker.port, False)]
    operations = set(cluster["authorized_operations"])
    assert {"DESCRIBE", "ALTER", "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "CREATE", "IDEMPOTENT_WRITE"} <= operations
    assert "ALL" not in operations


# ---------------------------------------------------------------------------- kafka-python


def test_kafka_python_admin(broker: BrokerProcess) -> None:
    import kafka.errors as errors
    from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient, NewTopic

    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        client.create_topics([NewTopic("kp-admin", 1, 1, topic_configs={"retention.ms": "60000"})])
        assert "kp-admin" in client.list_topics()
        client.create_partitions({"kp-admin": 3})
        partitions = client.describe_topics(["kp-admin"])[0]["partitions"]
        assert sorted(p["partition_index"] for p in partitions) == [0, 1, 2]
        with pytest.raises(errors.InvalidPartitionsError):
            client.create_partitions({"kp-admin": 2})

        resource = ConfigResource(ConfigResourceType.TOPIC, "kp-admin")
        modified = client.describe_configs([resource])["topic"]["kp-admin"]
        assert set(modified) == {"retention.ms"} and modified["retention.ms"]["value"] == "60000"
        everything = client.describe_configs([resource], config_filter="all")["topic"]["kp-admin"]
        assert everything["cleanup.policy"]["value"] == "delete" and len(everything) > 20
        assert everything["cleanup.policy"]["config_type"] == "LIST"
        with_synonyms = client.describe_configs([resource], include_synonyms=True)["topic"]["kp-admin"]
        assert [(s["name"], s["value"], s["source"]) for s in with_synonyms["retention.ms"]["synonyms"]] == [
            ("retention.ms", "60000", "DYNAMIC_TOPIC_CONFIG"), ("log.retention.ms", "604800000", "DEFAULT_CONFIG")]

        result = client.alter_configs([ConfigResource(ConfigResourceType.TOPIC, "kp-admin",
                                                      configs={"max.message.bytes": "4096"})])
        assert result == {"topic": {"kp-admin": "OK"}}
        modified = client.describe_configs([resource])["topic"]["kp-admin"]
        assert {k: v["value"] for k, v in modified.items()} == {"retention.ms": "60000", "max.message.bytes": "4096"}
        refused = client.alter_configs([ConfigResource(ConfigResourceType.TOPIC, "kp-admin",
                                                       configs={"max.message.bytes": "lots"})])
        assert refused["topic"]["kp-admin"].startswith("[Error 40] InvalidConfigurationError")

        topic_id = next(t["topic_id"] for t in client.describe_topics(["kp-admin"]))
        client.delete_topics([uuid.UUID(str(topic_id))])  # DeleteTopics v6, by id
        assert "kp-admin" not in client.list_topics()
        assert not any(broker.data_dir.glob("kp-admin-*"))
        with pytest.raises(errors.UnknownTopicOrPartitionError):
            client.delete_topics(["kp-admin"])
        with pytest.raises(errors.UnknownTopicIdError):
            client.delete_topics([uuid.uuid4()])
    finally:
        client.close()


# ---------------------------------------------------------------------------- aiokafka


def test_aiokafka_admin(broker: BrokerProcess) -> None:
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic
    from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

    async def run() -> None:
        client = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap)
        await client.start()
        try:
            created = await client.create_topics([NewTopic("ak-admin", 2, 1, topic_configs={"segment.ms": "60000"})])
            assert [t[1] for t in created.topic_errors] == [0]
            assert "ak-admin" in await client.list_topics()
            [response] = await client.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "ak-admin")])
            [(error, _message, _type, name, entries)] = response.resources
            assert (error, name) == (0, "ak-admin")
            values = {entry[0]: entry[1] for entry in entries}
            assert values["segment.ms"] == "60000" and values["cleanup.policy"] == "delete"
            [response] = await client.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "nope")])
            assert response.resources[0][0] == 3
            deleted = await client.delete_topics(["ak-admin", "nope"])
            assert sorted(deleted.topic_error_codes) == [("ak-admin", 0), ("nope", 3)]
            assert "ak-admin" not in await client.list_topics()
        finally:
            await client.close()

    asyncio.run(run())


def test_advertised_admin_versions_are_all_decodable() -> None:
    from kio.index import load_request_schema, load_response_schema

    from dataplane.server import handlers  # noqa: F401  (fills the registry)
    from dataplane.server.apis import REGISTRY

    expected = {20: (1, 6), 21: (0, 2), 32: (1, 4), 33: (0, 2), 37: (0, 3), 44: (0, 1), 60: (0, 2)}
    assert {key: (REGISTRY[key].min_version, REGISTRY[key].max_version) for key in expected} == expected
    for key, (low, high) in expected.items():
        for version in range(low, high + 1):
            load_request_schema(key, version)
            load_response_schema(key, version)


def _call(broker: BrokerProcess, request: Any) -> Any:
    """Send one kio request entity and decode the answer (for cases no client library produces)."""
    with KafkaWire(broker.port, client_id="raw", first_correlation_id=9) as wire:
        wire.send(request)
        [response] = wire.receive()
    assert response.correlation_id == 9
    return response.body


def test_requests_no_client_library_sends(broker: BrokerProcess) -> None:
    import datetime

    from kio.schema.delete_topics.v6.request import DeleteTopicsRequest, DeleteTopicState
    from kio.schema.describe_cluster.v1.request import DescribeClusterRequest
    from kio.schema.describe_configs.v4.request import DescribeConfigsRequest, DescribeConfigsResource
    from kio.schema.errors import ErrorCode

    cluster = _call(broker, DescribeClusterRequest(include_cluster_authorized_operations=False, endpoint_type=2))
    assert cluster.error_code == ErrorCode.mismatched_endpoint_type and cluster.brokers == ()
    cluster = _call(broker, DescribeClusterRequest(include_cluster_authorized_operations=False, endpoint_type=1))
    assert cluster.cluster_authorized_operations == -(2**31) and [b.broker_id for b in cluster.brokers] == [1]

    described = _call(broker, DescribeConfigsRequest(resources=(
        DescribeConfigsResource(resource_type=32, resource_name="g", configuration_keys=None),
        DescribeConfigsResource(resource_type=4, resource_name="7", configuration_keys=None),
        DescribeConfigsResource(resource_type=4, resource_name="1", configuration_keys=("log.retention.ms",)),
        DescribeConfigsResource(resource_type=4, resource_name="", configuration_keys=None),
    ), include_synonyms=False, include_documentation=True))
    errors = [r.error_code for r in described.results]
    assert errors == [ErrorCode.invalid_request, ErrorCode.invalid_request, ErrorCode.none, ErrorCode.none]
    [entry] = described.results[2].configs
    assert (entry.name, entry.value, entry.config_type, entry.documentation is not None) == (
        "log.retention.ms", "604800000", 5, True)
    assert described.results[3].configs == ()  # no cluster default is set yet

    both = _call(broker, DeleteTopicsRequest(topics=(DeleteTopicState(name="x", topic_id=uuid.uuid4()),),
                                             timeout=datetime.timedelta(seconds=5)))
    assert both.responses[0].error_code == ErrorCode.invalid_request


def test_responses_too_big_for_the_event_loop_are_whole_and_in_order(broker: BrokerProcess, admin: Any) -> None:
    """Metadata and DescribeConfigs of more topics than ENCODE_OFF_LOOP_ENTRIES are encoded on a worker thread:
    every topic is answered, in order, with its own configs."""
    from confluent_kafka.admin import ConfigResource, NewTopic

    from dataplane.server.connection import ENCODE_OFF_LOOP_ENTRIES

    names = [f"many-{i:04d}" for i in range(ENCODE_OFF_LOOP_ENTRIES + 50)]
    for future in admin.create_topics([NewTopic(n, 1, 1, config={"retention.ms": str(60_000 + i)})
                                       for i, n in enumerate(names)]).values():
        future.result(60)
    listed = admin.list_topics(timeout=30).topics
    assert set(names) <= set(listed)
    described = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, n) for n in names])
    for i, (resource, future) in enumerate(sorted(described.items(), key=lambda item: item[0].name)):
        assert resource.name == names[i]
        assert future.result(60)["retention.ms"].value == str(60_000 + i)
    assert names[0] in topic_names(broker)  # kafka-python's all-topics Metadata on a second connection
