"""One v2 consumer instance: a consumer-group member with its own librdkafka Consumer, driven by requests.

Ownership and threads: a :class:`ConsumerInstance` belongs to the process that created it (its
:class:`~controlplane.kafkarest.v2.routing.InstanceRouter` holds it). A Consumer is not thread-safe, so
every operation runs on the instance's own single worker thread, in arrival order, whoever asked (a local
request thread or a request forwarded from another process); librdkafka's blocking calls therefore never
run on the event loop. Only :meth:`submit`, :meth:`idle_seconds` and :attr:`key` are called from other
threads.

Records are read as Confluent's REST Proxy does: a read returns when more than ``fetch.min.bytes`` are
gathered, when the next record would reach ``max_bytes``, or when the request timeout has passed. Records
fetched but not returned (over ``max_bytes``) stay buffered for the next read, and offsets are stored
for commit only once a record has been returned, so "commit what was consumed" means what the client saw.
"""

from __future__ import annotations

import collections
import concurrent.futures
import contextlib
import json
import logging
import threading
import time
from binascii import b2a_base64
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, Consumer, KafkaError, KafkaException, Message, TopicPartition
from django.db import close_old_connections

from controlplane.kafkarest.consuming import take
from controlplane.kafkarest.errors import (
    BROKER_NOT_AVAILABLE,
    CONSUMER_ALREADY_SUBSCRIBED,
    CONSUMER_FORMAT_MISMATCH,
    CONSUMER_INSTANCE_NOT_FOUND,
    ILLEGAL_STATE,
    KAFKA_ERROR,
    PARTITION_NOT_FOUND,
    TOPIC_NOT_FOUND,
    RestError,
    rest_error_for,
)
from controlplane.kafkarest.schemas import decode

log = logging.getLogger(__name__)

FORMATS = ("binary", "json")
SCHEMA_FORMATS = ("avro", "jsonschema", "protobuf")  # decoded with the cluster's registry (kafkarest.schemas)
MAX_RESPONSE_BYTES = 64 * 1024 * 1024  # Confluent's consumer.request.max.bytes
CONSUME_MESSAGES = 5000  # taken from librdkafka's prefetch per call (no wait beyond the first)
CONSUME_SLICE_SECONDS = 0.05  # how often a read that waits looks at what it has gathered
KAFKA_CALL_SECONDS = 10.0


@dataclass(frozen=True, slots=True)
class InstanceKey:
    """Where an instance lives in the URL space: cluster, consumer group and instance name."""

    cluster_id: str
    group: str
    name: str


@dataclass(frozen=True, slots=True)
class InstanceConfig:
    format: str  # "binary", "json", "avro", "jsonschema" or "protobuf"
    auto_offset_reset: str | None
    auto_commit_enable: bool | None
    fetch_min_bytes: int  # -1: wait for the timeout (or max_bytes)
    request_timeout_ms: int  # consumer.request.timeout.ms: the longest a read waits
    instance_timeout_ms: int  # idle time after which the instance is closed
    cluster_pk: Any = None  # the cluster whose registry decodes a schema'd format's records


DENIED = (KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.GROUP_AUTHORIZATION_FAILED)


def _tp(entry: dict[str, Any]) -> tuple[str, int]:
    return str(entry["topic"]), int(entry["partition"])


def _commit_position(entry: dict[str, Any]) -> TopicPartition:
    """Where to commit for a given entry: the next record to read. Metadata is optional in the body, and
    librdkafka's ``TopicPartition`` takes a string or nothing (``None`` is a TypeError)."""
    position = int(entry["offset"]) + 1
    metadata = entry.get("metadata")
    if metadata is None:
        return TopicPartition(*_tp(entry), position)
    return TopicPartition(*_tp(entry), position, metadata=metadata)


def _kafka_error(exc: KafkaException) -> RestError:
    error = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
    if error is None:
        return RestError(KAFKA_ERROR, f"Kafka error: {exc}")
    if error.code() in (KafkaError._STATE, KafkaError._UNKNOWN_PARTITION):
        return RestError(ILLEGAL_STATE, f"Illegal state: {error.str()}")
    return rest_error_for(error)


class ConsumerInstance:
    """A consumer instance; see the module docstring for its owner and its thread."""

    def __init__(self, key: InstanceKey, client_config: dict[str, Any], config: InstanceConfig,
                 principal: str) -> None:
        self.key = key
        self.config = config
        self.principal = principal  # the caller that made it: it reads as this principal, and serves only it
        settings: dict[str, Any] = {
            **client_config,
            "group.id": key.group,
            "client.id": f"sluice-rest-{key.name}"[:200],
            "enable.auto.offset.store": False,  # stored when returned to the client, see _take
            "allow.auto.create.topics": False,
            "socket.timeout.ms": int(KAFKA_CALL_SECONDS * 1000),
            # Once librdkafka's prefetch is full it waits fetch.queue.backoff.ms (1 s) before fetching again: a
            # client reading faster than one prefetch a second stalled on every refill.
            "fetch.queue.backoff.ms": 5,
        }
        if config.auto_offset_reset is not None:
            settings["auto.offset.reset"] = config.auto_offset_reset
        if config.auto_commit_enable is not None:
            settings["enable.auto.commit"] = config.auto_commit_enable
        self._consumer = Consumer(settings)
        self._executor = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix=f"rest-consumer {key.name}")
        self._buffer: collections.deque[Message] = collections.deque()
        self._topics: list[str] | None = None  # subscribed topic names
        self._pattern: str | None = None  # or a subscribed pattern
        self._manual = False  # partitions assigned by the client (assign), not by the group
        self._lock = threading.Lock()
        self._pending = 0
        self._last_used = time.monotonic()
        self._closed = False
        self._cluster: Any = None  # the Cluster row, loaded on the instance's thread when a schema is needed

    # ------------------------------------------------------------------ any thread

    def submit(self, op: str, args: dict[str, Any]) -> concurrent.futures.Future[Any]:
        """Queue ``op`` on the instance's thread; the future holds its JSON-able result or a RestError."""
        handler: Callable[..., Any] | None = getattr(self, f"_op_{op}", None)
        if handler is None:
            raise ValueError(f"unknown consumer operation {op!r}")
        with self._lock:
            self._pending += 1
            self._last_used = time.monotonic()

        def run() -> Any:
            try:
                if self._closed:
                    raise RestError(CONSUMER_INSTANCE_NOT_FOUND, "Consumer instance not found.")
                return handler(**args)
            except KafkaException as exc:
                raise _kafka_error(exc) from exc
            finally:
                with self._lock:
                    self._pending -= 1
                    self._last_used = time.monotonic()
        return self._executor.submit(run)

    def idle_seconds(self, now: float) -> float:
        """How long no request has used the instance (0 while one is queued or running)."""
        with self._lock:
            return 0.0 if self._pending else now - self._last_used

    def expired(self, now: float) -> bool:
        return self.idle_seconds(now) * 1000 >= self.config.instance_timeout_ms

    def shutdown(self) -> None:
        """Close the Kafka consumer (leaving the group) on the instance's thread, then stop that thread."""
        try:
            self.submit("close", {}).result(KAFKA_CALL_SECONDS * 3)
        except Exception:  # closing is best effort: the group's session timeout removes the member anyway
            log.exception("closing consumer instance %s", self.key)
        self._executor.shutdown(wait=False)

    # ------------------------------------------------------------------ the instance's thread

    def _op_close(self) -> None:
        if not self._closed:
            self._closed = True
            self._buffer.clear()
            self._consumer.close()

    def _drop_buffered(self, partitions: Iterable[tuple[str, int]] | None = None) -> None:
        if partitions is None:
            self._buffer.clear()
            return
        dropped = set(partitions)
        self._buffer = collections.deque(m for m in self._buffer if (m.topic(), m.partition()) not in dropped)

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._drop_buffered((tp.topic, tp.partition) for tp in partitions)

    def _check_partitions(self, partitions: list[tuple[str, int]]) -> None:
        """40401/40402 unless every (topic, partition) exists."""
        try:
            metadata = self._consumer.list_topics(timeout=KAFKA_CALL_SECONDS)
        except KafkaException as exc:
            raise RestError(BROKER_NOT_AVAILABLE, f"The cluster did not answer: {exc}") from exc
        for topic, partition in partitions:
            described = metadata.topics.get(topic)
            if described is None or described.error is not None or not described.partitions:
                raise RestError(TOPIC_NOT_FOUND, f"Topic not found: {topic}.")
            if partition not in described.partitions:
                raise RestError(PARTITION_NOT_FOUND, f"Partition not found: {topic}-{partition}.")

    def _op_subscribe(self, topics: list[str] | None, topic_pattern: str | None) -> None:
        if self._manual:
            raise RestError(CONSUMER_ALREADY_SUBSCRIBED, "Consumer cannot subscribe the the specified target "
                            "because it has already subscribed to other topics (it has assigned partitions).")
        if topics:
            self._consumer.subscribe(list(topics), on_revoke=self._on_revoke, on_lost=self._on_revoke)
            self._topics, self._pattern = list(topics), None
        elif topic_pattern:
            # Java matches the whole name; librdkafka takes a regex when the name starts with ^.
            regex = topic_pattern if topic_pattern.startswith("^") else f"^({topic_pattern})$"
            self._consumer.subscribe([regex], on_revoke=self._on_revoke, on_lost=self._on_revoke)
            self._topics, self._pattern = None, topic_pattern
        self._drop_buffered()

    def _op_subscription(self) -> dict[str, Any]:
        if self._topics is not None:
            return {"topics": list(self._topics)}
        if self._pattern is not None:
            return {"topics": sorted({tp.topic for tp in self._consumer.assignment()})}
        return {"topics": []}

    def _op_unsubscribe(self) -> None:
        if self._manual:
            self._consumer.unassign()
        else:
            self._consumer.unsubscribe()
        self._topics = self._pattern = None
        self._manual = False
        self._drop_buffered()

    def _op_assign(self, partitions: list[dict[str, Any]]) -> None:
        if self._topics is not None or self._pattern is not None:
            raise RestError(CONSUMER_ALREADY_SUBSCRIBED, "Consumer cannot subscribe the the specified target "
                            "because it has already subscribed to other topics.")
        wanted = [_tp(p) for p in partitions]
        self._check_partitions(wanted)
        self._consumer.assign([TopicPartition(t, p) for t, p in wanted])
        self._manual = bool(wanted)
        self._drop_buffered()

    def _op_assignments(self) -> dict[str, Any]:
        return {"partitions": [{"topic": tp.topic, "partition": tp.partition}
                               for tp in sorted(self._consumer.assignment(), key=lambda tp: (tp.topic, tp.partition))]}

    def _seek(self, targets: list[tuple[str, int, int]]) -> None:
        assigned = {(tp.topic, tp.partition) for tp in self._consumer.assignment()}
        for topic, partition, _ in targets:
            if (topic, partition) not in assigned:
                raise RestError(ILLEGAL_STATE, f"Illegal state: No current assignment for partition "
                                               f"{topic}-{partition}")
        for topic, partition, offset in targets:
            if offset in (OFFSET_BEGINNING, OFFSET_END):
                # Resolved now, not at the next fetch as librdkafka (and Java's seekToEnd) would: "the end"
                # is the end when the client asked, so a record written after the seek is read.
                low, high = self._consumer.get_watermark_offsets(TopicPartition(topic, partition),
                                                                 timeout=KAFKA_CALL_SECONDS)
                offset = low if offset == OFFSET_BEGINNING else high
            try:
                self._consumer.seek(TopicPartition(topic, partition, offset))
            except KafkaException as exc:
                if exc.args[0].code() != KafkaError._STATE:
                    raise
                # Assigned a moment ago (its fetcher not started yet -- connecting and authenticating takes a
                # while): librdkafka refuses to seek it. Assigning again at the offset does the same thing.
                self._assign_at(topic, partition, offset)
        self._drop_buffered((t, p) for t, p, _ in targets)

    def _assign_at(self, topic: str, partition: int, offset: int) -> None:
        """The current assignment again, every other partition at its position, this one at ``offset``."""
        current = self._consumer.position(self._consumer.assignment())
        self._consumer.assign([TopicPartition(tp.topic, tp.partition, offset)
                               if (tp.topic, tp.partition) == (topic, partition) else tp for tp in current])

    def _op_seek(self, offsets: list[dict[str, Any]], timestamps: list[dict[str, Any]]) -> None:
        targets = [(*_tp(o), int(o["offset"])) for o in offsets]
        if timestamps:
            found = self._consumer.offsets_for_times(
                [TopicPartition(*_tp(t), int(t["timestamp_ms"])) for t in timestamps], timeout=KAFKA_CALL_SECONDS)
            # No record at or after the time: the partition's end, where the next record will be.
            targets += [(tp.topic, tp.partition, tp.offset if tp.offset >= 0 else OFFSET_END) for tp in found]
        self._seek(targets)

    def _op_seek_beginning(self, partitions: list[dict[str, Any]]) -> None:
        self._seek([(*_tp(p), OFFSET_BEGINNING) for p in partitions])

    def _op_seek_end(self, partitions: list[dict[str, Any]]) -> None:
        self._seek([(*_tp(p), OFFSET_END) for p in partitions])

    def _op_records(self, format: str, timeout_ms: int, max_bytes: int) -> list[dict[str, Any]]:
        if format != self.config.format:
            raise RestError(CONSUMER_FORMAT_MISMATCH, "The requested embedded data format does not match the "
                                                      "deserializer for this consumer instance")
        wait_ms = self.config.request_timeout_ms if timeout_ms <= 0 else min(timeout_ms,
                                                                                 self.config.request_timeout_ms)
        limit = MAX_RESPONSE_BYTES if max_bytes <= 0 else min(max_bytes, MAX_RESPONSE_BYTES)
        min_bytes = self.config.fetch_min_bytes if self.config.fetch_min_bytes >= 0 else None
        deadline = time.monotonic() + wait_ms / 1000
        records: list[dict[str, Any]] = []
        returned: dict[tuple[str, int], int] = {}  # the next offset per partition, after the records returned
        try:
            self._read_into(records, returned, limit, min_bytes, deadline)
        finally:
            if self.config.format in SCHEMA_FORMATS:  # the registry was read on this thread
                close_old_connections()
        if returned:  # one call for the whole answer (a call per record had been a third of a read's time)
            offsets = [TopicPartition(t, p, o) for (t, p), o in returned.items()]
            try:
                self._consumer.store_offsets(offsets=offsets)
            except KafkaException:  # a partition revoked during the read: store the others
                for offset in offsets:
                    with contextlib.suppress(KafkaException):
                        self._consumer.store_offsets(offsets=[offset])
        return records

    def _read_into(self, records: list[dict[str, Any]], returned: dict[tuple[str, int], int], limit: int,
                   min_bytes: int | None, deadline: float) -> None:
        size = 0
        while True:
            while self._buffer:
                message = self._buffer[0]
                length = len(message.key() or b"") + len(message.value() or b"")
                if size + length >= limit:
                    return
                try:
                    rendered = self._render(message)
                except RestError:
                    if records:  # hand over what came before; the bad record stays first for the next read
                        return
                    raise
                records.append(rendered)
                self._buffer.popleft()
                returned[(rendered["topic"], rendered["partition"])] = rendered["offset"] + 1
                size += length
                if min_bytes is not None and size > min_bytes:
                    return
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            for message in take(self._consumer, CONSUME_MESSAGES, min(remaining, CONSUME_SLICE_SECONDS)):
                error = message.error()
                if error is None:
                    self._buffer.append(message)
                elif error.code() in DENIED:
                    # The cluster's ACLs refused this instance's principal: the client is told (403), not starved.
                    raise rest_error_for(error, message.topic() or "")
                elif error.code() != KafkaError._PARTITION_EOF:
                    log.info("consumer instance %s: %s", self.key, error.str())

    def _decoded(self, data: bytes | None, message: Message, what: str) -> Any:
        if data is None:
            return None
        if self._cluster is None:
            from controlplane.clusters.models import Cluster  # noqa: PLC0415 - only schema'd instances need it

            self._cluster = Cluster.objects.get(pk=self.config.cluster_pk)
        where = f"{what} of the record at {message.topic()}-{message.partition()}@{message.offset()}"
        return decode(self._cluster, data, self.config.format, where)

    def _render(self, message: Message) -> dict[str, Any]:
        key, value = message.key(), message.value()
        if self.config.format in SCHEMA_FORMATS:  # Confluent's SchemaConsumerRecord: the format's JSON
            return {"topic": message.topic(), "key": self._decoded(key, message, "key"),
                    "value": self._decoded(value, message, "value"),
                    "partition": message.partition(), "offset": message.offset()}
        if self.config.format == "json":
            try:
                return {"topic": message.topic(), "key": None if key is None else json.loads(key),
                        "value": None if value is None else json.loads(value),
                        "partition": message.partition(), "offset": message.offset()}
            except ValueError as exc:
                raise RestError(KAFKA_ERROR, f"Kafka error: the record at {message.topic()}-{message.partition()}"
                                             f"@{message.offset()} is not JSON; read it with a binary "
                                             "consumer instance, or seek past it.") from exc
        return {"topic": message.topic(), "key": None if key is None else b2a_base64(key, newline=False).decode(),
                "value": None if value is None else b2a_base64(value, newline=False).decode(),
                "partition": message.partition(), "offset": message.offset()}

    def _op_commit(self, offsets: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
        if offsets:
            # As Confluent's: a given offset is the last record consumed; the commit is the next one to read.
            self._consumer.commit(offsets=[_commit_position(o) for o in offsets], asynchronous=False)
            return []
        try:
            self._consumer.commit(asynchronous=False)
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError._NO_OFFSET:
                raise
        return []

    def _op_committed(self, partitions: list[dict[str, Any]]) -> dict[str, Any]:
        found = self._consumer.committed([TopicPartition(*_tp(p)) for p in partitions], timeout=KAFKA_CALL_SECONDS)
        return {"offsets": [{"topic": tp.topic, "partition": tp.partition, "offset": tp.offset,
                             "metadata": tp.metadata or ""} for tp in found if tp.offset >= 0]}
