"""Fetch one offset range over the Kafka protocol and hand it back as Arrow record batches.

Two engines (the ``fetch.engine`` option): ``native`` (the default, ``native.py``: our own client and the
compiled decoder) and ``librdkafka``, below. ``native`` falls back to ``librdkafka`` where the compiled
decoder cannot be imported (executors that only got the shipped zip of .py files) or where our client does
not speak the configured authentication (GSSAPI, for instance).

The librdkafka engine runs in a Spark task (a Python worker on an executor): a confluent-kafka Consumer is assigned the
range's partition at its start offset, with no group (nothing is committed anywhere), and reads
until it has seen an offset at or past the range's end. librdkafka decompresses every codec
(gzip, snappy, lz4, zstd) and skips control records; offsets missing inside the range (compaction,
transaction markers) are simply not there, and the range ends at its end offset even when the
records just before it were compacted away (the end-of-partition event, at or past the end, says so).

A start offset below the log start (records deleted since planning) is data loss: an error with
``failOnDataLoss``, else the read continues from the new log start. An end the partition no longer
reaches (the log was truncated) is the same.
"""

from __future__ import annotations

import array
import time
from collections.abc import Iterator, Mapping
from operator import itemgetter
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from dataplane.client.spark.columns import ARROW_SCHEMA, ARROW_SCHEMA_WITH_HEADERS, HEADERS_TYPE, UTC_MICROS
from dataplane.client.spark.options import DataLossError, SparkSourceError
from dataplane.client.spark.plan import OffsetRange
from dataplane.client.tokens import with_static_token

BATCH = 10_000  # records per consume() call, and so per Arrow batch
_WAIT = 0.1  # seconds one consume() call may wait; progress is measured against poll_timeout_ms



def consumer_config(client: Mapping[str, str]) -> dict[str, Any]:
    """librdkafka settings for reading exact ranges: no group, no commits, no silent offset resets."""
    return with_static_token({
        "client.id": "sluice-spark",
        # Bulk reads: larger fetches (fewer round trips), and a prefetch queue that does not stall for 1 s
        # (librdkafka's default backoff) each time it fills up. Any of these may be overridden with kafka.*.
        "max.partition.fetch.bytes": 4 * 1024 * 1024,
        "fetch.max.bytes": 64 * 1024 * 1024,
        "queued.min.messages": 1_000_000,
        "queued.max.messages.kbytes": 65_536,
        "fetch.queue.backoff.ms": 5,
        **client,
        "group.id": "sluice-spark-unused",  # librdkafka wants one; assign() never joins or commits to it
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "enable.partition.eof": True,
        "auto.offset.reset": "error",
        "allow.auto.create.topics": False,
    })


def _headers(found: Any) -> list[dict[str, Any]] | None:
    return [{"key": k, "value": v} for k, v in found] if found else None  # none: null, as Spark's source


_STAMP = pa.struct([pa.field("type", pa.int32()), pa.field("ms", pa.int64())])
_kind_of, _ms_of = itemgetter(0), itemgetter(1)


def _timestamps(stamps: list[tuple[int, int]]) -> tuple[pa.Array, pa.Array]:
    """The timestamp and timestampType columns from librdkafka's ``(type, ms)`` pairs.

    A batch's records nearly always share one type (a topic's ``message.timestamp.type``), so the type column is
    one repeated value and the times an int64 array (two C-level passes); mixed types go through a struct.
    """
    n = len(stamps)
    kind = stamps[0][0] if n else 1
    # librdkafka's types (0 none, 1 create, 2 log append) are Kafka's ids (-1, 0, 1) plus one.
    if kind != 0 and list(map(_kind_of, stamps)).count(kind) == n:
        micros = pc.multiply(pa.array(list(map(_ms_of, stamps)), pa.int64()), 1000)
        return micros.cast(UTC_MICROS), pa.repeat(pa.scalar(kind - 1, pa.int32()), n)
    pairs = pa.array(stamps, _STAMP)
    kinds, ms = pairs.field(0), pairs.field(1)
    micros = pc.if_else(pc.equal(kinds, 0), pa.scalar(None, pa.int64()), pc.multiply(ms, 1000))
    return micros.cast(UTC_MICROS), pc.subtract(kinds, 1)


def _offsets(messages: list[Any]) -> pa.Array:
    """The offset column: without a call per record when the batch has no gaps (no compaction, no markers)."""
    first: int = messages[0].offset()  # a record always has one
    last: int = messages[-1].offset()
    n = len(messages)
    if last - first + 1 == n:
        return pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(array.array("q", range(first, last + 1)))])
    from confluent_kafka import Message

    return pa.array(list(map(Message.offset, messages)), pa.int64())


def to_batch(messages: list[Any], topic: str, partition: int, *, include_headers: bool) -> pa.RecordBatch:
    """Arrow columns straight from librdkafka's messages: one C-level ``map`` per column, no row objects."""
    from confluent_kafka import Message

    n = len(messages)
    timestamp, timestamp_type = _timestamps(list(map(Message.timestamp, messages)))
    arrays = [
        pa.array(list(map(Message.key, messages)), pa.binary()),
        pa.array(list(map(Message.value, messages)), pa.binary()),
        pa.repeat(pa.scalar(topic, pa.string()), n),
        pa.repeat(pa.scalar(partition, pa.int32()), n),
        _offsets(messages),
        timestamp,
        timestamp_type,
    ]
    if include_headers:
        arrays.append(pa.array(list(map(_headers, map(Message.headers, messages))), HEADERS_TYPE))
        return pa.RecordBatch.from_arrays(arrays, schema=ARROW_SCHEMA_WITH_HEADERS)
    return pa.RecordBatch.from_arrays(arrays, schema=ARROW_SCHEMA)


def native_engine(client: Mapping[str, str]) -> Any:
    """``native.fetch_range_native`` when it can serve ``client`` here, else None."""
    try:
        from dataplane.client.spark import native
    except ImportError:  # no compiled decoder (a zip of .py files), or no kio
        return None
    return native.fetch_range_native if native.speaks(client) else None


def fetch_range(client: Mapping[str, str], r: OffsetRange, *, include_headers: bool = False,
                fail_on_data_loss: bool = True, poll_timeout_ms: int = 30_000,
                batch: int = BATCH, engine: str = "native") -> Iterator[pa.RecordBatch]:
    """Every record of ``[r.start, r.end)`` once, in offset order, as record batches of up to ``batch`` rows."""
    if r.size <= 0:
        return
    native = native_engine(client) if engine == "native" else None
    if native is not None:
        yield from native(client, r, include_headers=include_headers, fail_on_data_loss=fail_on_data_loss,
                          poll_timeout_ms=poll_timeout_ms)
        return
    from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition

    where = f"{r.topic}-{r.partition}"
    consumer = Consumer(consumer_config(client))
    try:
        consumer.assign([TopicPartition(r.topic, r.partition, r.start)])
        position, idle_since = r.start, time.monotonic()
        while position < r.end:
            # consume() waits until it has num_messages or the timeout passed: ask for no more than the range
            # can still hold plus its terminator (the record at the end, or end-of-partition), so it returns at
            # once unless offsets are missing (compaction), where it waits _WAIT at most.
            messages = consumer.consume(num_messages=min(batch, r.end - position + 1), timeout=_WAIT)
            if messages and not any(map(Message.error, messages)):
                # The common case, checked once per batch: only records, all inside the range.
                first: int = messages[0].offset()  # type: ignore[assignment]  # a record always has one
                last: int = messages[-1].offset()  # type: ignore[assignment]
                if first >= position and last < r.end:
                    position, idle_since = last + 1, time.monotonic()
                    yield to_batch(messages, r.topic, r.partition, include_headers=include_headers)
                    continue
            rows, done = [], False
            for m in messages:
                error = m.error()
                if error is None:
                    offset: int = m.offset()  # type: ignore[assignment]  # a record always has one
                    if offset >= r.end:
                        done = True
                        break
                    if offset >= position:  # never twice, even if librdkafka re-delivers after a reset
                        rows.append(m)
                        position = offset + 1
                    continue
                code = error.code()
                if code == KafkaError._PARTITION_EOF:
                    eof = m.offset() or 0
                    if eof >= r.end:
                        done = True
                        break
                    if fail_on_data_loss:
                        raise DataLossError(f"{where} ends at {eof}, before the planned end {r.end}: records "
                                            "were lost (set failOnDataLoss=false to stop there)")
                    done = True
                    break
                if code == KafkaError._AUTO_OFFSET_RESET or code == KafkaError.OFFSET_OUT_OF_RANGE:
                    if fail_on_data_loss:
                        raise DataLossError(f"offset {position} of {where} is no longer available (records were "
                                            "deleted); set failOnDataLoss=false to skip what was lost")
                    consumer.assign([TopicPartition(r.topic, r.partition, -2)])  # OFFSET_BEGINNING
                    continue
                if code in (KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_TOPIC,
                            KafkaError._UNKNOWN_PARTITION):
                    raise SparkSourceError(f"unknown topic or partition {where}")
                if code == KafkaError.GROUP_AUTHORIZATION_FAILED:
                    # librdkafka looks up the (never used) group's coordinator; a principal allowed to read the
                    # topic needs no right on that group: assign() and no commits involve none.
                    continue
                if code == KafkaError.TOPIC_AUTHORIZATION_FAILED:
                    raise SparkSourceError(f"not authorized to read {where}: the principal needs READ on the "
                                           f"topic")
                if error.fatal() or not error.retriable():
                    raise SparkSourceError(f"reading {where}: {error.str()}")
            if rows:
                idle_since = time.monotonic()
                yield to_batch(rows, r.topic, r.partition, include_headers=include_headers)
            if done:
                return
            if time.monotonic() - idle_since > poll_timeout_ms / 1000:
                raise SparkSourceError(f"reading {where}: no record at or after offset {position} arrived within "
                                       f"{poll_timeout_ms} ms (kafkaConsumer.pollTimeoutMs)")
    except KafkaException as e:
        raise SparkSourceError(f"reading {where}: {e.args[0].str() if e.args else e}") from None
    finally:
        consumer.close()
