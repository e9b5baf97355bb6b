"""End-transaction markers: the control batch that commits or aborts a producer's transaction in a partition.

Kafka's ``EndTransactionMarker``: a control batch (transactional and control attribute bits set, the producer's
id and epoch, no sequence, never compressed) holding one record whose key is ``int16 version (0), int16 type
(0 abort, 1 commit)`` and whose value is ``int16 version (0), int32 coordinator epoch``. Sans-IO: the storage
layer reads markers from raw batch bytes (the producer state), coordinators build them.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from dataplane.protocol.errors import CorruptRecordError
from dataplane.protocol.records import (
    CODEC_MASK,
    HEADER_SIZE,
    NO_SEQUENCE,
    BatchHeader,
    Record,
    build_batch,
    zigzag_decode,
)

CONTROL_KEY = struct.Struct(">hh")  # version, type
MARKER_VALUE = struct.Struct(">hi")  # version, coordinator epoch
ABORT, COMMIT = 0, 1


class Marker(NamedTuple):
    """What an end-transaction marker says: commit or abort, and the coordinator epoch that wrote it."""

    commit: bool
    coordinator_epoch: int


def build_marker(producer_id: int, producer_epoch: int, *, commit: bool, coordinator_epoch: int,
                 timestamp: int) -> bytes:
    """One control batch ending ``producer_id``'s transaction (offset 0: the log assigns the real one)."""
    record = Record(0, timestamp, CONTROL_KEY.pack(0, COMMIT if commit else ABORT),
                    MARKER_VALUE.pack(0, coordinator_epoch))
    return build_batch([record], producer_id=producer_id, producer_epoch=producer_epoch,
                       base_sequence=NO_SEQUENCE, is_transactional=True, is_control=True)


def marker_at(buf: bytes | bytearray | memoryview, pos: int, header: BatchHeader) -> Marker | None:
    """The marker of the control batch at ``pos``; None for a control type other than commit/abort.

    Raises CorruptRecordError if the batch is not an uncompressed control batch with one readable record.
    """
    if not header.is_control or header.attributes & CODEC_MASK or header.record_count < 1:
        raise CorruptRecordError("a transaction marker is one uncompressed control record")
    at = pos + HEADER_SIZE
    _, at = zigzag_decode(buf, at)  # record length
    at += 1  # attributes
    _, at = zigzag_decode(buf, at)  # timestamp delta
    _, at = zigzag_decode(buf, at)  # offset delta
    key_length, at = zigzag_decode(buf, at)
    if key_length < CONTROL_KEY.size or at + key_length > len(buf):
        raise CorruptRecordError("control record without a control key")
    _, kind = CONTROL_KEY.unpack_from(buf, at)
    if kind not in (ABORT, COMMIT):
        return None
    at += key_length
    value_length, at = zigzag_decode(buf, at)
    epoch = -1
    if value_length >= MARKER_VALUE.size and at + MARKER_VALUE.size <= len(buf):
        epoch = MARKER_VALUE.unpack_from(buf, at)[1]
    return Marker(kind == COMMIT, epoch)
