"""Behaviours client test suites caught differing from Kafka's, each through a real client or on the wire."""

from __future__ import annotations

import datetime
import time
from typing import Any

from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.schema.types import BrokerId, TopicName
from kio.static.primitive import i8, i16, i32, i32Timedelta, i64

from dataplane.protocol.records import Compression, Record, build_batch, set_max_timestamp
from tests.support import wire as kafka_wire
from tests.support.broker import BrokerProcess

OFFSET_OUT_OF_RANGE = 1
INVALID_RECORD = 87


def produce(broker: BrokerProcess, topic: str, values: list[bytes]) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 1})
    for value in values:
        producer.produce(topic, value, partition=0)
    assert producer.flush(30) == 0


def fetch(broker: BrokerProcess, topic: str, offset: int) -> object:
    request = FetchRequest(
        cluster_id=None, replica_id=BrokerId(-1), max_wait=i32Timedelta.parse(datetime.timedelta(milliseconds=10)),
        min_bytes=i32(1), max_bytes=i32(1 << 20), isolation_level=0,  # type: ignore[arg-type]
        session_id=i32(0), session_epoch=i32(-1), forgotten_topics_data=(), rack_id="",
        topics=(FetchTopic(topic=TopicName(topic), partitions=(FetchPartition(
            partition=i32(0), current_leader_epoch=i32(-1), fetch_offset=i64(offset), last_fetched_epoch=i32(-1),
            log_start_offset=i64(-1), partition_max_bytes=i32(1 << 20)),)),))
    return kafka_wire.call(broker.port, request, 12).responses[0].partitions[0]


def test_fetch_out_of_range_answers_empty_records_and_the_real_watermarks(broker: BrokerProcess) -> None:
    produce(broker, "range", [b"a", b"b", b"c"])
    answer = fetch(broker, "range", 1000)
    assert int(answer.error_code.value) == OFFSET_OUT_OF_RANGE
    assert answer.records == b""  # Kafka sends empty records; a null one is a parse failure for librdkafka
    assert (int(answer.high_watermark), int(answer.log_start_offset)) == (3, 0)
    assert int(answer.last_stable_offset) == 3


def test_librdkafka_resets_an_out_of_range_position(broker: BrokerProcess) -> None:
    """auto.offset.reset takes effect for a position outside the log (e.g. after retention deleted it)."""
    from confluent_kafka import Consumer, TopicPartition

    produce(broker, "reset", [b"first", b"second"])
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "reset", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition("reset", 0, 500)])
    got: list[tuple[int, bytes]] = []
    deadline = time.monotonic() + 30
    while len(got) < 2 and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is None or message.error() is not None:
            continue
        got.append((message.offset(), message.value()))
    consumer.close()
    assert got == [(0, b"first"), (1, b"second")]


def test_subtracting_the_last_item_of_a_list_config_leaves_it_empty(broker: BrokerProcess) -> None:
    from confluent_kafka.admin import (  # type: ignore[attr-defined]
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        NewTopic,
    )

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for future in admin.create_topics([NewTopic("policy", 1, 1)]).values():
        future.result(30)
    resource = ConfigResource("topic", "policy", incremental_configs=[
        ConfigEntry("cleanup.policy", "delete", incremental_operation=AlterConfigOpType.SUBTRACT)])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(30)
    described = admin.describe_configs([ConfigResource("topic", "policy")])
    entries = next(iter(described.values())).result(30)
    assert entries["cleanup.policy"].value == ""



UNSUPPORTED_COMPRESSION_TYPE = 76


def _produce(broker: BrokerProcess, version: int, topic: str, records: bytes) -> int:
    import importlib

    schema = importlib.import_module(f"kio.schema.produce.v{version}.request")
    request = schema.ProduceRequest(
        transactional_id=None, acks=i16(1), timeout=i32Timedelta.parse(datetime.timedelta(seconds=10)),
        topic_data=(schema.TopicProduceData(name=TopicName(topic), partition_data=(
            schema.PartitionProduceData(index=i32(0), records=records),)),))
    return int(kafka_wire.call(broker.port, request, version).responses[0].partition_responses[0].error_code.value)


def _fetch_error(broker: BrokerProcess, version: int, topic: str) -> int:
    import importlib

    schema = importlib.import_module(f"kio.schema.fetch.v{version}.request")
    request = schema.FetchRequest(
        replica_id=BrokerId(-1), max_wait=i32Timedelta.parse(datetime.timedelta(milliseconds=10)), min_bytes=i32(1),
        max_bytes=i32(1 << 20), isolation_level=0, session_id=i32(0), session_epoch=i32(-1),
        forgotten_topics_data=(), topics=(schema.FetchTopic(topic=TopicName(topic), partitions=(schema.FetchPartition(
            partition=i32(0), current_leader_epoch=i32(-1), fetch_offset=i64(0), log_start_offset=i64(-1),
            partition_max_bytes=i32(1 << 20)),)),))
    return int(kafka_wire.call(broker.port, request, version).responses[0].partitions[0].error_code.value)


def test_zstd_needs_produce_v7_and_fetch_v10(broker: BrokerProcess) -> None:
    """KIP-110: older requests cannot carry zstd, and the broker says so instead of storing or serving it."""
    zstd = build_batch([Record(0, 1000, b"k", b"v" * 100)], compression=Compression.ZSTD)
    plain = build_batch([Record(0, 1000, b"k", b"v")])
    assert _produce(broker, 6, "zstd", zstd) == UNSUPPORTED_COMPRESSION_TYPE
    assert _produce(broker, 6, "plain", plain) == 0
    assert _produce(broker, 7, "zstd", zstd) == 0
    assert _fetch_error(broker, 9, "zstd") == UNSUPPORTED_COMPRESSION_TYPE
    assert _fetch_error(broker, 9, "plain") == 0
    assert _fetch_error(broker, 10, "zstd") == 0


def test_list_offsets_max_timestamp_names_the_record_that_has_it(broker: BrokerProcess) -> None:
    """KIP-734: the offset of the record with the highest timestamp, not the last offset of its batch."""
    from confluent_kafka import Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, OffsetSpec  # type: ignore[attr-defined]

    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 200})
    for ts in (1_000_000, 3_000_000, 2_000_000):  # one batch: the newest timestamp is its middle record
        producer.produce("maxts", b"v", partition=0, timestamp=ts)
    assert producer.flush(30) == 0
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    [future] = admin.list_offsets({TopicPartition("maxts", 0): OffsetSpec.max_timestamp()}).values()
    found = future.result(30)
    assert (found.offset, found.timestamp) == (1, 3_000_000)


def test_a_batch_without_max_timestamp_gets_its_records_newest(broker: BrokerProcess) -> None:
    """Older clients leave the header's maxTimestamp at -1; time lookups must still work over their data."""
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient, OffsetSpec  # type: ignore[attr-defined]

    batch = bytearray(build_batch([Record(i, 1_000_000 + 1000 * i, None, b"v%d" % i) for i in range(3)]))
    set_max_timestamp(batch, 0, len(batch), -1)
    assert _produce(broker, 9, "oldts", bytes(batch)) == 0
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    tp = TopicPartition("oldts", 0)
    [by_time] = admin.list_offsets({tp: OffsetSpec.for_timestamp(1_001_500)}).values()
    assert by_time.result(30).offset == 2
    [newest] = admin.list_offsets({tp: OffsetSpec.max_timestamp()}).values()
    assert (newest.result(30).offset, newest.result(30).timestamp) == (2, 1_002_000)


def test_keyless_records_on_a_compacted_topic_are_refused_one_by_one(broker: BrokerProcess) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for future in admin.create_topics([NewTopic("compacted", 1, 1, config={"cleanup.policy": "compact"})]).values():
        future.result(30)
    keys = [b"a", None, b"b", None]
    batch = build_batch([Record(i, 1000, key, b"v") for i, key in enumerate(keys)])
    request = ProduceRequest(transactional_id=None, acks=i16(1),
                             timeout=i32Timedelta.parse(datetime.timedelta(seconds=10)),
                             topic_data=(TopicProduceData(name=TopicName("compacted"), partition_data=(
                                 PartitionProduceData(index=i32(0), records=batch),)),))
    answer = kafka_wire.call(broker.port, request, 9).responses[0].partition_responses[0]
    assert int(answer.error_code.value) == INVALID_RECORD
    assert [int(e.batch_index) for e in answer.record_errors] == [1, 3]
    assert all("without key" in (e.batch_index_error_message or "") for e in answer.record_errors)
    assert fetch(broker, "compacted", 0).high_watermark == 0  # nothing of the batch was written


def test_describe_configs_of_a_broker_lists_its_static_settings(broker: BrokerProcess) -> None:
    from confluent_kafka.admin import AdminClient, ConfigResource  # type: ignore[attr-defined]

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    [future] = admin.describe_configs([ConfigResource("broker", "1")]).values()
    entries = future.result(30)
    address = f"PLAINTEXT://{broker.bootstrap}"
    assert entries["advertised.listeners"].value == address and entries["listeners"].value == address
    assert entries["log.dirs"].value == str(broker.data_dir)
    for name in ("advertised.listeners", "listeners", "log.dirs", "broker.id", "num.partitions"):
        assert entries[name].is_read_only, name
    assert entries["log.retention.ms"].value is not None  # the dynamic topic defaults, under broker names


def test_the_compatibility_reference_lists_exactly_the_apis_and_versions_served() -> None:
    import re
    from pathlib import Path

    from dataplane.server import handlers  # noqa: F401  (registers every API)
    from dataplane.server.apis import REGISTRY

    reference = Path(__file__).resolve().parents[3] / "docs" / "reference" / "kafka-compatibility.md"
    listed = {int(key): (name, int(low), int(high))
              for key, name, low, high in re.findall(r"^\| (\d+) \| (\w+) \| (\d+)\u2013(\d+) \|$",
                                                     reference.read_text(), re.M)}
    served = {a.key: (a.name, a.min_version, a.max_version) for a in REGISTRY.values()}
    table = "\n".join(f"| {key} | {name} | {low}\u2013{high} |" for key, (name, low, high) in sorted(served.items()))
    assert listed == served, f"{reference} differs from the broker's registry; its table should be:\n{table}"


def test_create_topics_and_partitions_with_manual_replica_assignments(broker: BrokerProcess) -> None:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic  # type: ignore[attr-defined]

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for future in admin.create_topics([NewTopic("placed", 2, replica_assignment=[[1], [1]])]).values():
        future.result(30)
    partitions = admin.list_topics("placed", timeout=10).topics["placed"].partitions
    assert sorted(partitions) == [0, 1] and all(p.replicas == [1] for p in partitions.values())
    for future in admin.create_partitions([NewPartitions("placed", 3, replica_assignment=[[1]])]).values():
        future.result(30)
    assert len(admin.list_topics("placed", timeout=10).topics["placed"].partitions) == 3
    [refused] = admin.create_topics([NewTopic("nowhere", 1, replica_assignment=[[7]])]).values()
    try:
        refused.result(30)
        raise AssertionError("a replica on an unknown broker was accepted")
    except KafkaException as exc:
        assert exc.args[0].code() == 39  # INVALID_REPLICA_ASSIGNMENT


def test_describe_and_alter_replica_log_dirs_with_one_directory(broker: BrokerProcess) -> None:
    from kio.schema.alter_replica_log_dirs.v2.request import (
        AlterReplicaLogDir,
        AlterReplicaLogDirsRequest,
        AlterReplicaLogDirTopic,
    )
    from kio.schema.describe_log_dirs.v4.request import DescribableLogDirTopic, DescribeLogDirsRequest

    produce(broker, "sized", [b"x" * 1000] * 10)
    everything = kafka_wire.call(broker.port, DescribeLogDirsRequest(topics=None), 4)
    [result] = everything.results
    assert int(result.error_code.value) == 0 and result.log_dir == str(broker.data_dir)
    assert int(result.total_bytes) >= int(result.usable_bytes) > 0
    sized = next(t for t in result.topics if t.name == "sized")
    assert [(int(p.partition_index), int(p.offset_lag), p.is_future_key) for p in sized.partitions] == [(0, 0, False)]
    assert int(sized.partitions[0].partition_size) > 10_000
    one = kafka_wire.call(broker.port, DescribeLogDirsRequest(topics=(
        DescribableLogDirTopic(topic=TopicName("sized"), partitions=(i32(0), i32(5))),)), 4)
    assert [(t.name, [int(p.partition_index) for p in t.partitions]) for t in one.results[0].topics] == [("sized", [0])]

    def move(path: str, partition: int) -> int:
        answer = kafka_wire.call(broker.port, AlterReplicaLogDirsRequest(dirs=(AlterReplicaLogDir(
            path=path, topics=(AlterReplicaLogDirTopic(name=TopicName("sized"), partitions=(i32(partition),)),)),)), 2)
        return int(answer.results[0].partitions[0].error_code.value)
    assert move(str(broker.data_dir), 0) == 0  # already there
    assert move("/nowhere", 0) == 57  # LOG_DIR_NOT_FOUND
    assert move(str(broker.data_dir), 5) == 9  # REPLICA_NOT_AVAILABLE


def test_kafka_python_recognises_a_kafka_4_0_broker(broker: BrokerProcess) -> None:
    """kafka-python infers the broker's release from ApiVersions (it inferred 3.2 before ListOffsets v8-10)."""
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        assert admin._manager.broker_version_data.broker_version[:2] >= (4, 0)
    finally:
        admin.close()


def test_list_offsets_v10_earliest_local_and_latest_tiered(broker: BrokerProcess) -> None:
    from kio.schema.list_offsets.v10.request import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic
    from kio.schema.metadata.v13.request import MetadataRequest, MetadataRequestTopic

    produce(broker, "tiers", [b"a", b"b", b"c"])

    def offset_of(timestamp: int) -> int:
        answer = kafka_wire.call(broker.port, ListOffsetsRequest(
            replica_id=BrokerId(-1), isolation_level=i8(0), timeout=i32Timedelta.parse(datetime.timedelta(seconds=1)),
            topics=(ListOffsetsTopic(name=TopicName("tiers"), partitions=(ListOffsetsPartition(
                partition_index=i32(0), current_leader_epoch=i32(-1), timestamp=i64(timestamp)),)),)), 10)
        part = answer.topics[0].partitions[0]
        assert int(part.error_code.value) == 0
        return int(part.offset)
    assert [offset_of(ts) for ts in (-2, -4, -1, -5)] == [0, 0, 3, -1]
    metadata = kafka_wire.call(broker.port, MetadataRequest(
        topics=(MetadataRequestTopic(topic_id=None, name=TopicName("tiers")),), allow_auto_topic_creation=False,
        include_topic_authorized_operations=False), 13)
    assert int(metadata.error_code.value) == 0 and metadata.topics[0].name == "tiers"


def test_describe_topic_partitions_pages_with_a_cursor(broker: BrokerProcess) -> None:
    from confluent_kafka import TopicCollection
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]
    from kio.schema.describe_topic_partitions.v0.request import Cursor, DescribeTopicPartitionsRequest, TopicRequest

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for future in admin.create_topics([NewTopic("dtp-a", 3, 1), NewTopic("dtp-b", 2, 1),
                                       NewTopic("dtp-c", 1, 1)]).values():
        future.result(30)

    def page(names: list[str], limit: int, cursor: tuple[str, int] | None = None) -> tuple[list[Any], Any]:
        answer = kafka_wire.call(broker.port, DescribeTopicPartitionsRequest(
            topics=tuple(TopicRequest(name=TopicName(n)) for n in names), response_partition_limit=i32(limit),
            cursor=None if cursor is None else Cursor(topic_name=TopicName(cursor[0]),
                                                      partition_index=i32(cursor[1]))), 0)
        listed = [(t.name, int(t.error_code.value), [int(p.partition_index) for p in t.partitions])
                  for t in answer.topics]
        nxt = answer.next_cursor
        return listed, None if nxt is None else (nxt.topic_name, int(nxt.partition_index))

    names = ["dtp-c", "dtp-a", "dtp-b"]  # answered in name order
    assert page(names, 4) == ([("dtp-a", 0, [0, 1, 2]), ("dtp-b", 0, [0])], ("dtp-b", 1))
    assert page(names, 4, ("dtp-b", 1)) == ([("dtp-b", 0, [1]), ("dtp-c", 0, [0])], None)
    assert page(names, 3) == ([("dtp-a", 0, [0, 1, 2])], ("dtp-b", 0))
    assert page(["dtp-a", "ghost"], 10) == ([("dtp-a", 0, [0, 1, 2]), ("ghost", 3, [])], None)
    assert page(["dtp-a"], 10, ("dtp-z", 0)) == ([("dtp-a", 42, [])], None)  # INVALID_REQUEST
    # librdkafka's describe_topics speaks DescribeTopicPartitions to brokers that serve it.
    [described] = admin.describe_topics(TopicCollection(["dtp-a"])).values()
    assert [p.id for p in described.result(30).partitions] == [0, 1, 2]


def test_authorized_operations_are_everything_that_applies_until_an_authorizer_decides(
        broker: BrokerProcess) -> None:
    """KIP-430 through librdkafka: asked for, every operation of the resource type; not asked for, none."""
    from confluent_kafka import Consumer, TopicCollection
    from confluent_kafka.admin import AclOperation, AdminClient  # type: ignore[attr-defined]

    produce(broker, "ops", [b"x"])
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "ops-group",
                         "auto.offset.reset": "earliest"})
    consumer.subscribe(["ops"])
    deadline = time.monotonic() + 30
    while not consumer.assignment() and time.monotonic() < deadline:
        consumer.poll(0.2)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    try:
        [topic] = admin.describe_topics(TopicCollection(["ops"]), include_authorized_operations=True).values()
        assert set(topic.result(30).authorized_operations) == {
            AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE, AclOperation.DELETE, AclOperation.ALTER,
            AclOperation.DESCRIBE, AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS}
        [group] = admin.describe_consumer_groups(["ops-group"], include_authorized_operations=True).values()
        assert set(group.result(30).authorized_operations) == {
            AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE}
        cluster = admin.describe_cluster(include_authorized_operations=True).result(30)
        assert AclOperation.IDEMPOTENT_WRITE in cluster.authorized_operations
        [plain] = admin.describe_topics(TopicCollection(["ops"])).values()
        assert not plain.result(30).authorized_operations
    finally:
        consumer.close()


def test_fetch_v17_names_topics_by_id(broker: BrokerProcess) -> None:
    import uuid

    from kio.schema.fetch.v17.request import FetchPartition as Part17
    from kio.schema.fetch.v17.request import FetchRequest as Fetch17
    from kio.schema.fetch.v17.request import FetchTopic as Topic17
    from kio.schema.fetch.v17.request import ReplicaState
    from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic

    produce(broker, "byid", [b"one", b"two"])
    described = kafka_wire.call(broker.port, MetadataRequest(
        topics=(MetadataRequestTopic(topic_id=None, name=TopicName("byid")),), allow_auto_topic_creation=False,
        include_topic_authorized_operations=False), 12)
    topic_id = described.topics[0].topic_id

    def fetch_by_id(wanted: uuid.UUID) -> Any:
        request = Fetch17(
            cluster_id=None, replica_state=ReplicaState(replica_id=BrokerId(-1), replica_epoch=i64(-1)),
            max_wait=i32Timedelta.parse(datetime.timedelta(milliseconds=10)), min_bytes=i32(1),
            max_bytes=i32(1 << 20), isolation_level=0, session_id=i32(0), session_epoch=i32(-1),  # type: ignore[arg-type]
            forgotten_topics_data=(), rack_id="", topics=(Topic17(topic_id=wanted, partitions=(Part17(
                partition=i32(0), current_leader_epoch=i32(-1), fetch_offset=i64(0), last_fetched_epoch=i32(-1),
                log_start_offset=i64(-1), partition_max_bytes=i32(1 << 20), replica_directory_id=uuid.UUID(int=0)),)),))
        return kafka_wire.call(broker.port, request, 17).responses[0]

    found = fetch_by_id(topic_id)
    assert found.topic_id == topic_id
    answer = found.partitions[0]
    assert int(answer.error_code.value) == 0 and int(answer.high_watermark) == 2 and b"two" in answer.records
    unknown = fetch_by_id(uuid.uuid4()).partitions[0]
    assert int(unknown.error_code.value) == 100 and unknown.records == b""  # UNKNOWN_TOPIC_ID
