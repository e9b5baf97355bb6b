"""Write Arrow record batches with Spark's Kafka sink columns to topics through a confluent-kafka Producer.

Runs in a Spark task. Columns, as Spark's Kafka sink: ``value`` (required, string or binary), ``key``
(string or binary), ``topic`` (string; the ``topic`` option, when given, wins over it), ``partition``
(int; none: the producer's partitioner, murmur2 of the key as Java's) and ``headers``
(array<struct<key string, value binary>>). ``produce_batches`` returns only once the producer has
flushed and every record was acknowledged by all in-sync replicas (acks=all), so the task's commit
message means "written"; any failed delivery fails the task instead.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import pyarrow as pa

from dataplane.client.spark.options import SparkSourceError
from dataplane.client.tokens import with_static_token

SINK_TYPES = {"key": ("string", "binary"), "value": ("string", "binary"), "topic": ("string",),
              "partition": ("int",), "headers": ("array<struct<key:string,value:binary>>",)}
FLUSH_TIMEOUT = 60.0


def check_sink_columns(columns: Mapping[str, str], *, topic_option: str | None,
                       typed: frozenset[str] = frozenset()) -> None:
    """Spark's checks on the written DataFrame, by column name -> Spark simple type string; ``typed`` columns
    (``key``/``value`` written through a registry schema) may have any type."""
    if "value" not in columns:
        raise SparkSourceError("the DataFrame to write needs a 'value' column (string or binary)")
    if topic_option is None and "topic" not in columns:
        raise SparkSourceError("no topic to write to: add a 'topic' column or set the 'topic' option")
    for name, allowed in SINK_TYPES.items():
        if name in typed:
            continue
        found = columns.get(name)
        if found is not None and found.replace(" ", "") not in allowed:
            raise SparkSourceError(f"column {name!r} must be {' or '.join(allowed)}, not {found}")


def producer_config(client: Mapping[str, str]) -> dict[str, Any]:
    return with_static_token({"client.id": "sluice-spark", "linger.ms": 5, **client, "acks": "all"})


def _bytes(values: Sequence[Any]) -> list[bytes | None]:
    return [v.encode() if isinstance(v, str) else v for v in values]


def produce_batches(client: Mapping[str, str], batches: Iterable[pa.RecordBatch], *,
                    topic: str | None, encode: Callable[[pa.RecordBatch], pa.RecordBatch] | None = None) -> int:
    """Produce every row; the number written, after a flush that left nothing unacknowledged.

    ``encode`` turns a batch's typed columns into bytes first (``schema_codec.BatchEncoder``)."""
    from confluent_kafka import KafkaError, Producer

    producer = Producer(producer_config(client))
    failures: list[KafkaError] = []

    def delivered(error: KafkaError | None, _message: Any) -> None:
        if error is not None:
            failures.append(error)

    count = 0
    for batch in batches:
        if encode is not None:
            batch = encode(batch)
        names = batch.schema.names
        n = batch.num_rows
        values = _bytes(batch.column("value").to_pylist())
        keys = _bytes(batch.column("key").to_pylist()) if "key" in names else [None] * n
        topics = [topic] * n if topic is not None else batch.column("topic").to_pylist()
        partitions = batch.column("partition").to_pylist() if "partition" in names else [None] * n
        headers = batch.column("headers").to_pylist() if "headers" in names else [None] * n
        for value, key, to, partition, header in zip(values, keys, topics, partitions, headers, strict=True):
            if to is None:
                raise SparkSourceError("a row has a null 'topic' and no 'topic' option is set")
            kwargs: dict[str, Any] = {"value": value, "key": key, "on_delivery": delivered}
            if partition is not None:
                kwargs["partition"] = partition
            if header:
                kwargs["headers"] = [(h["key"], h["value"]) for h in header]
            while True:
                try:
                    producer.produce(to, **kwargs)
                    break
                except BufferError:  # the local queue is full: let deliveries drain it
                    producer.poll(0.05)
            count += 1
        producer.poll(0)
        if failures:
            break
    deadline = time.monotonic() + FLUSH_TIMEOUT
    while producer.flush(max(0.0, deadline - time.monotonic())) and time.monotonic() < deadline:
        pass
    left = len(producer)
    if failures:
        raise SparkSourceError(f"producing failed for {len(failures)} record(s): {failures[0].str()}")
    if left:
        raise SparkSourceError(f"{left} record(s) were not acknowledged within {FLUSH_TIMEOUT:.0f} s")
    return count
