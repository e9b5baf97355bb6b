"""The Arrow shape of Spark's Kafka source, and record batches built from the compiled decoder's buffers.

``to_record_batch`` wraps ``dataplane.protocol._columns``' bytearrays as Arrow buffers (no copy): keys, values,
offsets, timestamps and types are never Python objects. Headers are a list of (key string, value binary)
structs, null when a record has none (as Spark's source); a header key that is not UTF-8 is decoded with
replacement characters rather than handed to Spark as an invalid string.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa

if TYPE_CHECKING:
    from dataplane.protocol._columns import Binary, Columns

HEADERS_TYPE = pa.list_(pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())]))
# Spark's Kafka source columns as Spark converts them to Arrow (every field nullable, timestamps in UTC µs).
ARROW_SCHEMA = pa.schema([
    pa.field("key", pa.binary()), pa.field("value", pa.binary()), pa.field("topic", pa.string()),
    pa.field("partition", pa.int32()), pa.field("offset", pa.int64()),
    pa.field("timestamp", pa.timestamp("us", tz="UTC")), pa.field("timestampType", pa.int32()),
])
ARROW_SCHEMA_WITH_HEADERS = ARROW_SCHEMA.append(pa.field("headers", HEADERS_TYPE))
UTC_MICROS = pa.timestamp("us", tz="UTC")


def _buffer(data: bytearray | None) -> pa.Buffer | None:
    return None if data is None else pa.py_buffer(data)


def _binary(column: Binary) -> pa.Array:
    valid, offsets, data, nulls = column
    return pa.Array.from_buffers(pa.binary(), len(offsets) // 4 - 1, [_buffer(valid), _buffer(offsets), _buffer(data)],
                                 null_count=nulls)


def _header_keys(column: Binary) -> pa.Array:
    raw = _binary(column)
    try:
        return raw.cast(pa.string())  # validates UTF-8
    except pa.ArrowInvalid:
        return pa.array([None if k is None else k.decode("utf-8", "replace") for k in raw.to_pylist()], pa.string())


def _headers(found: tuple[bytearray | None, bytearray, int, Binary, Binary], n: int) -> pa.Array:
    valid, offsets, nulls, keys, values = found
    entries = pa.StructArray.from_arrays([_header_keys(keys), _binary(values)],
                                         fields=list(HEADERS_TYPE.value_type))
    return pa.Array.from_buffers(HEADERS_TYPE, n, [_buffer(valid), _buffer(offsets)], null_count=nulls,
                                 children=[entries])


def to_record_batch(columns: Columns, topic: str, partition: int, *, include_headers: bool) -> pa.RecordBatch:
    """One Arrow record batch of the source's schema from one decoded fetch."""
    n = columns.count
    arrays = [
        _binary(columns.keys), _binary(columns.values),
        pa.repeat(pa.scalar(topic, pa.string()), n), pa.repeat(pa.scalar(partition, pa.int32()), n),
        pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(columns.offsets)]),
        pa.Array.from_buffers(UTC_MICROS, n, [None, pa.py_buffer(columns.timestamps)]),
        pa.Array.from_buffers(pa.int32(), n, [None, pa.py_buffer(columns.timestamp_types)]),
    ]
    if include_headers and columns.headers is not None:
        arrays.append(_headers(columns.headers, n))
        return pa.RecordBatch.from_arrays(arrays, schema=ARROW_SCHEMA_WITH_HEADERS)
    return pa.RecordBatch.from_arrays(arrays, schema=ARROW_SCHEMA)
