"""Clients that drive a cluster and record what they saw: an idempotent acks=all producer and a consumer.

Both use confluent-kafka (librdkafka), as a real application would. Every
value is unique; a send is acknowledged with its offset, fails with a definite
error, or stays unknown (timed out: it may or may not have been written).
"""

from __future__ import annotations

import itertools
import threading
import time
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from tests.chaos.cluster import QUIET, Cluster
from tests.chaos.history import History, OpId

# librdkafka errors that say the record was certainly not written; anything else is indeterminate.
DEFINITE = {KafkaError.MSG_SIZE_TOO_LARGE, KafkaError.INVALID_RECORD, KafkaError.TOPIC_AUTHORIZATION_FAILED}


class ProducerWorker(threading.Thread):
    def __init__(self, cluster: Cluster, history: History, topic: str, partitions: int, name: str = "producer",
                 rate: float = 200.0) -> None:
        super().__init__(daemon=True, name=name)
        self.cluster, self.history, self.topic, self.partitions = cluster, history, topic, partitions
        self.process = name
        self.interval = 1 / rate
        self.stopping = threading.Event()
        self.producer = self._new_producer()

    def _new_producer(self) -> Producer:
        return Producer({"bootstrap.servers": self.cluster.bootstrap, "enable.idempotence": True, "acks": "all",
                         "message.timeout.ms": 20000, "linger.ms": 2, "retry.backoff.ms": 50,
                         "retry.backoff.max.ms": 200, "topic.metadata.refresh.interval.ms": 1000,
                         "reconnect.backoff.max.ms": 200, **QUIET})

    def run(self) -> None:
        counter = itertools.count()
        while not self.stopping.is_set():
            n = next(counter)
            value = f"{self.process}-{n}"
            partition = n % self.partitions
            op = self.history.invoke(self.process, "send", value, partition)
            try:
                self.producer.produce(self.topic, value.encode(), partition=partition,
                                      on_delivery=lambda err, msg, op=op: self._delivered(op, err, msg))
                self.producer.poll(0)
            except KafkaException as exc:
                # A fatal idempotence error ends a producer; an application starts a new one, and so do we.
                self.history.complete(op, "unknown", error=str(exc))
                self.history.note(f"{self.process}: new producer after {exc}")
                self.producer.flush(1)
                self.producer = self._new_producer()
            self.stopping.wait(self.interval)
        self.producer.flush(30)

    def _delivered(self, op: OpId, err: Any, msg: Any) -> None:
        if err is None:
            self.history.complete(op, "ok", offset=msg.offset())
        else:
            self.history.complete(op, "failed" if err.code() in DEFINITE else "unknown", error=str(err))

    def stop(self) -> None:
        self.stopping.set()
        self.join(60)


class ConsumerWorker(threading.Thread):
    """Reads every partition from the start by assignment (no group), recording each poll's records."""

    def __init__(self, cluster: Cluster, history: History, topic: str, partitions: int,
                 name: str = "consumer") -> None:
        super().__init__(daemon=True, name=name)
        self.cluster, self.history, self.topic, self.partitions = cluster, history, topic, partitions
        self.process = name
        self.stopping = threading.Event()

    def run(self) -> None:
        consumer = Consumer({"bootstrap.servers": self.cluster.bootstrap, "group.id": f"{self.process}-unused",
                             "enable.auto.commit": False, "auto.offset.reset": "earliest",
                             "topic.metadata.refresh.interval.ms": 1000, "reconnect.backoff.max.ms": 200,
                             **QUIET})
        consumer.assign([TopicPartition(self.topic, p, 0) for p in range(self.partitions)])
        try:
            while not self.stopping.is_set():
                op = self.history.invoke(self.process, "poll")
                messages = consumer.consume(100, 0.2)
                reads = [(m.partition(), m.offset(), m.value().decode()) for m in messages if m.error() is None]
                self.history.complete(op, "ok", reads=reads)
        finally:
            consumer.close()

    def stop(self) -> None:
        self.stopping.set()
        self.join(60)


def final_read(cluster: Cluster, history: History, topic: str, partitions: int, timeout: float = 60) -> None:
    """Read each partition from its start to its high watermark and record it as the final read."""
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "final-read-unused",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest", **QUIET})
    try:
        reads: list[tuple[int, int, str]] = []
        for partition in range(partitions):
            _, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=20)
            consumer.assign([TopicPartition(topic, partition, 0)])
            deadline = time.monotonic() + timeout
            position = 0
            while position < high and time.monotonic() < deadline:
                for message in consumer.consume(500, 0.5):
                    if message.error() is None:
                        reads.append((partition, message.offset(), message.value().decode()))
                        position = message.offset() + 1
            assert position >= high, f"final read of {topic}-{partition} stopped at {position} of {high}"
        op = history.invoke("final", "read")
        history.complete(op, "ok", reads=reads)
    finally:
        consumer.close()
