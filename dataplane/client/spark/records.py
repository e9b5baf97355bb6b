"""Spark SQL functions over Kafka's own record formats, for queries that read internal topics.

``offset_commit(key, value)`` decodes a ``__consumer_offsets`` record into (group, topic, partition, offset,
commit_ts), or None for other records (group metadata, tombstones, unknown versions). It runs in executor
Python workers, so it lives here (no Django) and ships with the ``dataplane`` package.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType

from dataplane.coordinator.records import CoordinatorRecordError, OffsetKey, decode_key, decode_offset_value

OFFSET_COMMIT = StructType([
    StructField("group", StringType()), StructField("topic", StringType()),
    StructField("partition", IntegerType()), StructField("offset", LongType()),
    StructField("commit_ts", LongType()),
])


def offset_commit(key: bytes | None, value: bytes | None) -> tuple[Any, ...] | None:
    if key is None or value is None:
        return None
    try:
        k = decode_key(bytes(key))
        if not isinstance(k, OffsetKey):
            return None
        v = decode_offset_value(bytes(value))
    except (CoordinatorRecordError, ValueError, IndexError):
        return None
    return (k.group, k.topic, k.partition, v.offset, v.commit_timestamp)
