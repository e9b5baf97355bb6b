"""Keys and values of ``__transaction_state`` records, byte for byte Kafka's ``TransactionLogKey`` v0 and
``TransactionLogValue`` v0 (the versions Kafka writes for clients of transaction version 1).

    TransactionLogKey   v0  transactional_id string
    TransactionLogValue v0  producer_id int64, producer_epoch int16, transaction_timeout_ms int32,
                            transaction_status int8, transaction_partitions [topic string, partition_ids [int32]]
                            (null when empty), transaction_last_update_timestamp_ms int64,
                            transaction_start_timestamp_ms int64

Each is an int16 version followed by the fields; strings are int16-length, arrays int32-count. A null value is a
tombstone: the transactional id expired. Kafka's hash of the id picks the partition, as for groups.
"""

from __future__ import annotations

import struct

from dataplane.coordinator.records import CoordinatorRecordError, partition_for_group
from dataplane.coordinator.txn_state import TxnMetadata, TxnState

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_VALUE_HEAD = struct.Struct(">hqhib")  # version, producer id, epoch, timeout, status
_VALUE_TAIL = struct.Struct(">qq")  # last update, start
KEY_VERSION = VALUE_VERSION = 0

TRANSACTION_STATE_TOPIC = "__transaction_state"
# Kafka's settings for the topic: compacted, segments of 100 MiB, min.insync.replicas 2 (capped by the broker's RF).
TRANSACTION_STATE_CONFIGS = {"cleanup.policy": "compact", "segment.bytes": str(100 * 1024 * 1024)}


def partition_for(transactional_id: str, partitions: int) -> int:
    """Kafka's choice of the ``__transaction_state`` partition of an id (the group hash)."""
    return partition_for_group(transactional_id, partitions)


def _string(value: str) -> bytes:
    raw = value.encode()
    return _I16.pack(len(raw)) + raw


def encode_key(transactional_id: str) -> bytes:
    return _I16.pack(KEY_VERSION) + _string(transactional_id)


def decode_key(data: bytes) -> str:
    try:
        version, length = struct.unpack_from(">hh", data)
        if version != KEY_VERSION or length < 0 or 4 + length != len(data):
            raise CoordinatorRecordError(f"not a TransactionLogKey v0 ({len(data)} bytes, version {version})")
        return data[4:].decode()
    except (struct.error, UnicodeDecodeError) as exc:
        raise CoordinatorRecordError(f"bad TransactionLogKey: {exc}") from exc


def encode_value(txn: TxnMetadata) -> bytes:
    out = bytearray(_VALUE_HEAD.pack(VALUE_VERSION, txn.producer_id, txn.producer_epoch, txn.timeout_ms,
                                     int(txn.state)))
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(txn.partitions):
        by_topic.setdefault(topic, []).append(partition)
    if not by_topic:
        out += _I32.pack(-1)
    else:
        out += _I32.pack(len(by_topic))
        for topic, partitions in by_topic.items():
            out += _string(topic) + _I32.pack(len(partitions))
            out += b"".join(_I32.pack(p) for p in partitions)
    out += _VALUE_TAIL.pack(txn.update_ms, txn.start_ms)
    return bytes(out)


def decode_value(transactional_id: str, data: bytes) -> TxnMetadata:
    try:
        version, producer_id, epoch, timeout_ms, status = _VALUE_HEAD.unpack_from(data)
        if version != VALUE_VERSION:
            raise CoordinatorRecordError(f"TransactionLogValue v{version} is not read by this broker")
        at = _VALUE_HEAD.size
        (topics,) = _I32.unpack_from(data, at)
        at += 4
        partitions: set[tuple[str, int]] = set()
        for _ in range(max(topics, 0)):
            (length,) = _I16.unpack_from(data, at)
            topic = data[at + 2 : at + 2 + length].decode()
            at += 2 + length
            (count,) = _I32.unpack_from(data, at)
            at += 4
            for _ in range(count):
                partitions.add((topic, _I32.unpack_from(data, at)[0]))
                at += 4
        update_ms, start_ms = _VALUE_TAIL.unpack_from(data, at)
        return TxnMetadata(transactional_id, producer_id, epoch, timeout_ms, TxnState(status), frozenset(partitions),
                           start_ms, update_ms)
    except (struct.error, UnicodeDecodeError, ValueError) as exc:
        raise CoordinatorRecordError(f"bad TransactionLogValue of {transactional_id!r}: {exc}") from exc
