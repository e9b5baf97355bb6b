"""Lock design: fsync runs outside the log lock; readers and the cleaner do not block appends."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from dataplane.protocol.records import BatchHeader, iter_batch_headers
from dataplane.storage import segment as segment_mod
from dataplane.storage.config import LogConfig
from dataplane.storage.log import Log
from tests.dataplane.conftest import make_batch

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
    import dataplane.storage.log as log_mod

    real = log_mod._segment_batches
    calls = {"n": 0}

    def truncating(seg, size):  # type: ignore[no-untyped-def]
        if calls["n"] == 0:
            calls["n"] += 1
            log.truncate_to(log.log_end_offset - 3)  # a replica truncation races the cleaner
        return real(seg, size)

    monkeypatch.setattr(log_mod, "_segment_batches", truncating)
    assert log.compact() is None  # aborted, nothing swapped
    assert not list(log.dir.glob("*.cleaned")) and not list(log.dir.glob("*.swap"))
    monkeypatch.setattr(log_mod, "_segment_batches", real)
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
