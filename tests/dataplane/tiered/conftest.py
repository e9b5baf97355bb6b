"""Real brokers with a remote tier: the session's s3rver (``object_store``), a key prefix of each test's own."""

from __future__ import annotations

import signal
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.list_offsets.v9.request import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic
from kio.schema.types import BrokerId, TopicName
from kio.static.primitive import i8, i32, i64

from dataplane.storage.remote.store import S3ObjectStore, S3Settings
from sluice.embedded import free_port
from sluice.objectstore import ObjectStoreServer
from tests.support.broker import BrokerProcess
from tests.support.polling import wait_until
from tests.support.wire import KafkaWire

EARLIEST, EARLIEST_LOCAL, LATEST_TIERED, LATEST = -2, -4, -5, -1


def remote_args(store: ObjectStoreServer, prefix: str, interval_ms: int = 100) -> list[str]:
    return ["--remote-storage-endpoint", store.endpoint, "--remote-storage-bucket", store.bucket,
            "--remote-storage-prefix", prefix, "--remote-storage-region", store.region,
            "--remote-storage-access-key", store.access_key, "--remote-storage-secret-key", store.secret_key,
            "--remote-log-manager-interval-ms", str(interval_ms)]


def s3(store: ObjectStoreServer) -> S3ObjectStore:
    return S3ObjectStore(S3Settings(store.endpoint, store.bucket, store.region, store.access_key, store.secret_key))


@pytest.fixture
def prefix() -> str:
    return f"t-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def tiered_broker(tmp_path: Path, object_store: ObjectStoreServer, prefix: str) -> Iterator[BrokerProcess]:
    process = BrokerProcess(tmp_path / "data", f"tier-{uuid.uuid4().hex[:12]}",
                            extra_args=remote_args(object_store, prefix), metrics_port=free_port())
    process.start()
    try:
        yield process
    finally:
        process.stop(signal.SIGKILL)


@pytest.fixture
def plain_broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    """A broker without remote storage."""
    process = BrokerProcess(tmp_path / "plain", f"plain-{uuid.uuid4().hex[:12]}")
    process.start()
    try:
        yield process
    finally:
        process.stop(signal.SIGKILL)


def create_topic(bootstrap: str, name: str, configs: dict[str, str], partitions: int = 1,
                 replication: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, replication, config=configs)])[name].result(30)


def produce(bootstrap: str, topic: str, count: int, *, start: int = 0, size: int = 100,
            base_timestamp: int | None = None) -> list[tuple[bytes, bytes]]:
    """``count`` records (acks=all, small batches so segments roll often); the (key, value) pairs sent.

    ``base_timestamp``: record ``i`` gets timestamp ``base_timestamp + 10 * i`` ms (else the producer's clock)."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 2, "batch.size": 2000,
                         "enable.idempotence": True})
    sent = []
    errors: list[Any] = []
    for i in range(start, start + count):
        key, value = f"k{i}".encode(), f"v{i:08d}-".encode().ljust(size, b"x")
        stamp = {} if base_timestamp is None else {"timestamp": base_timestamp + 10 * i}
        producer.produce(topic, value, key, on_delivery=lambda err, _msg: errors.append(err) if err else None,
                         **stamp)
        sent.append((key, value))
        if i % 500 == 0:
            producer.poll(0)
    assert producer.flush(60) == 0
    assert not errors, errors
    return sent


class LogStartMoved(Exception):
    """The consumer's position fell below the log start (retention deleted what it was about to read)."""


def consume_all(bootstrap: str, topic: str, end: int, *, start: int = 0,
                timeout: float = 90) -> list[tuple[int, bytes, bytes]]:
    """Every record of partition 0 from ``start`` to ``end`` (exclusive), as (offset, key, value).

    Raises ``LogStartMoved`` when retention deletes the records ahead of the consumer while it reads (the consumer
    never resets its position silently, so a gap can never pass for a complete read)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex[:8]}",
                         "enable.auto.commit": False, "fetch.max.bytes": 64 * 1024, "message.max.bytes": 64 * 1024,
                         "max.partition.fetch.bytes": 16 * 1024, "auto.offset.reset": "error"})
    consumer.assign([TopicPartition(topic, 0, start)])
    got: list[tuple[int, bytes, bytes]] = []
    try:
        def done() -> bool:
            for msg in consumer.consume(500, 1.0):
                if msg.error() is not None and msg.error().code() == KafkaError._AUTO_OFFSET_RESET:
                    raise LogStartMoved(str(msg.error()))
                assert msg.error() is None, msg.error()
                got.append((msg.offset(), msg.key(), msg.value()))
            return bool(got) and got[-1][0] >= end - 1
        wait_until(done, f"records of {topic} up to {end}", timeout)
    finally:
        consumer.close()
    return got


def list_offset(port: int, topic: str, timestamp: int, partition: int = 0) -> int:
    with KafkaWire(port) as wire:
        response = wire.call(ListOffsetsRequest(replica_id=BrokerId(-1), isolation_level=i8(0), topics=(
            ListOffsetsTopic(name=TopicName(topic), partitions=(ListOffsetsPartition(
                partition_index=i32(partition), current_leader_epoch=i32(-1), timestamp=i64(timestamp)),)),)))
    result = response.topics[0].partitions[0]
    assert result.error_code.value == 0, result.error_code
    return int(result.offset)


Offsets = Callable[[int], int]
