"""End-transaction markers: the control batch that commits or aborts a producer's transaction in a partition.

Kafka's ``EndTransactionMarker``: a control batch (transactional and control
attribute bits set, the producer's id and epoch, no sequence) holding one
record whose key is ``int16 version (0), int16 type (0 abort, 1 commit)`` and
whose value is ``int16 version (0), int32 coordinator epoch``. The group
coordinator reads them when it replays ``__consumer_offsets``; tests write them.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from dataplane.protocol.records import NO_SEQUENCE, Record, RecordBatch, build_batch

CONTROL_KEY = struct.Struct(
    ">h"  # version (0)
    "h"  # marker kind: 0 abort, 1 commit
)
MARKER_VALUE = struct.Struct(
    ">h"  # version (0)
    "i"  # coordinator epoch
)
ABORT, COMMIT = 0, 1


@dataclass(frozen=True, slots=True)
class EndTxnMarker:
    producer_id: int
    producer_epoch: int
    commit: bool
    coordinator_epoch: int


def build_end_txn_marker(producer_id: int, producer_epoch: int, *, commit: bool, coordinator_epoch: int = 0,
                         timestamp: int = 0) -> bytes:
    """One control batch ending ``producer_id``'s transaction (offset 0: the log assigns the real one)."""
    record = Record(0, timestamp, CONTROL_KEY.pack(0, COMMIT if commit else ABORT),
                    MARKER_VALUE.pack(0, coordinator_epoch))
    return build_batch([record], producer_id=producer_id, producer_epoch=producer_epoch,
                       base_sequence=NO_SEQUENCE, is_transactional=True, is_control=True)


def parse_end_txn_marker(batch: RecordBatch) -> EndTxnMarker | None:
    """The marker a control batch carries; None for any other batch (or a control type this code does not know)."""
    if not batch.header.is_control or len(batch.records) != 1 or batch.records[0].key is None:
        return None
    key, value = batch.records[0].key, batch.records[0].value or b""
    if len(key) < CONTROL_KEY.size:
        return None
    _, kind = CONTROL_KEY.unpack_from(key)
    if kind not in (ABORT, COMMIT):
        return None
    epoch = MARKER_VALUE.unpack_from(value)[1] if len(value) >= MARKER_VALUE.size else -1
    return EndTxnMarker(batch.header.producer_id, batch.header.producer_epoch, kind == COMMIT, epoch)
