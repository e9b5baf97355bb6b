"""Lock design: fsync runs outside the log lock; readers and the cleaner do not block appends;
non-blocking appends (the event loop's) never wait for the lock and never fsync."""

from __future__ import annotations

import os
import threading
import traceback
from collections.abc import Callable
from pathlib import Path

import pytest

from dataplane.protocol.records import BatchHeader, Record, build_batch, iter_batch_headers
from dataplane.storage import segment as segment_mod
from dataplane.storage.config import LogConfig
from dataplane.storage.log import AppendInfo, Log, WouldBlock
from tests.dataplane.conftest import Clock, make_batch

OpenLog = Callable[..., Log]


def test_append_proceeds_while_flush_is_in_fsync(open_log: OpenLog, monkeypatch: pytest.MonkeyPatch) -> None:
    log = open_log()
    log.append_as_leader(make_batch(3), leader_epoch=0)
    in_fsync = threading.Event()
    release = threading.Event()
    real_fsync = segment_mod.os.fsync

    def slow_fsync(fd: int) -> None:
        in_fsync.set()
        assert release.wait(30)
        real_fsync(fd)

    monkeypatch.setattr(segment_mod.os, "fsync", slow_fsync)
    flusher = threading.Thread(target=log.flush)
    flusher.start()
    assert in_fsync.wait(30)
    # The flush is parked inside fsync: appends and reads must still go through.
    info = log.append_as_leader(make_batch(2), leader_epoch=0)
    assert info.first_offset == 3
    assert log.read(0, 1 << 20).length > 0
    assert log.recovery_point == 0
    release.set()
    flusher.join(30)
    assert log.recovery_point == 3  # only what was written before the flush started
    monkeypatch.setattr(segment_mod.os, "fsync", real_fsync)
    log.flush()
    assert log.recovery_point == 5


def test_compaction_swaps_only_if_layout_unchanged(
    open_log: OpenLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = open_log(LogConfig(cleanup_policy="compact", segment_bytes=300))
    for _ in range(6):
        log.append_as_leader(make_batch(3, value_size=40), leader_epoch=0)
    import dataplane.storage.cleaner as cleaner_mod

    real = cleaner_mod._segment_batches
    calls = {"n": 0}

    def truncating(seg, size):  # type: ignore[no-untyped-def]
        if calls["n"] == 0:
            calls["n"] += 1
            log.truncate_to(log.log_end_offset - 3)  # a replica truncation races the cleaner
        return real(seg, size)

    monkeypatch.setattr(cleaner_mod, "_segment_batches", truncating)
    assert log.compact() is None  # aborted, nothing swapped
    assert not list(log.dir.glob("*.cleaned")) and not list(log.dir.glob("*.swap"))
    monkeypatch.setattr(cleaner_mod, "_segment_batches", real)
    assert log.compact() is not None


def _brute_force_region(log: Log, offset: int, max_bytes: int, upper: int) -> tuple[int, int]:
    """(length, next_offset) computed by scanning every header of the segment file."""
    region = log.read(offset, max_bytes, upper)
    data = Path(region.file.path).read_bytes()
    headers = list(iter_batch_headers(data))
    start = next(i for i, (_, h) in enumerate(headers) if h.last_offset >= offset)
    length = 0
    nxt = offset
    for i, (_, h) in enumerate(headers[start:]):
        if h.last_offset >= upper or (i > 0 and length + h.size > max_bytes):
            break
        length += h.size
        nxt = h.next_offset
    return length, nxt


def test_read_regions_match_a_full_scan(open_log: OpenLog) -> None:
    log = open_log(LogConfig(index_interval_bytes=200, segment_bytes=8000))
    for i in range(70):
        log.append_as_leader(make_batch(1 + i % 5, value_size=10 + (i * 37) % 90), leader_epoch=0)
    leo = log.log_end_offset
    for offset in range(0, leo, 3):
        for max_bytes in (1, 150, 400, 1000, 5000):
            for upper in (leo, max(offset + 1, leo - 7)):
                region = log.read(offset, max_bytes, upper)
                if region.length == 0:
                    continue
                expect = _brute_force_region(log, offset, max_bytes, upper)
                assert (region.length, region.next_offset) == expect
                h = BatchHeader.parse(region.read_bytes())
                assert h.base_offset <= offset <= h.last_offset


# ---------------------------------------------------------------- no fsync under the lock


def test_no_fsync_while_the_log_lock_is_held(
    open_log: OpenLog, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every fsync (data, indexes, checkpoints, snapshots, directories) runs with ``_lock`` released."""
    logs: list[Log] = []
    fsyncs: list[int] = []
    violations: list[str] = []
    real_fsync = os.fsync

    def checked_fsync(fd: int) -> None:
        if any(log._lock._is_owned() for log in logs):  # type: ignore[attr-defined]
            violations.append("".join(traceback.format_stack(limit=8)))
        fsyncs.append(fd)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", checked_fsync)

    def fsyncs_in(action: Callable[[], object]) -> int:
        before = len(fsyncs)
        action()
        return len(fsyncs) - before

    log = open_log(LogConfig(segment_bytes=700, flush_messages=7, retention_bytes=1500))
    logs.append(log)
    assert fsyncs_in(lambda: [log.append_as_leader(make_batch(3, value_size=40), leader_epoch=0)
                              for _ in range(12)]) > 0  # rolls, flushes, the first epoch
    assert len(log.segment_base_offsets) > 3
    assert fsyncs_in(lambda: log.begin_leader_epoch(2)) > 0
    assert fsyncs_in(lambda: log.append_as_leader(make_batch(3, value_size=40) * 2, leader_epoch=3)) > 0
    assert fsyncs_in(log.roll) == 0  # the roll writes; the next flush syncs
    assert fsyncs_in(log.flush) > 0
    assert fsyncs_in(log.delete_old_segments) > 0
    assert fsyncs_in(lambda: log.delete_records_before(log.segment_base_offsets[1] + 1)) > 0
    assert fsyncs_in(lambda: log.truncate_to(log.log_end_offset - 4)) > 0
    assert fsyncs_in(log.checkpoint) > 0
    assert fsyncs_in(lambda: log.truncate_fully_and_start_at(log.log_end_offset + 10)) > 0
    assert fsyncs_in(log.close) > 0

    follower = open_log(LogConfig(segment_bytes=700), name="t-1")
    logs.append(follower)
    assert fsyncs_in(lambda: follower.append_as_follower(make_batch(3, epoch=4))) > 0  # a new epoch
    assert fsyncs_in(lambda: follower.append_as_follower(make_batch(3, epoch=4, base_offset=3))) == 0

    compacted = open_log(LogConfig(cleanup_policy="compact", segment_bytes=300), name="t-2")
    logs.append(compacted)
    for _ in range(6):
        compacted.append_as_leader(make_batch(3, value_size=40), leader_epoch=0)
    assert fsyncs_in(lambda: compacted.compact()) > 0
    assert compacted.dirty_ratio() == 0.0

    reopened = Log.open(log.dir, log.config, time_ms=clock)
    logs.append(reopened)
    reopened.close()
    assert not violations, violations[0]


# ---------------------------------------------------------------- non-blocking appends


def _files(log: Log) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(log.dir.iterdir()) if p.is_file()}


def _append(log: Log, how: str, blocking: bool) -> AppendInfo:
    """One append of 3 offsets: leader fast path, leader multi-batch path, or follower."""
    if how == "leader":
        return log.append_as_leader(make_batch(3), leader_epoch=0, blocking=blocking)
    if how == "leader-multi":
        return log.append_as_leader(make_batch(1) + make_batch(2), leader_epoch=0, blocking=blocking)
    return log.append_as_follower(make_batch(3, epoch=0, base_offset=log.log_end_offset), blocking=blocking)


@pytest.mark.parametrize("how", ["leader", "leader-multi", "follower"])
def test_non_blocking_append_refuses_a_busy_lock_and_changes_nothing(open_log: OpenLog, how: str) -> None:
    log = open_log()
    _append(log, how, blocking=True)
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with log._lock:
            held.set()
            release.wait(30)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert held.wait(30)
        before = _files(log)
        with pytest.raises(WouldBlock) as caught:
            _append(log, how, blocking=False)
        assert caught.value.reason == "lock"
        assert _files(log) == before and log.log_end_offset == 3
    finally:
        release.set()
        holder.join(30)
    assert _append(log, how, blocking=False).first_offset == 3


@pytest.mark.parametrize("how", ["leader", "leader-multi", "follower"])
def test_non_blocking_append_refuses_a_due_flush_roll_or_epoch(
    open_log: OpenLog, clock: Clock, how: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = open_log(LogConfig(flush_messages=5, segment_ms=1000))
    _append(log, how, blocking=True)  # 3 offsets: the epoch is known, no flush yet
    before = _files(log)
    with pytest.raises(WouldBlock) as caught:
        _append(log, how, blocking=False)  # 6 offsets would reach flush.messages
    assert caught.value.reason == "flush"
    assert _files(log) == before and (log.log_end_offset, log.recovery_point) == (3, 0)
    info = _append(log, how, blocking=True)  # what the caller does next, on a worker thread
    assert info.first_offset == 3 and log.recovery_point == 6

    clock.advance(1000)  # segment.ms: the active segment is due to roll
    with pytest.raises(WouldBlock) as caught:
        _append(log, how, blocking=False)
    assert caught.value.reason == "roll"
    assert len(log.segment_base_offsets) == 1 and log.log_end_offset == 6
    log.roll()

    with pytest.raises(WouldBlock) as caught:
        if how == "follower":
            log.append_as_follower(make_batch(3, epoch=1, base_offset=6), blocking=False)
        else:
            log.append_as_leader(make_batch(3), leader_epoch=1, blocking=False)
    assert caught.value.reason == "epoch"
    assert log.log_end_offset == 6 and log.latest_epoch == 0


@pytest.mark.parametrize("how", ["leader", "leader-multi", "follower"])
def test_non_blocking_append_appends_without_fsync(
    open_log: OpenLog, how: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = open_log()
    _append(log, how, blocking=True)

    def no_fsync(fd: int) -> None:
        raise AssertionError("a non-blocking append fsynced")

    monkeypatch.setattr(os, "fsync", no_fsync)
    infos = [_append(log, how, blocking=False) for _ in range(3)]
    assert [i.first_offset for i in infos] == [3, 6, 9]
    assert [r.offset for r in log.read_records(0)] == list(range(12))


def test_non_blocking_retry_of_an_idempotent_batch_is_a_duplicate(open_log: OpenLog) -> None:
    log = open_log()
    batch = build_batch([Record(0, 1000, b"k", b"v")], producer_id=7, producer_epoch=0, base_sequence=0)
    first = log.append_as_leader(batch, leader_epoch=0)
    retry = log.append_as_leader(batch, leader_epoch=0, blocking=False)
    assert retry.duplicate and retry.first_offset == first.first_offset and log.log_end_offset == 1


def test_would_block_is_exported() -> None:
    import dataplane.storage

    assert dataplane.storage.WouldBlock is WouldBlock
