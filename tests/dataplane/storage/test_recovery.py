"""Unclean shutdowns by hand: torn tails, flipped bits, broken indexes, leftover renames."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from dataplane.protocol.records import BatchHeader, decode_batch
from dataplane.storage.config import LogConfig
from dataplane.storage.log import Log
from tests.dataplane.conftest import Clock, make_batch

CFG = LogConfig(segment_bytes=2000, index_interval_bytes=300)
SEG0 = "00000000000000000000"


def build(path: Path, clock: Clock, batches: int = 40, *, close: bool = True) -> Log:
    log = Log.open(path, CFG, time_ms=clock)
    for i in range(batches):
        log.append_as_leader(make_batch(1 + i % 3, value_size=60, ts=clock.now + i), leader_epoch=i // 10)
    if close:
        log.close()
    return log


def index_files(path: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(path.iterdir()) if p.suffix in (".index", ".timeindex")}


def log_files(path: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(path.iterdir()) if p.suffix == ".log"}


def crash(path: Path) -> None:
    """What an unclean shutdown leaves: no marker, recovery point from an old checkpoint."""
    (path / ".clean_shutdown").unlink(missing_ok=True)
    (path / "recovery-point-offset-checkpoint").unlink(missing_ok=True)


def assert_dense(log: Log) -> list[int]:
    offsets = [r.offset for r in log.read_records(log.log_start_offset)]
    assert offsets == list(range(log.log_start_offset, log.log_end_offset))
    return offsets


def test_rebuilt_indexes_equal_fresh_ones(tmp_path: Path, clock: Clock) -> None:
    d = tmp_path / "t-0"
    build(d, clock)
    fresh = index_files(d)
    assert len(fresh) >= 4 and any(fresh.values())
    crash(d)
    for p in d.glob("*.index"):
        p.unlink()
    for p in d.glob("*.timeindex"):
        p.write_bytes(p.read_bytes()[:-5])
    log = Log.open(d, CFG, time_ms=clock)
    assert not log.had_clean_shutdown and log.recovered_bytes > 0
    log.close()
    assert index_files(d) == fresh


@pytest.mark.parametrize("damage", ["missing", "truncated", "garbage"])
def test_broken_index_is_rebuilt_even_after_clean_shutdown(tmp_path: Path, clock: Clock, damage: str) -> None:
    d = tmp_path / "t-0"
    build(d, clock)
    fresh = index_files(d)
    p = d / f"{SEG0}.index"
    if damage == "missing":
        p.unlink()
    elif damage == "truncated":
        p.write_bytes(p.read_bytes()[:-3])
    else:
        p.write_bytes(b"\xff" * 16)
    log = Log.open(d, CFG, time_ms=clock)
    assert log.had_clean_shutdown
    assert_dense(log)
    log.close()
    assert index_files(d) == fresh


@pytest.mark.parametrize("cut", [1, 30, 61, 70])
def test_torn_tail_is_truncated(tmp_path: Path, clock: Clock, cut: int) -> None:
    d = tmp_path / "t-0"
    build(d, clock)
    last = sorted(d.glob("*.log"))[-1]
    data = last.read_bytes()
    last.write_bytes(data[:-cut])
    crash(d)
    log = Log.open(d, CFG, time_ms=clock)
    offsets = assert_dense(log)
    assert len(offsets) < 80
    # appends continue densely after recovery
    log.append_as_leader(make_batch(2), leader_epoch=9)
    assert_dense(log)


def test_flipped_bit_in_last_batch(tmp_path: Path, clock: Clock) -> None:
    d = tmp_path / "t-0"
    build(d, clock)
    last = sorted(d.glob("*.log"))[-1]
    data = bytearray(last.read_bytes())
    positions = []
    pos = 0
    while pos < len(data):
        positions.append(pos)
        pos += BatchHeader.parse(data, pos).size
    data[positions[-1] + 70] ^= 0x10
    last.write_bytes(bytes(data))
    crash(d)
    log = Log.open(d, CFG, time_ms=clock)
    assert_dense(log)
    region = log.read(log.log_start_offset, 1 << 30)
    assert region.length > 0
    for b in log.read_batches(0):
        decode_batch(b.header and log.read(b.header.base_offset, 1).read_bytes())  # CRC verified
    assert log.size_in_bytes == sum(p.stat().st_size for p in d.glob("*.log"))


def test_corruption_in_middle_segment_drops_later_segments(tmp_path: Path, clock: Clock) -> None:
    d = tmp_path / "t-0"
    build(d, clock)
    logs = sorted(d.glob("*.log"))
    assert len(logs) >= 3
    data = bytearray(logs[1].read_bytes())
    data[100] ^= 0xFF
    logs[1].write_bytes(bytes(data))
    crash(d)
    log = Log.open(d, CFG, time_ms=clock)
    assert_dense(log)
    assert len(log.segment_base_offsets) == 2
    assert log.epoch_entries()[-1][1] < log.log_end_offset


def test_recovery_point_limits_the_scan(tmp_path: Path, clock: Clock) -> None:
    d = tmp_path / "t-0"
    log = build(d, clock, close=False)
    log.flush()
    log.checkpoint()
    log.append_as_leader(make_batch(3), leader_epoch=9)
    total = sum(p.stat().st_size for p in d.glob("*.log"))
    log.close_unclean()
    log = Log.open(d, CFG, time_ms=clock)
    assert 0 < log.recovered_bytes < total
    assert_dense(log)


def test_leftover_cleaned_and_deleted_files_are_removed(tmp_path: Path, clock: Clock) -> None:
    d = tmp_path / "t-0"
    build(d, clock)
    before = log_files(d)
    (d / f"{SEG0}.log.cleaned").write_bytes(b"partial")
    (d / f"{SEG0}.index.cleaned").write_bytes(b"")
    (d / "00000000000000000099.log.deleted").write_bytes(b"old")
    (d / "00000000000000000099.index.deleted").write_bytes(b"")
    log = Log.open(d, CFG, time_ms=clock)
    assert_dense(log)
    log.close()
    assert log_files(d) == before
    assert not list(d.glob("*.cleaned")) and not list(d.glob("*.deleted"))


def test_leftover_swap_is_completed(tmp_path: Path, clock: Clock) -> None:
    """A crash between renaming .cleaned→.swap and the swap: the .swap replaces the segment."""
    d = tmp_path / "t-0"
    build(d, clock)
    # Simulate a compaction that dropped the first batch of segment 0 (offsets preserved).
    seg = (d / f"{SEG0}.log").read_bytes()
    first = BatchHeader.parse(seg)
    (d / f"{SEG0}.log.swap").write_bytes(seg[first.size :])
    (d / f"{SEG0}.index.swap").write_bytes(b"junk")
    shutil.copy(d / f"{SEG0}.log", d / f"{SEG0}.log.deleted")
    log = Log.open(d, CFG, time_ms=clock)
    offsets = [r.offset for r in log.read_records(0)]
    assert offsets[0] == first.next_offset
    assert offsets == list(range(first.next_offset, log.log_end_offset))
    assert not list(d.glob("*.swap")) and not list(d.glob("*.deleted"))
    log.close()
    fresh_dir = tmp_path / "fresh"
    fresh_dir.mkdir()
    for p in d.glob("*.log"):
        shutil.copy(p, fresh_dir / p.name)
    Log.open(fresh_dir, CFG, time_ms=clock).close()
    assert index_files(fresh_dir) == index_files(d)
