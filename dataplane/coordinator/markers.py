"""End-transaction markers: the control batch that commits or aborts a producer's transaction in a partition.

Kafka's ``EndTransactionMarker``: a control batch (transactional and control
attribute bits set, the producer's id and epoch, no sequence) holding one
record whose key is ``int16 version (0), int16 type (0 abort, 1 commit)`` and
whose value is ``int16 version (0), int32 coordinator epoch``. The group
coordinator reads them when it replays ``__consumer_offsets``; tests write them.
"""

from __future__ import annotations

from dataclasses import dataclass

from dataplane.protocol.control import ABORT, COMMIT, CONTROL_KEY, MARKER_VALUE, build_marker
from dataplane.protocol.records import RecordBatch


@dataclass(frozen=True, slots=True)
class EndTxnMarker:
    producer_id: int
    producer_epoch: int
    commit: bool
    coordinator_epoch: int


def build_end_txn_marker(producer_id: int, producer_epoch: int, *, commit: bool, coordinator_epoch: int = 0,
                         timestamp: int = 0) -> bytes:
    """One control batch ending ``producer_id``'s transaction (offset 0: the log assigns the real one)."""
    return build_marker(producer_id, producer_epoch, commit=commit, coordinator_epoch=coordinator_epoch,
                        timestamp=timestamp)


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
