"""Three unmodified Kafka clients against a real broker: volume, codecs, acks, seeks, idempotence.

Every record is unique (its index is in the value and a header), so a check can
tell lost, duplicated and reordered records apart.
"""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pytest

from tests.support.broker import BrokerProcess

BASE_TS = 1_700_000_000_000
VOLUME = 100_000
PARTITIONS = 3


@dataclass(frozen=True)
class Sent:
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...]
    timestamp: int


@dataclass(frozen=True)
class Got:
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...]
    timestamp: int


def make_records(count: int, value_size: int = 0) -> list[Sent]:
    pad = b"x" * value_size
    return [Sent(b"key-%d" % (i % 500), None if i % 97 == 0 else b"value-%d-" % i + pad,
                 (("n", str(i).encode()),), BASE_TS + i) for i in range(count)]


def create_topic(bootstrap: str, name: str, partitions: int = PARTITIONS) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)


# ---------------------------------------------------------------------- clients
# Each producer returns, per record, (partition, offset) from its delivery report,
# or None where the client reported a failure.

Placement = tuple[int, int] | None


def confluent_produce(bootstrap: str, topic: str, records: Sequence[Sent], **conf: object) -> list[Placement]:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **conf})
    placed: list[Placement] = [None] * len(records)

    def report(index: int) -> Callable[[object, object], None]:
        def done(err: object, msg: object) -> None:
            if err is None:
                placed[index] = (msg.partition(), msg.offset())  # type: ignore[attr-defined]
        return done

    for i, r in enumerate(records):
        while True:
            try:
                producer.produce(topic, key=r.key, value=r.value, headers=list(r.headers), timestamp=r.timestamp,
                                 on_delivery=report(i))
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    assert producer.flush(120) == 0
    return placed


def confluent_consume(bootstrap: str, topic: str, count: int, partitions: int = PARTITIONS,
                      start: int = 0) -> list[Got]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False,
                         "enable.partition.eof": False})
    consumer.assign([TopicPartition(topic, p, start) for p in range(partitions)])
    got: list[Got] = []
    deadline = time.monotonic() + 120
    try:
        while len(got) < count and time.monotonic() < deadline:
            for m in consumer.consume(10_000, 1.0):
                assert m.error() is None, m.error()
                got.append(Got(m.partition(), m.offset(), m.key(), m.value(), tuple(m.headers() or ()),
                               m.timestamp()[1]))
    finally:
        consumer.close()
    return got


def kafka_python_produce(bootstrap: str, topic: str, records: Sequence[Sent], **conf: object) -> list[Placement]:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5, **conf)
    futures = [producer.send(topic, key=r.key, value=r.value, headers=list(r.headers), timestamp_ms=r.timestamp)
               for r in records]
    producer.flush(120)
    placed: list[Placement] = []
    for f in futures:
        try:
            meta = f.get(timeout=60)
            placed.append((meta.partition, meta.offset))
        except Exception:
            placed.append(None)
    producer.close()
    return placed


def kafka_python_consume(bootstrap: str, topic: str, count: int, partitions: int = PARTITIONS,
                         start: int = 0) -> list[Got]:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, group_id=None)
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    consumer.assign(tps)
    for tp in tps:
        consumer.seek(tp, start)
    got: list[Got] = []
    deadline = time.monotonic() + 180
    try:
        while len(got) < count and time.monotonic() < deadline:
            for tp, messages in consumer.poll(1000, max_records=10_000).items():
                got.extend(Got(tp.partition, m.offset, m.key, m.value, tuple(m.headers), m.timestamp)
                           for m in messages)
    finally:
        consumer.close()
    return got


def aiokafka_produce(bootstrap: str, topic: str, records: Sequence[Sent], **conf: object) -> list[Placement]:
    from aiokafka import AIOKafkaProducer

    async def run() -> list[Placement]:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5, **conf)
        await producer.start()
        try:
            futures = [await producer.send(topic, key=r.key, value=r.value, headers=list(r.headers),
                                           timestamp_ms=r.timestamp) for r in records]
            results = await asyncio.gather(*futures, return_exceptions=True)
        finally:
            await producer.stop()
        return [None if m is None or isinstance(m, BaseException) else (m.partition, m.offset) for m in results]

    return asyncio.run(run())


def aiokafka_consume(bootstrap: str, topic: str, count: int, partitions: int = PARTITIONS,
                     start: int = 0) -> list[Got]:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    async def run() -> list[Got]:
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
        await consumer.start()
        got: list[Got] = []
        try:
            tps = [TopicPartition(topic, p) for p in range(partitions)]
            consumer.assign(tps)
            for tp in tps:
                consumer.seek(tp, start)
            deadline = time.monotonic() + 180
            while len(got) < count and time.monotonic() < deadline:
                for tp, messages in (await consumer.getmany(timeout_ms=1000, max_records=10_000)).items():
                    got.extend(Got(tp.partition, m.offset, m.key, m.value, tuple(m.headers), m.timestamp)
                               for m in messages)
        finally:
            await consumer.stop()
        return got

    return asyncio.run(run())


CLIENTS = {
    "confluent": (confluent_produce, confluent_consume),
    "kafka-python": (kafka_python_produce, kafka_python_consume),
    "aiokafka": (aiokafka_produce, aiokafka_consume),
}
IDEMPOTENCE = {
    "confluent": lambda on: {"enable.idempotence": on},
    "kafka-python": lambda on: {"enable_idempotence": on},
    "aiokafka": lambda on: {"enable_idempotence": on},
}
COMPRESSION = {
    "confluent": lambda codec: {"compression.type": codec},
    "kafka-python": lambda codec: {"compression_type": codec},
    "aiokafka": lambda codec: {"compression_type": codec},
}
ACKS = {
    "confluent": lambda acks: {"acks": acks},
    "kafka-python": lambda acks: {"acks": acks, "enable_idempotence": False},
    "aiokafka": lambda acks: {"acks": acks},
}


def check_round_trip(records: Sequence[Sent], placed: Sequence[Placement], got: Sequence[Got]) -> None:
    """Every acknowledged record came back once, where the producer was told, intact and in order."""
    assert None not in placed, f"{placed.count(None)} records were not acknowledged"
    by_place = {(g.partition, g.offset): g for g in got}
    assert len(by_place) == len(got) == len(records), (len(by_place), len(got), len(records))
    per_key: dict[bytes | None, list[tuple[int, int]]] = defaultdict(list)
    for r, place in zip(records, placed, strict=True):
        assert place is not None
        g = by_place[place]
        assert (g.key, g.value, g.headers, g.timestamp) == (r.key, r.value, r.headers, r.timestamp)
        per_key[r.key].append(place)
    for places in per_key.values():  # one key, one partition, offsets in send order
        assert len({p for p, _ in places}) == 1
        assert [o for _, o in places] == sorted(o for _, o in places)
    for p in {g.partition for g in got}:  # offsets dense per partition
        offsets = sorted(g.offset for g in got if g.partition == p)
        assert offsets == list(range(len(offsets)))


@pytest.mark.parametrize("idempotent", [False, True], ids=["plain", "idempotent"])
@pytest.mark.parametrize("client", list(CLIENTS))
def test_volume_round_trip(broker: BrokerProcess, client: str, idempotent: bool) -> None:
    produce, consume = CLIENTS[client]
    topic = f"volume-{client}-{idempotent}"
    create_topic(broker.bootstrap, topic)
    records = make_records(VOLUME)
    placed = produce(broker.bootstrap, topic, records, **IDEMPOTENCE[client](idempotent))
    check_round_trip(records, placed, consume(broker.bootstrap, topic, len(records)))


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
@pytest.mark.parametrize("client", list(CLIENTS))
def test_every_codec(broker: BrokerProcess, client: str, codec: str) -> None:
    produce, consume = CLIENTS[client]
    topic = f"codec-{client}-{codec}"
    create_topic(broker.bootstrap, topic)
    records = make_records(3000, value_size=200)
    placed = produce(broker.bootstrap, topic, records, **COMPRESSION[client](codec))
    check_round_trip(records, placed, consume(broker.bootstrap, topic, len(records)))


@pytest.mark.parametrize("acks", [0, 1, -1])
@pytest.mark.parametrize("client", list(CLIENTS))
def test_acks(broker: BrokerProcess, client: str, acks: int) -> None:
    produce, consume = CLIENTS[client]
    topic = f"acks-{client}-{acks}"
    create_topic(broker.bootstrap, topic)
    records = make_records(2000)
    placed = produce(broker.bootstrap, topic, records, **ACKS[client](acks))
    got = consume(broker.bootstrap, topic, len(records))
    if acks != 0:
        check_round_trip(records, placed, got)
    else:  # no offsets come back with acks=0; the data must still all be there
        assert sorted(g.headers for g in got) == sorted(r.headers for r in records)


def test_seek_to_offset_and_timestamp(broker: BrokerProcess) -> None:
    from aiokafka import AIOKafkaConsumer
    from aiokafka import TopicPartition as AioTP
    from confluent_kafka import Consumer, TopicPartition
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KpTP

    topic = "seek"
    create_topic(broker.bootstrap, topic, 1)
    records = make_records(1000)
    confluent_produce(broker.bootstrap, topic, records)

    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unused"})
    found = consumer.offsets_for_times([TopicPartition(topic, 0, BASE_TS + 700)], 30)
    assert found[0].offset == 700
    assert consumer.offsets_for_times([TopicPartition(topic, 0, BASE_TS + 10**9)], 30)[0].offset == -1
    assert consumer.get_watermark_offsets(TopicPartition(topic, 0), 30) == (0, 1000)
    consumer.close()
    tail = confluent_consume(broker.bootstrap, topic, 300, partitions=1, start=700)
    assert [g.offset for g in tail] == list(range(700, 1000))

    kp = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None)
    assert kp.offsets_for_times({KpTP(topic, 0): BASE_TS + 250})[KpTP(topic, 0)].offset == 250
    assert kp.beginning_offsets([KpTP(topic, 0)]) == {KpTP(topic, 0): 0}
    assert kp.end_offsets([KpTP(topic, 0)]) == {KpTP(topic, 0): 1000}
    kp.close()
    assert [g.offset for g in kafka_python_consume(broker.bootstrap, topic, 10, 1, start=990)] == \
        list(range(990, 1000))

    async def aio() -> int:
        c = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap)
        await c.start()
        try:
            return (await c.offsets_for_times({AioTP(topic, 0): BASE_TS + 512}))[AioTP(topic, 0)].offset
        finally:
            await c.stop()

    assert asyncio.run(aio()) == 512
    assert [g.offset for g in aiokafka_consume(broker.bootstrap, topic, 5, 1, start=995)] == list(range(995, 1000))
