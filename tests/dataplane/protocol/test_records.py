from __future__ import annotations

import pytest
from aiokafka.record.default_records import DefaultRecordBatch as AioBatch
from aiokafka.record.default_records import DefaultRecordBatchBuilder as AioBuilder
from kafka.record.default_records import DefaultRecordBatch as KpBatch
from kafka.record.default_records import DefaultRecordBatchBuilder as KpBuilder

from dataplane.protocol.errors import (
    CorruptRecordError,
    ErrorCode,
    InvalidRecordError,
    KafkaError,
    UnsupportedForMessageFormatError,
)
from dataplane.protocol.records import (
    HEADER_SIZE,
    BatchHeader,
    Compression,
    Record,
    RecordHeader,
    TimestampType,
    build_batch,
    compress,
    decode_batch,
    decode_batches,
    decompress,
    iter_batch_headers,
    set_log_append_time,
    stamp_batch,
    validate_batches,
    zigzag_decode,
    zigzag_encode,
)

CODECS = list(Compression)

SAMPLE: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]]]] = [
    (b"k1", b"v1", []),
    (None, b"value-without-key", [("h", b"x")]),
    (b"tombstone", None, []),
    (None, None, [("a", None), ("b", b"")]),
    (b"k" * 300, b"v" * 5000, [("hdr" * 10, b"y" * 200)]),
    (b"", b"", []),
]


def _sample_records(base: int = 0, ts: int = 1_700_000_000_000) -> list[Record]:
    return [
        Record(base + i, ts + i * 7, k, v, tuple(RecordHeader(hk, hv) for hk, hv in h))
        for i, (k, v, h) in enumerate(SAMPLE)
    ]


def _expected(recs: list[Record]) -> list[tuple[object, ...]]:
    return [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in recs]


@pytest.mark.parametrize("builder_cls", [KpBuilder, AioBuilder], ids=["kafka-python", "aiokafka"])
@pytest.mark.parametrize("codec", CODECS, ids=[c.name for c in CODECS])
def test_decode_client_built_batches(builder_cls: type, codec: Compression) -> None:
    b = builder_cls(2, int(codec), 0, 1234, 5, 77, 1 << 20)
    recs = _sample_records()
    for r in recs:
        b.append(r.offset, r.timestamp, r.key, r.value, [(h.key, h.value) for h in r.headers])
    raw = bytes(b.build())
    batch = decode_batch(raw)
    h = batch.header
    assert h.compression == codec
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (1234, 5, 77)
    assert h.record_count == len(recs) and h.last_offset_delta == len(recs) - 1
    assert h.max_timestamp == max(r.timestamp for r in recs)
    assert _expected(list(batch.records)) == _expected(recs)
    summary = validate_batches(raw)
    assert summary.record_count == len(recs)


@pytest.mark.parametrize("codec", CODECS, ids=[c.name for c in CODECS])
def test_our_batches_decode_in_kafka_python_and_aiokafka(codec: Compression) -> None:
    recs = _sample_records(base=100)
    raw = build_batch(recs, compression=codec, producer_id=9, producer_epoch=1, base_sequence=3)
    for reader_cls in (KpBatch, AioBatch):
        rb = reader_cls(bytearray(raw))
        assert rb.validate_crc()
        assert rb.base_offset == 100
        assert rb.compression_type == int(codec)
        got = [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in rb]
        want = [(r.offset, r.timestamp, r.key, r.value, [(h.key, h.value) for h in r.headers]) for r in recs]
        assert got == want


def test_crc_matches_kafka_python_uncompressed() -> None:
    recs = _sample_records()
    kb = KpBuilder(2, 0, 0, -1, -1, -1, 1 << 20)
    for r in recs:
        kb.append(r.offset, r.timestamp, r.key, r.value, [(h.key, h.value) for h in r.headers])
    theirs = bytes(kb.build())
    ours = build_batch(recs, partition_leader_epoch=0)  # kafka-python writes 0 here, Java -1
    assert ours == theirs
    assert BatchHeader.parse(ours).crc == KpBatch(bytearray(theirs)).crc


def test_raw_snappy_from_librdkafka_is_read() -> None:
    import cramjam

    data = b"hello snappy" * 100
    raw = bytes(cramjam.snappy.compress_raw(data))
    assert decompress(Compression.SNAPPY, raw) == data
    assert decompress(Compression.SNAPPY, compress(Compression.SNAPPY, data)) == data


def test_stamp_keeps_crc_valid() -> None:
    raw = bytearray(build_batch(_sample_records()))
    stamp_batch(raw, 0, 5_000_000_000, 17)
    b = decode_batch(raw)
    assert b.header.base_offset == 5_000_000_000
    assert b.header.partition_leader_epoch == 17
    assert b.records[0].offset == 5_000_000_000


def test_log_append_time_rewrites_crc() -> None:
    raw = bytearray(build_batch(_sample_records()))
    set_log_append_time(raw, 0, len(raw), 42)
    b = decode_batch(raw)
    assert b.header.timestamp_type == TimestampType.LOG_APPEND_TIME
    assert b.header.max_timestamp == 42
    assert all(r.timestamp == 42 for r in b.records)
    assert KpBatch(bytearray(raw)).validate_crc()


def test_iter_batches_and_partial_tail() -> None:
    a = build_batch(_sample_records(0))
    b = build_batch(_sample_records(6), compression=Compression.LZ4)
    buf = a + b
    assert [p for p, _ in iter_batch_headers(buf)] == [0, len(a)]
    assert [p for p, _ in iter_batch_headers(buf[:-3], allow_partial_tail=True)] == [0]
    with pytest.raises(CorruptRecordError):
        list(iter_batch_headers(buf[:-3]))
    assert len(decode_batches(buf)) == 2


@pytest.mark.parametrize("n", [0, 1, -1, 63, 64, -64, -65, 2**31 - 1, -(2**31), 2**62, -(2**63)])
def test_zigzag(n: int) -> None:
    enc = zigzag_encode(n)
    assert zigzag_decode(enc, 0) == (n, len(enc))


def _bad(buf: bytes | bytearray, exc: type[KafkaError], code: ErrorCode) -> None:
    with pytest.raises(exc) as ei:
        validate_batches(buf)
    assert ei.value.code == code


def test_bad_inputs() -> None:
    good = build_batch(_sample_records())
    _bad(b"", InvalidRecordError, ErrorCode.INVALID_RECORD)
    wrong = bytearray(good)
    wrong[16] = 7
    _bad(wrong, CorruptRecordError, ErrorCode.CORRUPT_MESSAGE)
    wrong[16] = 1
    _bad(wrong, UnsupportedForMessageFormatError, ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT)
    flipped = bytearray(good)
    flipped[-1] ^= 0x01
    _bad(flipped, CorruptRecordError, ErrorCode.CORRUPT_MESSAGE)
    lying = bytearray(good)
    lying[8:12] = (len(good) + 100).to_bytes(4, "big")
    _bad(lying, CorruptRecordError, ErrorCode.CORRUPT_MESSAGE)
    short = bytearray(good)
    short[8:12] = (10).to_bytes(4, "big")
    _bad(short, CorruptRecordError, ErrorCode.CORRUPT_MESSAGE)
    _bad(good[:HEADER_SIZE - 1], CorruptRecordError, ErrorCode.CORRUPT_MESSAGE)
    _bad(good + b"\x00\x01", CorruptRecordError, ErrorCode.CORRUPT_MESSAGE)
    # A count that cannot fit (CRC recomputed so only the count lies).
    from dataplane.protocol.records import crc32c

    liar = bytearray(good)
    liar[57:61] = (10_000).to_bytes(4, "big")
    liar[23:27] = (9_999).to_bytes(4, "big")
    liar[17:21] = crc32c(bytes(liar[21:])).to_bytes(4, "big")
    _bad(liar, CorruptRecordError, ErrorCode.CORRUPT_MESSAGE)
    # lastOffsetDelta disagreeing with the count is invalid from a producer
    gap = build_batch(_sample_records(), last_offset_delta=20)
    _bad(gap, InvalidRecordError, ErrorCode.INVALID_RECORD)
    assert validate_batches(gap, strict_offsets=False).record_count == 21


def test_error_codes() -> None:
    assert ErrorCode.OFFSET_OUT_OF_RANGE == 1 and ErrorCode.INVALID_RECORD == 87
    assert ErrorCode.MESSAGE_TOO_LARGE == 10 and ErrorCode.NOT_LEADER_OR_FOLLOWER == 6
    assert CorruptRecordError().retriable and not InvalidRecordError().retriable
    assert KafkaError("x", code=ErrorCode.REQUEST_TIMED_OUT).retriable
