"""One shared librdkafka producer per cluster, used by every REST produce request in this process.

Why shared: a producer holds connections and batches records from many concurrent requests into one
Produce request per partition, which is what makes REST produce cheap. Keys are partitioned with
``murmur2_random`` -- the Java client's murmur2 -- so a key lands on the partition a Java or kafka-python producer
would pick, and a librdkafka one configured with ``partitioner=murmur2_random`` (librdkafka's default,
``consistent_random``, hashes with CRC32 and picks others). Records are written with ``acks=all`` and
idempotence on: a report of success means the record is replicated to the in-sync replicas.

Producers act as the caller's principal (``ClusterAccess.client_config``: an OAUTHBEARER token per principal on
a SASL cluster), so the cluster's ACLs decide REST produce as they decide any Kafka client's: the pool keeps one
producer per (cluster, principal), and a denial is Confluent's 40301.

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

from controlplane.kafkarest.access import ClusterAccess
from controlplane.kafkarest.errors import (
    BROKER_NOT_AVAILABLE,
    INVALID_PAYLOAD,
    KAFKA_AUTHENTICATION,
    KAFKA_AUTHORIZATION,
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
# A producer that failed for good is replaced on the first request this long after: a principal with no WRITE
# anywhere hammering the proxy gets its 40301s from the failed one instead of a new producer per request.
FATAL_RETRY_SECONDS = 5.0
librdkafka_log = logging.getLogger("controlplane.kafkarest.librdkafka")


@dataclass(frozen=True, slots=True)
class Delivered:
    partition: int
    offset: int
    timestamp_ms: int


Outcome = Delivered | RestError


def topic_denied(topic: str) -> RestError:
    """The broker refused the caller's principal on ``topic`` (Confluent REST Proxy's body)."""
    return RestError(KAFKA_AUTHORIZATION, f"Not authorized to access topics: [{topic}]")


def rest_error_for(error: KafkaError, topic: str = "") -> RestError:
    """A librdkafka delivery or produce error as the REST Proxy reports it."""
    code = error.code()
    if code == KafkaError.TOPIC_AUTHORIZATION_FAILED:
        return topic_denied(topic)
    if code == KafkaError.GROUP_AUTHORIZATION_FAILED:
        return RestError(KAFKA_AUTHORIZATION, f"Not authorized to access the consumer group: {error.str()}")
    if code in (KafkaError.CLUSTER_AUTHORIZATION_FAILED, KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED):
        return RestError(KAFKA_AUTHORIZATION, f"Not authorized: {error.str()}")
    if code == KafkaError.SASL_AUTHENTICATION_FAILED or code == KafkaError._AUTHENTICATION:
        return RestError(KAFKA_AUTHENTICATION, f"The cluster refused the proxy's credentials: {error.str()}")
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

    def __init__(self, access: ClusterAccess, *, idempotent: bool = True) -> None:
        self.key: tuple[Any, ...] = (*access.client_key, idempotent)
        self.bootstrap = access.bootstrap
        self._producer = Producer({
            **access.client_config(),
            "partitioner": "murmur2_random",
            "acks": "all",
            # Idempotence needs a producer id, which needs WRITE on some topic (KIP-679): a metadata-only
            # client (the tail's topic check, for principals that may only read) goes without.
            "enable.idempotence": idempotent,
            "linger.ms": 2,
            "message.timeout.ms": DELIVERY_TIMEOUT_MS,
            "message.max.bytes": 8 * 1024 * 1024,
            "queue.buffering.max.messages": 1_000_000,
            "allow.auto.create.topics": False,
            # A cluster that goes away (stopped, deleted) would log a connection failure every few ms to stderr;
            # failures reach clients in their delivery reports, and the log goes through Python's logging.
            "logger": librdkafka_log,
            "log_level": 4,
            "error_cb": self._on_error,
        })
        self.last_used = time.monotonic()
        # A fatal error (e.g. the principal may not get an idempotent producer id: no WRITE on any topic) ends
        # this producer: its records fail with it, and the pool makes a new one for the next request.
        self.fatal: KafkaError | None = None
        self.fatal_at = 0.0
        self._partitions: dict[str, tuple[float, int]] = {}
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._serve, name=f"rest-producer {access.kafka_cluster_id}",
                                        daemon=True)
        self._thread.start()

    def _on_error(self, error: KafkaError) -> None:
        if error.fatal() and self.fatal is None:
            self.fatal, self.fatal_at = error, time.monotonic()
            librdkafka_log.info("REST producer for %s failed for good: %s", self.key[0], error.str())

    def _serve(self) -> None:
        while not self._closed.is_set():
            try:
                self._producer.poll(0.05)
            except KafkaException as exc:  # a fatal error surfaces here too once; deliveries still need polls
                self._on_error(exc.args[0])

    def _failure(self, error: KafkaError, topic: str) -> RestError:
        fatal = self.fatal
        if error.code() == KafkaError._FATAL and fatal is not None:
            if fatal.code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED:  # KIP-679: no WRITE on any topic
                return topic_denied(topic)
            return rest_error_for(fatal, topic)
        return rest_error_for(error, topic)

    def partition_count(self, topic: str) -> int:
        """The topic's partition count (cached briefly); TOPIC_NOT_FOUND when it does not exist."""
        now = time.monotonic()
        cached = self._partitions.get(topic)
        if cached is not None and cached[0] > now:
            return cached[1]
        try:
            metadata = self._producer.list_topics(topic, timeout=5)
        except KafkaException as exc:
            raise RestError(BROKER_NOT_AVAILABLE, f"The cluster did not answer: {exc}") from exc
        described = metadata.topics.get(topic)
        if described is not None and described.error is not None \
                and described.error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED:
            raise topic_denied(topic)
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

        def delivered(error: KafkaError | None, message: Any) -> None:
            if error is not None:
                on_done(self._failure(error, topic))
            else:
                on_done(Delivered(message.partition(), message.offset(), message.timestamp()[1]))

        self.produce(topic, delivered, value, key, partition, headers, timestamp_ms)

    def produce(self, topic: str, on_delivery: Callable[[KafkaError | None, Any], None], value: bytes | None,
                key: bytes | None, partition: int | None, headers: list[tuple[str, bytes | None]] | None,
                timestamp_ms: int | None) -> None:
        """:meth:`send` for the hot path: ``on_delivery`` is librdkafka's own ``(error, message)`` callback, so
        no object is made per record here (REST produce queues tens of thousands of records a second)."""
        if partition is None:
            partition = -1  # librdkafka's RD_KAFKA_PARTITION_UA: the partitioner chooses
        else:
            cached = self._partitions.get(topic)  # a dict read is atomic: no lock on the hot path
            if cached is None or not 0 <= partition < cached[1] or cached[0] <= time.monotonic():
                self._check_partition(topic, partition)
        while True:
            try:
                if timestamp_ms is None and not headers:
                    self._producer.produce(topic, value, key, partition, on_delivery)
                else:
                    listed: Any = headers or None  # list[tuple[str, bytes | None]]: the stubs' list is invariant
                    self._producer.produce(topic, value, key, partition, on_delivery, timestamp=timestamp_ms or 0,
                                           headers=listed)
                return
            except BufferError:
                self._producer.poll(0.01)  # the local queue is full: let deliveries drain it
            except KafkaException as exc:
                raise self._failure(exc.args[0], topic) from exc

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
    """Producers by (cluster, bootstrap, principal), created on first use; one unused for ``IDLE_SECONDS`` is
    closed (its cluster may be gone, its principal idle), by whichever ``get`` notices, on a thread of its own."""

    def __init__(self) -> None:
        self._producers: dict[tuple[Any, ...], ClusterProducer] = {}
        self._lock = threading.Lock()
        self._swept = time.monotonic()

    def get(self, access: ClusterAccess, *, for_metadata: bool = False) -> ClusterProducer:
        """The producer that writes to ``access``'s cluster as its caller's principal (``for_metadata``: one
        that is only asked about topics, so it needs no producer id and works for read-only principals)."""
        if not access.bootstrap:
            raise RestError(BROKER_NOT_AVAILABLE, "The cluster has no running brokers yet.")
        now = time.monotonic()
        idle: list[ClusterProducer] = []
        key = (*access.client_key, not for_metadata)
        with self._lock:
            producer = self._producers.get(key)
            if producer is not None and producer.fatal is not None and now - producer.fatal_at > FATAL_RETRY_SECONDS:
                idle.append(producer)  # failed for good (e.g. the principal has been granted WRITE since): anew
                producer = None
            if producer is None:
                producer = self._producers[key] = ClusterProducer(access, idempotent=not for_metadata)
            producer.last_used = now
            if now - self._swept > IDLE_SECONDS / 10:
                self._swept = now
                unused = [p for p in self._producers.values() if now - p.last_used > IDLE_SECONDS]
                for stale in unused:
                    del self._producers[stale.key]
                idle += unused
        if idle:
            threading.Thread(target=_close_all, args=(idle,), name="rest-producer-close", daemon=True).start()
        return producer

    def close(self) -> None:
        with self._lock:
            producers, self._producers = list(self._producers.values()), {}
        for producer in producers:
            producer.close()


pool = ProducerPool()
