"""Producing far past local retention, then reading everything back from offset 0 through the remote tier."""

from __future__ import annotations

import datetime
import time
import uuid

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource
from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.types import BrokerId, TopicName
from kio.static.primitive import i8, i32, i32Timedelta, i64

from dataplane.protocol.records import iter_batch_headers
from dataplane.storage.remote.layout import PartitionPath, parse_name
from sluice.objectstore import ObjectStoreServer
from tests.dataplane.server.test_metrics import scrape
from tests.dataplane.tiered.conftest import (
    EARLIEST,
    EARLIEST_LOCAL,
    LATEST,
    LATEST_TIERED,
    consume_all,
    create_topic,
    list_offset,
    produce,
    s3,
)
from tests.support.broker import BrokerProcess
from tests.support.polling import wait_until
from tests.support.wire import KafkaWire

TIERED = {"remote.storage.enable": "true", "segment.bytes": "16384", "local.retention.bytes": "32768"}


def test_consume_everything_from_offset_zero_after_local_retention(tiered_broker: BrokerProcess) -> None:
    topic = f"tiered-{uuid.uuid4().hex[:8]}"
    create_topic(tiered_broker.bootstrap, topic, TIERED)
    sent = produce(tiered_broker.bootstrap, topic, 4000)
    port = tiered_broker.port
    # Far past local retention: most of the log is only in the remote tier now.
    wait_until(lambda: list_offset(port, topic, EARLIEST_LOCAL) > 2000, "local segments uploaded and deleted",
               detail=lambda: tiered_broker.output()[-4000:])
    assert list_offset(port, topic, EARLIEST) == 0
    assert list_offset(port, topic, LATEST) == 4000
    local_start, tiered_end = list_offset(port, topic, EARLIEST_LOCAL), list_offset(port, topic, LATEST_TIERED)
    assert local_start - 1 <= tiered_end < 4000

    got = consume_all(tiered_broker.bootstrap, topic, 4000)
    assert [offset for offset, _, _ in got] == list(range(4000))  # every offset once, in order
    assert [(k, v) for _, k, v in got] == sent

    # The control plane reads both sizes from the metrics endpoint; DescribeLogDirs keeps the local size.
    labels = (("partition", "0"), ("topic", topic))
    metrics = scrape(tiered_broker.metrics_port)
    local, remote = metrics[("sluice_local_log_size_bytes", labels)], metrics[("sluice_remote_log_size_bytes", labels)]
    assert 0 < local <= 32768 + 16384 * 2 and remote > 300_000


def test_list_offsets_by_time_finds_records_in_the_remote_tier(tiered_broker: BrokerProcess) -> None:
    """offsetsForTimes on a tiered topic: the first record at or after the time, wherever it is stored."""
    topic = f"tiered-{uuid.uuid4().hex[:8]}"
    create_topic(tiered_broker.bootstrap, topic, TIERED)
    base = int(time.time() * 1000) - 3_600_000  # an hour ago: well inside the default retention.ms (7 days)
    produce(tiered_broker.bootstrap, topic, 3000, base_timestamp=base)  # record i at base + 10 i ms
    port = tiered_broker.port
    wait_until(lambda: list_offset(port, topic, EARLIEST_LOCAL) > 1500, "local segments uploaded and deleted",
               detail=lambda: tiered_broker.output()[-4000:])
    local_start = list_offset(port, topic, EARLIEST_LOCAL)
    for i in (0, 1, 777, local_start - 1, local_start, 2999):
        assert list_offset(port, topic, base + 10 * i) == i, i
    assert list_offset(port, topic, base + 10 * 777 - 5) == 777  # between two records: the next one
    assert list_offset(port, topic, base - 60_000) == 0  # before every record: the first
    assert list_offset(port, topic, base + 10 * 3000) == -1  # after every record: none


def test_remote_bytes_are_the_local_bytes(tiered_broker: BrokerProcess, object_store: ObjectStoreServer,
                                          prefix: str) -> None:
    """Uploaded segment objects equal the local segment files, and a fetch from the remote tier returns
    exactly the bytes of the segment from the batch holding the offset."""
    topic = f"tiered-{uuid.uuid4().hex[:8]}"
    create_topic(tiered_broker.bootstrap, topic, {"remote.storage.enable": "true", "segment.bytes": "16384"})
    produce(tiered_broker.bootstrap, topic, 1500)
    port = tiered_broker.port
    wait_until(lambda: list_offset(port, topic, LATEST_TIERED) > 1000, "segments uploaded")
    store = s3(object_store)
    partition_dir = tiered_broker.data_dir / f"{topic}-0"
    logs = [o for o in store.list_objects(f"{prefix}/") if o.key.endswith(".log") and f"/{topic}-" in o.key]
    assert len(logs) >= 5
    for obj in logs:
        name = parse_name(obj.key.rsplit("/", 1)[1])
        assert name is not None
        local = (partition_dir / f"{name.base_offset:020d}.log").read_bytes()
        assert store.get(obj.key) == local  # local retention keeps everything here (retention.bytes -1)

    # Now drop the local copies below the last segments and read offset 0 through the broker.
    admin_set_local_retention(tiered_broker, topic, "16384")
    wait_until(lambda: list_offset(port, topic, EARLIEST_LOCAL) > 0, "local segments deleted")
    first = min(logs, key=lambda o: o.key)
    with KafkaWire(port) as wire:
        answer = wire.call(FetchRequest(
            cluster_id=None, replica_id=BrokerId(-1), max_wait=i32Timedelta.parse(datetime.timedelta(0)),
            min_bytes=i32(1), max_bytes=i32(1 << 20), isolation_level=i8(0), session_id=i32(0),
            session_epoch=i32(-1), topics=(FetchTopic(topic=TopicName(topic), partitions=(FetchPartition(
                partition=i32(0), current_leader_epoch=i32(-1), fetch_offset=i64(0), last_fetched_epoch=i32(-1),
                log_start_offset=i64(-1), partition_max_bytes=i32(1 << 20)),)),),
            forgotten_topics_data=(), rack_id=""), 12)
    partition = answer.responses[0].partitions[0]
    assert partition.error_code.value == 0
    records = bytes(partition.records)
    assert records and store.get(first.key).startswith(records)
    assert next(iter_batch_headers(records))[1].base_offset == 0
    assert PartitionPath  # the layout module names the keys compared above


def admin_set_local_retention(broker: BrokerProcess, topic: str, value: str) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    resource = ConfigResource("topic", topic, incremental_configs=[
        ConfigEntry("local.retention.bytes", value, incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([resource])[resource].result(30)


def test_read_committed_skips_aborted_transactions_in_the_remote_tier(tiered_broker: BrokerProcess) -> None:
    topic = f"tiered-{uuid.uuid4().hex[:8]}"
    create_topic(tiered_broker.bootstrap, topic, TIERED)
    producer = Producer({"bootstrap.servers": tiered_broker.bootstrap, "transactional.id": f"t-{topic}",
                         "linger.ms": 2, "batch.size": 2000})
    producer.init_transactions(30)
    committed = []
    for txn in range(12):
        producer.begin_transaction()
        for i in range(150):
            value = f"txn{txn}-{i}".encode().ljust(100, b"x")
            producer.produce(topic, value)
            if txn % 3 != 1:
                committed.append(value)
        producer.flush(30)
        if txn % 3 == 1:
            producer.abort_transaction(30)
        else:
            producer.commit_transaction(30)
    port = tiered_broker.port
    end = list_offset(port, topic, LATEST)
    wait_until(lambda: list_offset(port, topic, EARLIEST_LOCAL) > end // 2, "most of the log only remote")
    consumer = Consumer({"bootstrap.servers": tiered_broker.bootstrap, "group.id": f"g-{topic}",
                         "isolation.level": "read_committed", "enable.partition.eof": True,
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    got: list[bytes] = []
    try:
        def at_end() -> bool:
            for message in consumer.consume(500, 1.0):
                if message.error() is None:
                    got.append(message.value())
                elif message.error().code() == KafkaError._PARTITION_EOF:
                    return True
                else:
                    raise AssertionError(message.error())
            return False
        wait_until(at_end, "the end of the partition", 90)
    finally:
        consumer.close()
    assert got == committed
