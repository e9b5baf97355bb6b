"""One shared librdkafka producer per cluster, used by every REST produce request in this process.

Why shared: a producer holds connections and batches records from many concurrent requests into one
Produce request per partition, which is what makes REST produce cheap. Keys are partitioned with
``murmur2_random`` -- the Java client's murmur2 -- so a key lands on the partition a Java, librdkafka or
kafka-python producer would pick. Records are written with ``acks=all`` and idempotence on: a report of
success means the record is replicated to the in-sync replicas.

Ownership: the module-level :data:`pool` belongs to the process. :meth:`ClusterProducer.send` is safe from
any thread; a daemon thread per producer serves delivery callbacks, which run each record's ``on_done``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer

from controlplane.clusters.credentials import ClientSettings, servers
from controlplane.kafkarest.errors import (
    BROKER_NOT_AVAILABLE,
    INVALID_PAYLOAD,
    KAFKA_ERROR,
    KAFKA_RETRIABLE,
    PARTITION_NOT_FOUND,
    PAYLOAD_TOO_LARGE,
    TOPIC_NOT_FOUND,
    RestError,
)

METADATA_SECONDS = 10.0  # how long a topic's partition count is trusted before it is read again
DELIVERY_TIMEOUT_MS = 30_000
IDLE_SECONDS = 600.0
librdkafka_log = logging.getLogger("controlplane.kafkarest.librdkafka")


@dataclass(frozen=True, slots=True)
class Delivered:
    partition: int
    offset: int
    timestamp_ms: int


Outcome = Delivered | RestError


def rest_error_for(error: KafkaError) -> RestError:
    """A librdkafka delivery or produce error as the REST Proxy reports it."""
    code = error.code()
    if code == KafkaError.UNKNOWN_TOPIC_OR_PART:
        return RestError(TOPIC_NOT_FOUND, "Topic not found.")
    if code == KafkaError._UNKNOWN_PARTITION:
        return RestError(PARTITION_NOT_FOUND, "Partition not found.")
    if code in (KafkaError.MSG_SIZE_TOO_LARGE, KafkaError.RECORD_LIST_TOO_LARGE):
        return RestError(PAYLOAD_TOO_LARGE, f"Record too large for the topic: {error.str()}")
    if code == KafkaError.INVALID_RECORD:
        return RestError(INVALID_PAYLOAD, f"Payload error. {error.str()}")
    if error.retriable() or code in (KafkaError._MSG_TIMED_OUT, KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN):
        return RestError(KAFKA_RETRIABLE, f"Retriable Kafka error: {error.name()}: {error.str()}")
    return RestError(KAFKA_ERROR, f"Kafka error: {error.name()}: {error.str()}")


class ClusterProducer:
    """A producer for one cluster; see the module docstring for who owns it and its threads."""

    def __init__(self, client: ClientSettings) -> None:
        self.client = client
        bootstrap = servers(client)
        self._producer = Producer({
            **dict(client),
            "partitioner": "murmur2_random",
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 2,
            "message.timeout.ms": DELIVERY_TIMEOUT_MS,
            "message.max.bytes": 8 * 1024 * 1024,
            "queue.buffering.max.messages": 1_000_000,
            "allow.auto.create.topics": False,
            # A cluster that goes away (stopped, deleted) would log a connection failure every few ms to stderr;
            # failures reach clients in their delivery reports, and the log goes through Python's logging.
            "logger": librdkafka_log,
            "log_level": 4,
        })
        self.last_used = time.monotonic()
        self._partitions: dict[str, tuple[float, int]] = {}
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._serve, name=f"rest-producer {bootstrap}", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._closed.is_set():
            self._producer.poll(0.05)

    def knows(self, topic: str) -> bool:
        """Whether the topic's partition count is cached (so :meth:`send` will not block to read it)."""
        with self._lock:
            cached = self._partitions.get(topic)
        return cached is not None and cached[0] > time.monotonic()

    def partition_count(self, topic: str) -> int:
        """The topic's partition count (cached briefly); TOPIC_NOT_FOUND when it does not exist."""
        now = time.monotonic()
        with self._lock:
            cached = self._partitions.get(topic)
        if cached is not None and cached[0] > now:
            return cached[1]
        try:
            metadata = self._producer.list_topics(topic, timeout=5)
        except KafkaException as exc:
            raise RestError(BROKER_NOT_AVAILABLE, f"The cluster did not answer: {exc}") from exc
        described = metadata.topics.get(topic)
        missing = described is None or not described.partitions or (
            described.error is not None and described.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART)
        if missing:
            with self._lock:
                self._partitions.pop(topic, None)
            raise RestError(TOPIC_NOT_FOUND, "Topic not found.")
        assert described is not None
        count = len(described.partitions)
        with self._lock:
            self._partitions[topic] = (now + METADATA_SECONDS, count)
        return count

    def send(self, topic: str, on_done: Callable[[Outcome], None], *, value: bytes | None,
             key: bytes | None = None, partition: int | None = None,
             headers: list[tuple[str, bytes | None]] | None = None, timestamp_ms: int | None = None) -> None:
        """Queue one record; ``on_done`` is called once, on the poll thread, with where it landed or a RestError.

        A record refused before it is queued (a partition the topic does not have) raises the RestError.
        """
        if partition is not None:
            self._check_partition(topic, partition)

        def delivered(error: KafkaError | None, message: Any) -> None:
            if error is not None:
                on_done(rest_error_for(error))
            else:
                on_done(Delivered(message.partition(), message.offset(), message.timestamp()[1]))

        kwargs: dict[str, Any] = {"value": value, "key": key, "headers": headers, "on_delivery": delivered}
        if partition is not None:
            kwargs["partition"] = partition
        if timestamp_ms is not None:
            kwargs["timestamp"] = timestamp_ms
        while True:
            try:
                self._producer.produce(topic, **kwargs)
                return
            except BufferError:
                self._producer.poll(0.01)  # the local queue is full: let deliveries drain it
            except KafkaException as exc:
                raise rest_error_for(exc.args[0]) from exc

    def _check_partition(self, topic: str, partition: int) -> None:
        if 0 <= partition < self.partition_count(topic):
            return
        with self._lock:
            cached = self._partitions.get(topic)
            # Re-read once the count is a second old (the topic may have grown); not for every bad record.
            stale = cached is not None and cached[0] - METADATA_SECONDS < time.monotonic() - 1
            if stale:
                self._partitions.pop(topic, None)
        if not stale or not 0 <= partition < self.partition_count(topic):
            raise RestError(PARTITION_NOT_FOUND, "Partition not found.")

    def close(self) -> None:
        self._closed.set()
        self._thread.join(5)
        self._producer.flush(10)


def _close_all(producers: list[ClusterProducer]) -> None:
    for producer in producers:
        producer.close()


class ProducerPool:
    """Producers by client settings (``client_config``: address and credentials), created on first use; one
    unused for ``IDLE_SECONDS`` is closed (its cluster may be gone), by whichever ``get`` notices, on a thread
    of its own."""

    def __init__(self) -> None:
        self._producers: dict[ClientSettings, ClusterProducer] = {}
        self._lock = threading.Lock()
        self._swept = time.monotonic()

    def get(self, client: ClientSettings) -> ClusterProducer:
        if not servers(client):
            raise RestError(BROKER_NOT_AVAILABLE, "The cluster has no running brokers yet.")
        now = time.monotonic()
        idle: list[ClusterProducer] = []
        with self._lock:
            producer = self._producers.get(client)
            if producer is None:
                producer = self._producers[client] = ClusterProducer(client)
            producer.last_used = now
            if now - self._swept > IDLE_SECONDS / 10:
                self._swept = now
                idle = [p for p in self._producers.values() if now - p.last_used > IDLE_SECONDS]
                for stale in idle:
                    del self._producers[stale.client]
        if idle:
            threading.Thread(target=_close_all, args=(idle,), name="rest-producer-close", daemon=True).start()
        return producer

    def close(self) -> None:
        with self._lock:
            producers, self._producers = list(self._producers.values()), {}
        for producer in producers:
            producer.close()


pool = ProducerPool()
