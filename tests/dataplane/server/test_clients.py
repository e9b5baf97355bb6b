"""Unmodified Kafka clients produce to and consume from a real broker process."""

from __future__ import annotations

import asyncio
import signal
import socket
import struct
import time

import pytest

from tests.support.broker import BrokerProcess

COUNT = 2000


def expected(i: int) -> tuple[bytes, bytes | None, list[tuple[str, bytes]]]:
    return b"key-%d" % i, (None if i % 97 == 0 else b"value-%d" % i), [("n", str(i).encode())]


def test_kafka_python_round_trip(broker: BrokerProcess) -> None:
    from kafka import KafkaConsumer, KafkaProducer

    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, enable_idempotence=False, acks="all",
                             linger_ms=5)
    futures = []
    for i in range(COUNT):
        key, value, headers = expected(i)
        futures.append(producer.send("kp", key=key, value=value, headers=headers, timestamp_ms=1_700_000_000_000 + i))
    producer.flush()
    assert [f.get(timeout=30).offset for f in futures] == list(range(COUNT))
    producer.close()
    consumer = KafkaConsumer("kp", bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest",
                             group_id=None, consumer_timeout_ms=10000)
    got = [(m.offset, m.key, m.value, m.headers, m.timestamp) for m in consumer]
    consumer.close()
    assert got == [(i, *expected(i), 1_700_000_000_000 + i) for i in range(COUNT)]


def test_confluent_kafka_round_trip(broker: BrokerProcess) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition

    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5, "compression.type": "lz4"})
    errors: list[object] = []
    for i in range(COUNT):
        key, value, headers = expected(i)
        producer.produce("ck", key=key, value=value, headers=headers,
                         on_delivery=lambda err, msg: errors.append(err) if err else None)
    assert producer.flush(30) == 0 and errors == []
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unused", "enable.auto.commit": False})
    consumer.assign([TopicPartition("ck", 0, 0)])
    got = []
    deadline = time.monotonic() + 60
    while len(got) < COUNT and time.monotonic() < deadline:
        message = consumer.poll(1)
        if message is None:
            continue
        assert message.error() is None, message.error()
        got.append((message.offset(), message.key(), message.value(), message.headers()))
    consumer.close()
    assert got == [(i, *expected(i)) for i in range(COUNT)]


def test_aiokafka_round_trip(broker: BrokerProcess) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    async def run() -> list[tuple[int, bytes | None, bytes | None]]:
        producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, compression_type="gzip")
        await producer.start()
        try:
            for i in range(200):
                key, value, headers = expected(i)
                await producer.send("ak", key=key, value=value, headers=headers)
            await producer.flush()
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest")
        await consumer.start()
        try:
            consumer.assign([TopicPartition("ak", 0)])
            consumer.seek(TopicPartition("ak", 0), 0)
            out: list[tuple[int, bytes | None, bytes | None]] = []
            while len(out) < 200:
                batch = await consumer.getmany(timeout_ms=5000)
                assert batch, "no records within 5 s"
                for messages in batch.values():
                    out.extend((m.offset, m.key, m.value) for m in messages)
            return out
        finally:
            await consumer.stop()

    got = asyncio.run(run())
    assert got == [(i, *expected(i)[:2]) for i in range(200)]


def test_data_survives_a_clean_restart(broker: BrokerProcess) -> None:
    from kafka import KafkaConsumer, KafkaProducer

    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, enable_idempotence=False)
    for i in range(50):
        producer.send("kept", value=b"%d" % i)
    producer.flush()
    producer.close()
    assert broker.stop(signal.SIGTERM) == 0
    assert any(broker.data_dir.glob("kept-0/.clean_shutdown"))
    broker.start()
    consumer = KafkaConsumer("kept", bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest",
                             group_id=None, consumer_timeout_ms=10000)
    assert [m.value for m in consumer] == [b"%d" % i for i in range(50)]
    consumer.close()


def _exchange(port: int, payload: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(payload)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
            if len(b"".join(chunks)) >= 4 and len(b"".join(chunks)) >= 4 + struct.unpack(">i", chunks[0][:4])[0]:
                break
        return b"".join(chunks)


@pytest.mark.parametrize("payload", [
    struct.pack(">i", 2**31 - 1),                      # absurd size: refused before any allocation
    struct.pack(">i", -5),                             # negative size
    struct.pack(">ihhih", 10, 9999, 0, 1, -1),         # unknown api key
    struct.pack(">ihhi", 12, 3, 12, 1) + b"\xff" * 4,  # garbage body
])
def test_bad_frames_close_only_that_connection(broker: BrokerProcess, payload: bytes) -> None:
    assert _exchange(broker.port, payload) == b""  # closed without an answer
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, enable_idempotence=False)
    assert producer.send("still-up", value=b"x").get(timeout=30).offset == 0
    producer.close()


def test_unsupported_api_versions_version_gets_a_v0_answer(broker: BrokerProcess) -> None:
    request = struct.pack(">hhih", 18, 99, 77, 3) + b"cli" + b"\x00" + b"\x03kp\x03v1\x00"
    answer = _exchange(broker.port, struct.pack(">i", len(request)) + request)
    size, correlation_id, error_code = struct.unpack_from(">iih", answer)
    assert size == len(answer) - 4 and correlation_id == 77 and error_code == 35
