"""Kafka RecordBatch v2 (magic 2), byte for byte. Sans-IO: pure functions over bytes.

Hot path (produce): :func:`validate_batches` checks framing, magic and CRC-32C of each
batch header and never decodes records; the log then rewrites only the base offset and
partition leader epoch (both outside the CRC) with :func:`stamp_batch`. Record-level
decoding (:func:`decode_batch`) is for compaction, timestamp lookups and tools.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import NamedTuple

import cramjam
import crc32c as _crc32c

from dataplane.protocol.errors import (
    CorruptRecordError,
    InvalidRecordError,
    UnsupportedCompressionTypeError,
    UnsupportedForMessageFormatError,
)

BATCH_HEADER = struct.Struct(
    ">q"  # 0  baseOffset
    "i"  # 8  batchLength: bytes after this field (total size - 12)
    "i"  # 12 partitionLeaderEpoch (outside the CRC)
    "b"  # 16 magic (2)
    "I"  # 17 crc: CRC-32C of bytes 21..end (attributes onward)
    "h"  # 21 attributes: codec bits 0-2, timestampType bit 3, transactional 4, control 5, deleteHorizon 6
    "i"  # 23 lastOffsetDelta
    "q"  # 27 baseTimestamp
    "q"  # 35 maxTimestamp
    "q"  # 43 producerId
    "h"  # 51 producerEpoch
    "i"  # 53 baseSequence
    "i"  # 57 recordCount
)
HEADER_SIZE = BATCH_HEADER.size  # 61
_unpack_header = BATCH_HEADER.unpack_from
assert HEADER_SIZE == 61
LOG_OVERHEAD = 12  # baseOffset + batchLength: the part of a batch not counted by batchLength
MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD  # 49
CRC_START = 21
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
MAX_TIMESTAMP_OFFSET = 35
_BASE_OFFSET = struct.Struct(">q")
_BATCH_LENGTH = struct.Struct(">i")
_EPOCH = struct.Struct(">i")
_ATTR_MAXTS = struct.Struct(">h" "i" "q" "q")  # attributes, lastOffsetDelta, baseTimestamp, maxTimestamp
_CRC = struct.Struct(">I")
# Smallest encoded record: length, attributes, tsDelta, offsetDelta, keyLen, valueLen, headerCount.
MIN_RECORD_SIZE = 7

CODEC_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20
DELETE_HORIZON_MASK = 0x40

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1
NO_TIMESTAMP = -1


class Compression(IntEnum):
    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


class TimestampType(IntEnum):
    NO_TIMESTAMP_TYPE = -1
    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


def crc32c(data: bytes | bytearray | memoryview) -> int:
    return int(_crc32c.crc32c(data))


class BatchHeader(NamedTuple):
    """The 61-byte v2 header, parsed without touching the records.

    A NamedTuple rather than a frozen dataclass: it is built once per batch on the produce
    and fetch paths, and tuple construction costs ~0.3 µs against ~5 µs.
    """

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @classmethod
    def parse(cls, buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
        """Parse the header at ``pos``; raises CorruptRecordError if it is truncated or not v2."""
        if len(buf) - pos < HEADER_SIZE:
            if len(buf) - pos >= 17 and buf[pos + MAGIC_OFFSET] != 2:
                _bad_magic(buf[pos + MAGIC_OFFSET])
            raise CorruptRecordError(f"truncated batch header at position {pos}")
        h = cls._make(_unpack_header(buf, pos))
        if h.magic != 2:
            _bad_magic(h.magic)
        return h

    @property
    def size(self) -> int:
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> Compression:
        return Compression(self.attributes & CODEC_MASK)

    @property
    def timestamp_type(self) -> TimestampType:
        return TimestampType.LOG_APPEND_TIME if self.attributes & TIMESTAMP_TYPE_MASK else (
            TimestampType.CREATE_TIME
        )

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)


def _bad_magic(magic: int) -> None:
    if magic in (0, 1):
        raise UnsupportedForMessageFormatError(f"message format v{magic} is not supported")
    raise CorruptRecordError(f"invalid magic byte {magic}")


@dataclass(frozen=True, slots=True)
class RecordHeader:
    key: str
    value: bytes | None


@dataclass(frozen=True, slots=True)
class Record:
    """One record with its absolute offset and timestamp."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[RecordHeader, ...] = ()


@dataclass(frozen=True, slots=True)
class RecordBatch:
    header: BatchHeader
    records: tuple[Record, ...]


@dataclass(frozen=True, slots=True)
class BatchesSummary:
    """What the log needs to know about validated input, from headers alone."""

    headers: tuple[tuple[int, BatchHeader], ...]  # (position, header)
    total_size: int
    record_count: int  # sum of (lastOffsetDelta + 1): offsets the input occupies


# ---------------------------------------------------------------- varints


def zigzag_encode(n: int) -> bytes:
    v = (n << 1) ^ (n >> 63)
    out = bytearray()
    while v > 0x7F:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def zigzag_decode(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    """Return (value, next position)."""
    shift = 0
    v = 0
    while True:
        if pos >= len(buf):
            raise CorruptRecordError("truncated varint")
        b = buf[pos]
        pos += 1
        v |= (b & 0x7F) << shift
        if not b & 0x80:
            break
        shift += 7
        if shift > 63:
            raise CorruptRecordError("varint too long")
    return (v >> 1) ^ -(v & 1), pos


# ---------------------------------------------------------------- compression

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK = 32 * 1024
_BE_INT = struct.Struct(">i")


def compress(codec: Compression, data: bytes) -> bytes:
    if codec == Compression.NONE:
        return data
    if codec == Compression.GZIP:
        return bytes(cramjam.gzip.compress(data))
    if codec == Compression.SNAPPY:
        # Xerial framing, as the Java client writes it; every client reads this form.
        out = bytearray(_XERIAL_HEADER)
        for i in range(0, len(data), _XERIAL_BLOCK):
            block = bytes(cramjam.snappy.compress_raw(data[i : i + _XERIAL_BLOCK]))
            out += _BE_INT.pack(len(block))
            out += block
        return bytes(out)
    if codec == Compression.LZ4:
        return bytes(cramjam.lz4.compress(data))
    if codec == Compression.ZSTD:
        return bytes(cramjam.zstd.compress(data))
    raise UnsupportedCompressionTypeError(f"unknown compression codec {int(codec)}")


def decompress(codec: int, data: bytes | memoryview) -> bytes:
    try:
        if codec == Compression.GZIP:
            return bytes(cramjam.gzip.decompress(bytes(data)))
        if codec == Compression.SNAPPY:
            raw = bytes(data)
            if raw[:8] == _XERIAL_MAGIC:
                out = bytearray()
                pos = 16
                while pos < len(raw):
                    (n,) = _BE_INT.unpack_from(raw, pos)
                    pos += 4
                    if n < 0 or pos + n > len(raw):
                        raise CorruptRecordError("bad xerial snappy block length")
                    out += bytes(cramjam.snappy.decompress_raw(raw[pos : pos + n]))
                    pos += n
                return bytes(out)
            # librdkafka sends raw (unframed) snappy.
            return bytes(cramjam.snappy.decompress_raw(raw))
        if codec == Compression.LZ4:
            return bytes(cramjam.lz4.decompress(bytes(data)))
        if codec == Compression.ZSTD:
            return bytes(cramjam.zstd.decompress(bytes(data)))
    except CorruptRecordError:
        raise
    except Exception as exc:  # cramjam raises its own DecompressionError
        raise CorruptRecordError(f"cannot decompress {Compression(codec).name}: {exc}") from exc
    if codec == Compression.NONE:
        return bytes(data)
    raise UnsupportedCompressionTypeError(f"unknown compression codec {codec}")


# ---------------------------------------------------------------- framing & validation


def iter_batch_headers(
    buf: bytes | bytearray | memoryview, *, allow_partial_tail: bool = False
) -> Iterator[tuple[int, BatchHeader]]:
    """Yield (position, header) for each batch in a buffer of concatenated batches.

    With ``allow_partial_tail`` a trailing incomplete batch ends the iteration (as in a fetch
    response truncated at max_bytes); otherwise it raises CorruptRecordError.
    """
    pos = 0
    n = len(buf)
    while pos < n:
        if n - pos < HEADER_SIZE:
            if allow_partial_tail:
                return
            raise CorruptRecordError(f"{n - pos} trailing bytes are not a whole batch")
        h = BatchHeader.parse(buf, pos)
        if h.batch_length < MIN_BATCH_LENGTH:
            raise CorruptRecordError(f"batch length {h.batch_length} below the minimum")
        end = pos + h.size
        if end > n:
            if allow_partial_tail:
                return
            raise CorruptRecordError(f"batch at {pos} claims {h.size} bytes, only {n - pos} present")
        yield pos, h
        pos = end


def check_batch(buf: bytes | bytearray | memoryview, pos: int, h: BatchHeader) -> None:
    """Structural checks on one framed batch: CRC and record-count sanity (no record decoding)."""
    size = h.batch_length + LOG_OVERHEAD
    if _crc32c.crc32c(memoryview(buf)[pos + CRC_START : pos + size]) != h.crc:
        raise CorruptRecordError(f"CRC mismatch in batch at offset {h.base_offset}")
    count, lod, codec = h.record_count, h.last_offset_delta, h.attributes & CODEC_MASK
    if count < 0 or lod < 0:
        raise CorruptRecordError("negative record count or last offset delta")
    if count > lod + 1:
        raise InvalidRecordError(f"record count {count} exceeds last offset delta {lod} + 1")
    if codec > Compression.ZSTD:
        raise UnsupportedCompressionTypeError(f"unknown compression codec {codec}")
    if codec == 0 and count * MIN_RECORD_SIZE > size - HEADER_SIZE:
        raise CorruptRecordError(f"record count {count} cannot fit in {size} bytes")


def validate_single_batch(buf: bytes | bytearray | memoryview, *, strict_offsets: bool = True) -> BatchHeader:
    """Fast path of :func:`validate_batches` for a buffer that is exactly one batch."""
    if len(buf) < HEADER_SIZE:
        BatchHeader.parse(buf, 0)
    h = BatchHeader._make(_unpack_header(buf, 0))
    if h.magic != 2:
        _bad_magic(h.magic)
    size = len(buf)
    if h.batch_length + LOG_OVERHEAD != size or h.batch_length < MIN_BATCH_LENGTH:
        raise CorruptRecordError(f"batch length {h.batch_length} does not match {size} bytes")
    count, lod = h.record_count, h.last_offset_delta
    if (
        _crc32c.crc32c(memoryview(buf)[CRC_START:]) != h.crc
        or count < 0
        or lod < 0
        or count > lod + 1
        or h.attributes & CODEC_MASK > Compression.ZSTD
        or (h.attributes & CODEC_MASK == 0 and count * MIN_RECORD_SIZE > size - HEADER_SIZE)
    ):
        check_batch(buf, 0, h)  # slow path: raise the precise error
    if strict_offsets and (h.record_count == 0 or h.last_offset_delta != h.record_count - 1):
        raise InvalidRecordError(
            f"batch has {h.record_count} records but last offset delta {h.last_offset_delta}"
        )
    return h


def batch_length_at(buf: bytes | bytearray | memoryview, pos: int = 0) -> int:
    """The batchLength field of the batch at ``pos`` (no validation)."""
    return int(_BATCH_LENGTH.unpack_from(buf, pos + 8)[0])


def validate_batches(
    buf: bytes | bytearray | memoryview, *, strict_offsets: bool = True
) -> BatchesSummary:
    """Validate client-sent batches (framing, magic, CRC, counts) without decoding records.

    ``strict_offsets`` (leader appends) requires ``lastOffsetDelta == recordCount - 1`` and a
    non-empty batch, as a producer must send; followers may get compacted batches with gaps.
    This is the produce hot path, hence the inlined framing loop.
    """
    n = len(buf)
    if n == 0:
        raise InvalidRecordError("no record batches")
    out: list[tuple[int, BatchHeader]] = []
    offsets = 0
    pos = 0
    make = BatchHeader._make
    while pos < n:
        if n - pos < HEADER_SIZE:
            BatchHeader.parse(buf, pos)  # raises the right error
        h = make(_unpack_header(buf, pos))
        if h.magic != 2:
            _bad_magic(h.magic)
        if h.batch_length < MIN_BATCH_LENGTH:
            raise CorruptRecordError(f"batch length {h.batch_length} below the minimum")
        end = pos + h.batch_length + LOG_OVERHEAD
        if end > n:
            raise CorruptRecordError(f"batch at {pos} claims {end - pos} bytes, only {n - pos} present")
        check_batch(buf, pos, h)
        if strict_offsets and (h.record_count == 0 or h.last_offset_delta != h.record_count - 1):
            raise InvalidRecordError(
                f"batch has {h.record_count} records but last offset delta {h.last_offset_delta}"
            )
        out.append((pos, h))
        offsets += h.last_offset_delta + 1
        pos = end
    return BatchesSummary(tuple(out), n, offsets)


def stamp_batch(buf: bytearray, pos: int, base_offset: int, partition_leader_epoch: int) -> None:
    """Rewrite baseOffset and partitionLeaderEpoch in place; both lie outside the CRC."""
    _BASE_OFFSET.pack_into(buf, pos, base_offset)
    _EPOCH.pack_into(buf, pos + 12, partition_leader_epoch)


def set_log_append_time(buf: bytearray, pos: int, size: int, timestamp: int) -> None:
    """Mark a batch LogAppendTime with ``timestamp`` as maxTimestamp and recompute the CRC.

    This is the one case in which the log changes bytes covered by the CRC.
    """
    attrs, lod, base_ts, _ = _ATTR_MAXTS.unpack_from(buf, pos + ATTRIBUTES_OFFSET)
    _ATTR_MAXTS.pack_into(buf, pos + ATTRIBUTES_OFFSET, attrs | TIMESTAMP_TYPE_MASK, lod, base_ts, timestamp)
    _CRC.pack_into(buf, pos + CRC_OFFSET, crc32c(memoryview(buf)[pos + CRC_START : pos + size]))


def set_max_timestamp(buf: bytearray, pos: int, size: int, timestamp: int) -> None:
    """Fill in a CreateTime batch's maxTimestamp (a client left it -1) and recompute the CRC."""
    attrs, lod, base_ts, _ = _ATTR_MAXTS.unpack_from(buf, pos + ATTRIBUTES_OFFSET)
    _ATTR_MAXTS.pack_into(buf, pos + ATTRIBUTES_OFFSET, attrs, lod, base_ts, timestamp)
    _CRC.pack_into(buf, pos + CRC_OFFSET, crc32c(memoryview(buf)[pos + CRC_START : pos + size]))


# ---------------------------------------------------------------- records


def _encode_record(offset_delta: int, ts_delta: int, rec: Record) -> bytes:
    body = bytearray(b"\x00")  # record attributes: unused
    body += zigzag_encode(ts_delta)
    body += zigzag_encode(offset_delta)
    if rec.key is None:
        body += zigzag_encode(-1)
    else:
        body += zigzag_encode(len(rec.key))
        body += rec.key
    if rec.value is None:
        body += zigzag_encode(-1)
    else:
        body += zigzag_encode(len(rec.value))
        body += rec.value
    body += zigzag_encode(len(rec.headers))
    for hdr in rec.headers:
        k = hdr.key.encode()
        body += zigzag_encode(len(k))
        body += k
        if hdr.value is None:
            body += zigzag_encode(-1)
        else:
            body += zigzag_encode(len(hdr.value))
            body += hdr.value
    return zigzag_encode(len(body)) + bytes(body)


def _decode_records(
    data: bytes | memoryview, h: BatchHeader
) -> tuple[Record, ...]:
    out: list[Record] = []
    pos = 0
    n = len(data)
    log_append = bool(h.attributes & TIMESTAMP_TYPE_MASK)
    for _ in range(h.record_count):
        length, pos = zigzag_decode(data, pos)
        end = pos + length
        if length < 0 or end > n:
            raise CorruptRecordError("record length runs past the batch")
        pos += 1  # attributes
        ts_delta, pos = zigzag_decode(data, pos)
        off_delta, pos = zigzag_decode(data, pos)
        klen, pos = zigzag_decode(data, pos)
        key: bytes | None = None
        if klen >= 0:
            key = bytes(data[pos : pos + klen])
            pos += klen
        vlen, pos = zigzag_decode(data, pos)
        value: bytes | None = None
        if vlen >= 0:
            value = bytes(data[pos : pos + vlen])
            pos += vlen
        nh, pos = zigzag_decode(data, pos)
        if nh < 0 or nh > n:
            raise CorruptRecordError("bad header count")
        headers: list[RecordHeader] = []
        for _h in range(nh):
            hk, pos = zigzag_decode(data, pos)
            if hk < 0:
                raise CorruptRecordError("null header key")
            hkey = bytes(data[pos : pos + hk]).decode("utf-8", errors="replace")
            pos += hk
            hv, pos = zigzag_decode(data, pos)
            hval: bytes | None = None
            if hv >= 0:
                hval = bytes(data[pos : pos + hv])
                pos += hv
            headers.append(RecordHeader(hkey, hval))
        if pos != end:
            raise CorruptRecordError("record length does not match its fields")
        if off_delta < 0 or off_delta > h.last_offset_delta:
            raise CorruptRecordError(f"record offset delta {off_delta} outside the batch")
        ts = h.max_timestamp if log_append else h.base_timestamp + ts_delta
        out.append(Record(h.base_offset + off_delta, ts, key, value, tuple(headers)))
    if pos != n:
        raise CorruptRecordError(f"{n - pos} bytes after the last record")
    return tuple(out)


def decode_batch(
    buf: bytes | bytearray | memoryview, pos: int = 0, *, verify_crc: bool = True
) -> RecordBatch:
    """Decode one batch fully, decompressing and parsing every record."""
    h = BatchHeader.parse(buf, pos)
    if h.batch_length < MIN_BATCH_LENGTH or pos + h.size > len(buf):
        raise CorruptRecordError("batch length runs past the buffer")
    if verify_crc:
        check_batch(buf, pos, h)
    payload = memoryview(buf)[pos + HEADER_SIZE : pos + h.size]
    codec = h.attributes & CODEC_MASK
    data: bytes | memoryview = payload if codec == Compression.NONE else decompress(codec, payload)
    return RecordBatch(h, _decode_records(data, h))


def decode_batches(buf: bytes | bytearray | memoryview) -> list[RecordBatch]:
    return [decode_batch(buf, pos) for pos, _ in iter_batch_headers(buf)]


def build_batch(
    records: Sequence[Record],
    *,
    base_offset: int | None = None,
    compression: Compression = Compression.NONE,
    timestamp_type: TimestampType = TimestampType.CREATE_TIME,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    is_transactional: bool = False,
    is_control: bool = False,
    last_offset_delta: int | None = None,
    base_timestamp: int | None = None,
    max_timestamp: int | None = None,
) -> bytes:
    """Build one v2 batch. Offsets are taken from the records (relative to ``base_offset``).

    ``last_offset_delta``, ``base_timestamp`` and ``max_timestamp`` overrides let compaction
    keep a batch's original offset span and timestamps after dropping records.
    """
    if base_offset is None:
        base_offset = records[0].offset if records else 0
    if base_timestamp is None:
        base_timestamp = records[0].timestamp if records else NO_TIMESTAMP
    body = bytearray()
    for rec in records:
        body += _encode_record(rec.offset - base_offset, rec.timestamp - base_timestamp, rec)
    if last_offset_delta is None:
        last_offset_delta = (records[-1].offset - base_offset) if records else 0
    if max_timestamp is None:
        max_timestamp = max((r.timestamp for r in records), default=NO_TIMESTAMP)
    payload = compress(compression, bytes(body))
    attrs = int(compression)
    if timestamp_type == TimestampType.LOG_APPEND_TIME:
        attrs |= TIMESTAMP_TYPE_MASK
    if is_transactional:
        attrs |= TRANSACTIONAL_MASK
    if is_control:
        attrs |= CONTROL_MASK
    out = bytearray(HEADER_SIZE + len(payload))
    BATCH_HEADER.pack_into(
        out, 0, base_offset, HEADER_SIZE + len(payload) - LOG_OVERHEAD, partition_leader_epoch, 2, 0,
        attrs, last_offset_delta, base_timestamp, max_timestamp, producer_id, producer_epoch,
        base_sequence, len(records),
    )
    out[HEADER_SIZE:] = payload
    _CRC.pack_into(out, CRC_OFFSET, crc32c(memoryview(out)[CRC_START:]))
    return bytes(out)



def uses_zstd(buf: bytes | bytearray | memoryview) -> bool:
    """Whether any whole batch in ``buf`` is zstd-compressed (KIP-110: only Produce v7+ / Fetch v10+ may carry it)."""
    return any(h.attributes & CODEC_MASK == Compression.ZSTD
               for _, h in iter_batch_headers(buf, allow_partial_tail=True))
