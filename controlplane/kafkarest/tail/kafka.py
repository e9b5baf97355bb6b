"""The blocking librdkafka calls of the tail, run on threads (never on the event loop).

Tail consumers never join a group and never commit: they ``assign`` explicit offsets, so a viewer's
position is exactly the cursor it was given. ``enable.partition.eof`` reports each partition's end as
it is reached, which moves a cursor past offsets that hold no record (compacted or control records).
They read uncommitted data, so the end they see is the high watermark for every partition.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from confluent_kafka import OFFSET_END, Consumer, KafkaError, KafkaException, TopicPartition

from controlplane.clusters.credentials import ClientSettings
from controlplane.kafkarest.tail.protocol import Close, ProtocolError, StartAt

TIMEOUT_SECONDS = 10.0
STATS_INTERVAL_MS = 1000


def fetch_requests(stats_json: str) -> int:
    """Fetch requests a consumer has sent, from librdkafka's statistics (``brokers.*.req.Fetch``)."""
    stats = json.loads(stats_json)
    return sum(int(broker.get("req", {}).get("Fetch", 0)) for broker in stats.get("brokers", {}).values())


def make_consumer(client: ClientSettings, *, on_stats: Callable[[str], None] | None, live: bool) -> Consumer:
    config: dict[str, Any] = {
        **dict(client),  # address and credentials (``client_config``)
        "group.id": "sluice-tail",  # required by librdkafka; never joined (assign only) and never committed
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "enable.partition.eof": True,
        "isolation.level": "read_uncommitted",
        "auto.offset.reset": "earliest",  # an assigned offset retention has removed: the oldest kept
        "allow.auto.create.topics": False,
        # Bounded prefetch: what librdkafka holds ahead of the application, per consumer.
        "queued.max.messages.kbytes": 8192 if live else 2048,
        "fetch.max.bytes": 4 * 1024 * 1024 if live else 1024 * 1024,
        # Broker long polls answer as soon as a record arrives, so a long wait costs no latency, and an
        # idle live tail sends one Fetch per wait instead of one per 500 ms.
        "fetch.wait.max.ms": 5000 if live else 500,
    }
    if on_stats is not None:
        config["statistics.interval.ms"] = STATS_INTERVAL_MS
        config["stats_cb"] = on_stats
    return Consumer(config)


def partitions_of(consumer: Consumer, topic: str) -> list[int]:
    """The topic's partitions; TOPIC_NOT_FOUND as a :class:`ProtocolError` when it does not exist."""
    try:
        metadata = consumer.list_topics(topic, timeout=TIMEOUT_SECONDS)
    except KafkaException as exc:
        raise ProtocolError("kafka_unavailable", f"The cluster did not answer: {exc}", Close.KAFKA_UNAVAILABLE) \
            from exc
    described = metadata.topics.get(topic)
    if described is None or not described.partitions or (
            described.error is not None and described.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART):
        raise ProtocolError("topic_not_found", f"Topic {topic} not found.", Close.NOT_FOUND)
    return sorted(described.partitions)


def watermarks(consumer: Consumer, topic: str, partitions: Sequence[int]) -> dict[int, tuple[int, int]]:
    try:
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=TIMEOUT_SECONDS, cached=False)
                for p in partitions}
    except KafkaException as exc:
        raise ProtocolError("kafka_unavailable", f"The cluster did not answer: {exc}", Close.KAFKA_UNAVAILABLE) \
            from exc


def resolve_start(consumer: Consumer, topic: str, start: StartAt, partitions: Sequence[int]) -> dict[int, int]:
    """The first offset to show per partition, always within [log start, high watermark]."""
    marks = watermarks(consumer, topic, partitions)
    if start.mode == "earliest":
        return {p: low for p, (low, _) in marks.items()}
    if start.mode == "latest":
        return {p: high for p, (_, high) in marks.items()}
    if start.mode == "last":
        assert start.last is not None
        return {p: max(low, high - start.last) for p, (low, high) in marks.items()}
    if start.mode == "offsets":
        assert start.offsets is not None
        return {p: min(max(start.offsets[p], low), high) for p, (low, high) in marks.items()}
    assert start.timestamp_ms is not None
    try:
        found = consumer.offsets_for_times([TopicPartition(topic, p, start.timestamp_ms) for p in partitions],
                                           timeout=TIMEOUT_SECONDS)
    except KafkaException as exc:
        raise ProtocolError("kafka_unavailable", f"The cluster did not answer: {exc}", Close.KAFKA_UNAVAILABLE) \
            from exc
    by_partition = {tp.partition: tp.offset for tp in found}
    # No record at or after the timestamp: start at the end (offsets_for_times answers -1 / OFFSET_END).
    return {p: by_partition[p] if by_partition.get(p, -1) >= 0 else marks[p][1] for p in partitions}


def assign(consumer: Consumer, topic: str, offsets: Mapping[int, int]) -> None:
    consumer.assign([TopicPartition(topic, p, offset if offset >= 0 else OFFSET_END)
                     for p, offset in offsets.items()])


def unassign(consumer: Consumer, topic: str, partitions: Sequence[int]) -> None:
    consumer.incremental_unassign([TopicPartition(topic, p) for p in partitions])
