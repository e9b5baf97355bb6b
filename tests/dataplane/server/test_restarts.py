"""Broker restarts in the middle of a stream: nothing acknowledged is lost, idempotent producers add no duplicates."""

from __future__ import annotations

import signal
import threading

import pytest

from tests.dataplane.server.test_client_matrix import confluent_consume, create_topic, make_records
from tests.support.broker import BrokerProcess
from tests.support.polling import wait_until

COUNT = 20_000




def log_end(bootstrap: str, topic: str, partitions: int) -> int:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused"})
    try:
        return sum(consumer.get_watermark_offsets(TopicPartition(topic, p), 30)[1] for p in range(partitions))
    finally:
        consumer.close()


@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGTERM], ids=["sigkill", "sigterm"])
@pytest.mark.parametrize("idempotent", [True, False], ids=["idempotent", "plain"])
def test_restart_mid_stream(broker: BrokerProcess, how: signal.Signals, idempotent: bool) -> None:
    from confluent_kafka import Producer

    topic = "restarts"
    create_topic(broker.bootstrap, topic, 2)
    records = make_records(COUNT)
    acked: dict[int, tuple[int, int]] = {}
    failed: list[int] = []
    lock = threading.Lock()

    def produce_all() -> None:
        producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 2, "enable.idempotence": idempotent,
                             "acks": "all", "retry.backoff.ms": 50, "reconnect.backoff.ms": 50,
                             "reconnect.backoff.max.ms": 200, "message.timeout.ms": 120_000})

        def report(index: int):  # type: ignore[no-untyped-def]
            def done(err: object, msg: object) -> None:
                with lock:
                    if err is None:
                        acked[index] = (msg.partition(), msg.offset())  # type: ignore[attr-defined]
                    else:
                        failed.append(index)
            return done

        for i, r in enumerate(records):
            while True:
                try:
                    producer.produce(topic, key=r.key, value=r.value, headers=list(r.headers),
                                     timestamp=r.timestamp, on_delivery=report(i))
                    break
                except BufferError:
                    producer.poll(0.05)
            if i % 100 == 0:
                producer.poll(0.001)  # paced, so the restart lands mid-stream
        producer.flush(180)

    thread = threading.Thread(target=produce_all)
    thread.start()
    wait_until(lambda: len(acked) >= COUNT // 4, "a quarter of the stream acknowledged", interval=0.01)
    at_kill = len(acked)
    broker.stop(how)
    assert at_kill < COUNT, "the stream ended before the restart"
    broker.start()
    thread.join(240)
    assert not thread.is_alive()
    # Read to the end of the log: retries of unacknowledged records may have landed too.
    got = confluent_consume(broker.bootstrap, topic, log_end(broker.bootstrap, topic, 2), partitions=2)
    by_place = {(g.partition, g.offset): g for g in got}
    for index, place in acked.items():
        assert place in by_place, f"acknowledged record {index} at {place} is lost"
        assert by_place[place].headers == records[index].headers
    values = [g.headers for g in got]
    if idempotent:
        assert len(values) == len(set(values)), "the idempotent producer's retries were written twice"
    if idempotent or how == signal.SIGTERM:
        assert not failed
