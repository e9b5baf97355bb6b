from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from dataplane.protocol.errors import (
    CorruptRecordError,
    ErrorCode,
    InvalidRecordError,
    KafkaError,
    MessageTooLargeError,
    OffsetOutOfRangeError,
    RecordListTooLargeError,
    UnexpectedAppendOffsetError,
)
from dataplane.protocol.records import BatchHeader, Compression, TimestampType, decode_batch
from dataplane.storage.config import LogConfig
from dataplane.storage.log import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP, Log
from tests.dataplane.conftest import Clock, make_batch

OpenLog = Callable[..., Log]


def _rebase(buf: bytes, offset: int) -> bytes:
    """Give well-formed leading batches follower offsets; leave the bytes otherwise untouched."""
    out = bytearray(buf)
    pos = 0
    while pos + 61 <= len(out):
        size = int.from_bytes(out[pos + 8 : pos + 12], "big", signed=True) + 12
        if size < 61:
            break
        out[pos : pos + 8] = offset.to_bytes(8, "big")
        offset += int.from_bytes(out[pos + 23 : pos + 27], "big") + 1
        pos += size
    return bytes(out)


def snapshot(log: Log) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(log.dir.iterdir()) if p.is_file()}


def test_append_assigns_offsets_and_read_returns_whole_batches(open_log: OpenLog) -> None:
    log = open_log()
    infos = [log.append_as_leader(make_batch(3), leader_epoch=0) for _ in range(4)]
    assert [(i.first_offset, i.last_offset) for i in infos] == [(0, 2), (3, 5), (6, 8), (9, 11)]
    assert log.log_end_offset == 12
    region = log.read(4, max_bytes=1)
    data = region.read_bytes()
    h = BatchHeader.parse(data)
    assert (h.base_offset, h.size) == (3, len(data))  # at least one whole batch
    assert region.first_offset == 3
    all_bytes = log.read(0, 1 << 20).read_bytes()
    assert len(all_bytes) == 4 * h.size
    assert [r.offset for r in log.read_records(0)] == list(range(12))
    # max_offset (e.g. high watermark) is exclusive and limits whole batches
    assert log.read(0, 1 << 20, max_offset=6).length == 2 * h.size
    assert log.read(6, 1 << 20, max_offset=6).length == 0
    assert log.read(12, 100).length == 0
    with pytest.raises(OffsetOutOfRangeError) as ei:
        log.read(13, 100)
    assert ei.value.code == ErrorCode.OFFSET_OUT_OF_RANGE


def test_stored_batches_are_byte_identical_except_offset_and_epoch(open_log: OpenLog) -> None:
    log = open_log()
    raw = make_batch(5, compression=Compression.ZSTD)
    log.append_as_leader(make_batch(2), leader_epoch=1)
    log.append_as_leader(raw, leader_epoch=7)
    stored = log.read(2, 1 << 20).read_bytes()
    assert stored[16:] == raw[16:] and stored[8:12] == raw[8:12]
    h = BatchHeader.parse(stored)
    assert (h.base_offset, h.partition_leader_epoch) == (2, 7)
    assert [r.offset for r in decode_batch(stored).records] == [2, 3, 4, 5, 6]


def test_log_append_time(open_log: OpenLog, clock: Clock) -> None:
    log = open_log(LogConfig(message_timestamp_type="LogAppendTime"))
    info = log.append_as_leader(make_batch(3, ts=5), leader_epoch=0)
    assert info.log_append_time == clock.now and info.max_timestamp == clock.now
    b = decode_batch(log.read(0, 1000).read_bytes())
    assert b.header.timestamp_type == TimestampType.LOG_APPEND_TIME
    assert all(r.timestamp == clock.now for r in b.records)


@pytest.mark.parametrize(
    "mutate,exc,code",
    [
        (lambda b: b[:0], InvalidRecordError, ErrorCode.INVALID_RECORD),
        (lambda b: b[:16] + b"\x05" + b[17:], CorruptRecordError, ErrorCode.CORRUPT_MESSAGE),
        (lambda b: b[:-1] + bytes([b[-1] ^ 0xFF]), CorruptRecordError, ErrorCode.CORRUPT_MESSAGE),
        (lambda b: b[:8] + (len(b) * 2).to_bytes(4, "big") + b[12:], CorruptRecordError,
         ErrorCode.CORRUPT_MESSAGE),
        (lambda b: b[:30], CorruptRecordError, ErrorCode.CORRUPT_MESSAGE),
        (lambda b: b + b[:20], CorruptRecordError, ErrorCode.CORRUPT_MESSAGE),
    ],
    ids=["empty", "magic", "crc", "lying-length", "short", "trailing-garbage"],
)
@pytest.mark.parametrize("leader", [True, False], ids=["leader", "follower"])
def test_bad_input_is_rejected_and_log_unchanged(
    open_log: OpenLog, mutate: Callable[[bytes], bytes], exc: type[KafkaError], code: ErrorCode,
    leader: bool,
) -> None:
    log = open_log()
    if not leader:
        log.append_as_leader = lambda b, leader_epoch: log.append_as_follower(  # type: ignore[method-assign]
            _rebase(b, log.log_end_offset)
        )
    log.append_as_leader(make_batch(2), leader_epoch=0)
    before = snapshot(log)
    good = make_batch(3)
    with pytest.raises(exc) as ei:
        bad = mutate(good)
        # A valid batch in front of the bad one must not be appended either.
        log.append_as_leader(good + bad if bad else bad, leader_epoch=0)
    assert ei.value.code == code
    assert snapshot(log) == before and log.log_end_offset == 2
    if bad:  # the same bytes alone take the single-batch fast path
        with pytest.raises(KafkaError) as ei2:
            log.append_as_leader(bad, leader_epoch=0)
        assert ei2.value.code in (code, ErrorCode.CORRUPT_MESSAGE)
        assert snapshot(log) == before and log.log_end_offset == 2


def test_size_limits(open_log: OpenLog) -> None:
    log = open_log(LogConfig(max_message_bytes=500, segment_bytes=2000))
    with pytest.raises(MessageTooLargeError) as ei:
        log.append_as_leader(make_batch(3, value_size=600), leader_epoch=0)
    assert ei.value.code == ErrorCode.MESSAGE_TOO_LARGE
    small = make_batch(3, value_size=100)
    with pytest.raises(RecordListTooLargeError):
        log.append_as_leader(small * 10, leader_epoch=0)
    assert log.log_end_offset == 0 and log.size_in_bytes == 0


def test_follower_append_keeps_offsets(open_log: OpenLog) -> None:
    leader = open_log(name="l-0")
    follower = open_log(name="f-0")
    leader.append_as_leader(make_batch(3), leader_epoch=2)
    leader.append_as_leader(make_batch(4), leader_epoch=3)
    data = leader.read(0, 1 << 20).read_bytes()
    info = follower.append_as_follower(data)
    assert (info.first_offset, info.last_offset) == (0, 6)
    assert follower.read(0, 1 << 20).read_bytes() == data
    assert follower.epoch_entries() == ((2, 0), (3, 3))
    with pytest.raises(UnexpectedAppendOffsetError):
        follower.append_as_follower(data)


def test_roll_on_size_time_and_index(open_log: OpenLog, clock: Clock) -> None:
    b = make_batch(2, value_size=200)
    log = open_log(LogConfig(segment_bytes=len(b) * 3, segment_ms=1000))
    for _ in range(7):
        log.append_as_leader(b, leader_epoch=0)
    assert log.segment_base_offsets == (0, 6, 12)
    clock.advance(1001)
    log.append_as_leader(b, leader_epoch=0)
    assert log.segment_base_offsets == (0, 6, 12, 14)
    log2 = open_log(LogConfig(segment_index_bytes=16, index_interval_bytes=1), name="x-0")
    for _ in range(8):
        log2.append_as_leader(b, leader_epoch=0)
    assert len(log2.segment_base_offsets) > 1
    assert [r.offset for r in log2.read_records(0)] == list(range(16))


def test_sparse_index_and_reads_everywhere(open_log: OpenLog) -> None:
    log = open_log(LogConfig(index_interval_bytes=256, segment_bytes=10_000))
    for i in range(60):
        log.append_as_leader(make_batch(1 + i % 4, value_size=50), leader_epoch=0)
    seg0 = log.dir / "00000000000000000000.index"
    log.flush()
    assert seg0.stat().st_size > 0
    leo = log.log_end_offset
    for off in range(leo):
        b = decode_batch(log.read(off, 1).read_bytes())
        assert b.header.base_offset <= off <= b.header.last_offset


def test_offset_for_timestamp(open_log: OpenLog) -> None:
    log = open_log(LogConfig(index_interval_bytes=100, segment_bytes=3000))
    for i in range(40):
        log.append_as_leader(make_batch(3, ts=1000 + i * 10), leader_epoch=i // 10)
    # batch i has records with timestamps 1000+10i, +1, +2 at offsets 3i..3i+2
    r = log.offset_for_timestamp(1000 + 10 * 17 + 1)
    assert r is not None and (r.offset, r.timestamp) == (3 * 17 + 1, 1000 + 171)
    r = log.offset_for_timestamp(1000 + 10 * 17 + 3)
    assert r is not None and r.offset == 3 * 18 and r.leader_epoch == 1
    assert log.offset_for_timestamp(10**15) is None
    assert log.offset_for_timestamp(0) is not None and log.offset_for_timestamp(0).offset == 0  # type: ignore[union-attr]
    assert log.offset_for_timestamp(LATEST_TIMESTAMP).offset == 120  # type: ignore[union-attr]
    assert log.offset_for_timestamp(EARLIEST_TIMESTAMP).offset == 0  # type: ignore[union-attr]
    assert log.offset_for_timestamp(MAX_TIMESTAMP).timestamp == 1000 + 390 + 2  # type: ignore[union-attr]
    log.close()
    log = open_log(LogConfig(index_interval_bytes=100, segment_bytes=3000))
    r = log.offset_for_timestamp(1000 + 10 * 17 + 1)
    assert r is not None and r.offset == 3 * 17 + 1


def test_truncate_to_and_fully(open_log: OpenLog) -> None:
    log = open_log(LogConfig(segment_bytes=1000))
    for e in range(10):
        log.append_as_leader(make_batch(5, value_size=50), leader_epoch=e)
    assert len(log.segment_base_offsets) > 2
    log.truncate_to(23)  # inside batch [20, 24]: that whole batch goes, the end becomes 23
    assert log.log_end_offset == 23
    assert [r.offset for r in log.read_records(0)] == list(range(20))
    assert log.epoch_entries()[-1] == (4, 20)
    log.truncate_to(20)
    assert log.log_end_offset == 20 and log.epoch_entries()[-1] == (3, 15)
    assert log.end_offset_for_epoch(3).end_offset == 20
    log.append_as_leader(make_batch(2), leader_epoch=11)
    assert log.log_end_offset == 22 and log.end_offset_for_epoch(3).end_offset == 20
    log.truncate_fully_and_start_at(100)
    assert (log.log_start_offset, log.log_end_offset, log.segment_base_offsets) == (100, 100, (100,))
    assert log.epoch_entries() == ()
    log.append_as_leader(make_batch(2), leader_epoch=12)
    assert [r.offset for r in log.read_records(100)] == [100, 101]


def test_delete_records_and_retention(open_log: OpenLog, clock: Clock) -> None:
    b = make_batch(5, value_size=100)
    log = open_log(LogConfig(segment_bytes=len(b) * 2, retention_ms=10_000, retention_bytes=-1))
    for i in range(10):
        log.append_as_leader(make_batch(5, value_size=100, ts=clock.now + i), leader_epoch=0)
    assert log.segment_base_offsets == (0, 10, 20, 30, 40)
    assert log.delete_records_before(12) == 12
    assert log.segment_base_offsets == (10, 20, 30, 40)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(11, 100)
    assert log.read(12, 1).first_offset == 10  # batch containing 12
    log.close()
    log = open_log(LogConfig(segment_bytes=len(b) * 2, retention_ms=10_000, retention_bytes=len(b) * 4))
    assert log.log_start_offset == 12
    assert log.delete_old_segments() == 2  # bytes: 8 batches stored, keep at least 4
    assert log.segment_base_offsets == (30, 40)
    clock.advance(20_000)
    assert log.delete_old_segments() == 1  # time: all sealed segments expired, active stays
    assert log.segment_base_offsets == (40,) and log.log_start_offset == 40
    with pytest.raises(OffsetOutOfRangeError):
        log.delete_records_before(51)


def test_epoch_cache_semantics(open_log: OpenLog) -> None:
    log = open_log()
    log.append_as_leader(make_batch(3), leader_epoch=1)
    log.append_as_leader(make_batch(3), leader_epoch=1)
    log.append_as_leader(make_batch(3), leader_epoch=4)
    assert log.epoch_entries() == ((1, 0), (4, 6))
    assert (log.end_offset_for_epoch(4).epoch, log.end_offset_for_epoch(4).end_offset) == (4, 9)
    assert (log.end_offset_for_epoch(2).epoch, log.end_offset_for_epoch(2).end_offset) == (1, 6)
    assert (log.end_offset_for_epoch(0).epoch, log.end_offset_for_epoch(0).end_offset) == (0, 0)
    assert log.end_offset_for_epoch(5).end_offset == -1
    log.delete_records_before(7)
    assert log.epoch_entries() == ((4, 7),)
    log.close()
    log = open_log()
    assert log.epoch_entries() == ((4, 7),)


def test_region_survives_segment_deletion(open_log: OpenLog) -> None:
    b = make_batch(5, value_size=100)
    log = open_log(LogConfig(segment_bytes=len(b)))
    for _ in range(3):
        log.append_as_leader(b, leader_epoch=0)
    region = log.read(0, 1 << 20)
    expect = region.read_bytes()
    log.delete_records_before(10)
    assert not (log.dir / "00000000000000000000.log").exists()
    assert os.pread(region.fd, region.length, region.position) == expect


def test_flush_advances_recovery_point(open_log: OpenLog) -> None:
    log = open_log(LogConfig(flush_messages=10))
    log.append_as_leader(make_batch(5), leader_epoch=0)
    assert log.recovery_point == 0
    log.append_as_leader(make_batch(5), leader_epoch=0)
    assert log.recovery_point == 10
    log.append_as_leader(make_batch(3), leader_epoch=0)
    log.flush()
    assert log.recovery_point == 13


def test_clean_reopen_skips_recovery(open_log: OpenLog, tmp_path: Path) -> None:
    log = open_log(LogConfig(segment_bytes=2000))
    for _ in range(20):
        log.append_as_leader(make_batch(4, value_size=40), leader_epoch=0)
    log.close()
    assert (log.dir / ".clean_shutdown").exists()
    log2 = open_log(LogConfig(segment_bytes=2000))
    assert log2.had_clean_shutdown and log2.recovered_bytes == 0
    assert not (log2.dir / ".clean_shutdown").exists()
    assert log2.log_end_offset == 80
    assert [r.offset for r in log2.read_records(0)] == list(range(80))


def test_follower_offset_overflow_rolls(open_log: OpenLog) -> None:
    log = open_log()
    log.append_as_follower(make_batch(2, base_offset=0))
    far = 3_000_000_000
    log.append_as_follower(make_batch(2, base_offset=far))
    assert log.segment_base_offsets == (0, far)
    assert log.log_end_offset == far + 2
    assert [r.offset for r in log.read_records(0)] == [0, 1, far, far + 1]
    log.close()
    log = open_log()
    assert log.log_end_offset == far + 2 and log.segment_base_offsets == (0, far)


def test_multi_batch_leader_append_with_log_append_time(open_log: OpenLog, clock: Clock) -> None:
    log = open_log(LogConfig(message_timestamp_type="LogAppendTime"))
    info = log.append_as_leader(make_batch(2) + make_batch(3, compression=Compression.GZIP), leader_epoch=1)
    assert (info.first_offset, info.last_offset, info.log_append_time) == (0, 4, clock.now)
    batches = log.read_batches(0)
    assert [b.header.base_offset for b in batches] == [0, 2]
    assert all(b.header.timestamp_type == TimestampType.LOG_APPEND_TIME for b in batches)
    assert all(r.timestamp == clock.now for b in batches for r in b.records)


def test_region_can_be_sendfiled_to_a_socket(open_log: OpenLog) -> None:
    import socket

    log = open_log(LogConfig(segment_bytes=2000))
    for _ in range(12):
        log.append_as_leader(make_batch(4, value_size=60), leader_epoch=0)
    region = log.read(17, 1500)
    expect = region.read_bytes()
    a, b = socket.socketpair()
    with a, b:
        sent = 0
        while sent < region.length:
            sent += os.sendfile(a.fileno(), region.fd, region.position + sent, region.length - sent)
        got = bytearray()
        while len(got) < region.length:
            got += b.recv(region.length - len(got))
    assert bytes(got) == expect
    batch = decode_batch(expect)
    assert batch.header.base_offset <= 17 <= batch.header.last_offset
    assert region.next_offset > 17


def test_config_overrides_and_validation() -> None:
    cfg = LogConfig().with_overrides({"segment.bytes": "2048", "cleanup.policy": "compact,delete",
                                      "message.timestamp.type": "LogAppendTime"})
    assert cfg.segment_bytes == 2048 and cfg.compact and cfg.delete and cfg.log_append_time
    for bad in ({"segment.bytes": str(2**31)}, {"no.such": "1"}, {"cleanup.policy": "zap"},
                {"retention.ms": "soon"}):
        with pytest.raises(KafkaError) as ei:
            LogConfig().with_overrides(bad)
        assert ei.value.code == ErrorCode.INVALID_CONFIG
