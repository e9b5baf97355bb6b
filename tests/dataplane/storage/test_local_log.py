"""The local log's one roll rule, and the segment list it keeps."""

from __future__ import annotations

from pathlib import Path

import pytest

from dataplane.protocol.records import BatchHeader
from dataplane.storage.config import LogConfig
from dataplane.storage.local_log import LocalLog, delete_segment_files
from dataplane.storage.segment import INT32_MAX, BatchPlacement, LogSegment
from dataplane.storage.segments import LogSegments
from tests.dataplane.conftest import make_batch

NOW = 1_700_000_000_000


def local_log(tmp_path: Path, config: LogConfig, base: int = 0) -> LocalLog:
    return LocalLog(tmp_path, config, [LogSegment(tmp_path, base, config, now_ms=NOW)], recovery_point=0)


def append(log: LocalLog, n: int = 3) -> int:
    """Append one batch of ``n`` offsets at the log end; returns its size."""
    data = make_batch(n, base_offset=log.next_offset)
    h = BatchHeader.parse(data)
    log.append(data, [BatchPlacement(0, h.size, h.last_offset, h.max_timestamp)], h.last_offset)
    return len(data)


def test_non_empty_segment_rolls_on_bytes_offsets_index_and_age(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=1000, segment_ms=60_000)
    log = local_log(tmp_path, config)
    size = append(log)
    leo = log.next_offset
    assert not log.must_roll(1000 - size, leo, leo + 2, NOW)
    assert log.must_roll(1000 - size + 1, leo, leo + 2, NOW)  # segment.bytes
    assert log.must_roll(10, leo, INT32_MAX + 1, NOW)  # an offset INT32_MAX above the base
    assert log.must_roll(10, leo, leo, NOW + 60_000)  # segment.ms
    assert not log.must_roll(10, leo, leo, NOW + 59_999)
    log.segments.active.offset_index.is_full = True
    assert log.must_roll(10, leo, leo, NOW)  # index full


def test_empty_segment_rolls_only_when_it_cannot_hold_the_batch(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=1000, segment_ms=60_000)
    log = local_log(tmp_path, config, base=100)
    assert not log.must_roll(1000, 100, 102, NOW + 10**9)  # size and age never roll an empty segment
    assert log.must_roll(10, 200, 100 + INT32_MAX + 1, NOW)  # the offset range does
    assert not log.must_roll(10, 100, 100 + INT32_MAX + 1, NOW)  # ... but not onto its own base
    log.segments.active.time_index.is_full = True
    assert log.must_roll(10, 200, 202, NOW)


def test_roll_keeps_an_empty_segment_below_the_new_base(tmp_path: Path) -> None:
    log = local_log(tmp_path, LogConfig(), base=5)
    assert log.roll(5, NOW) is None
    new = log.roll(9, NOW)
    assert new is not None and log.segments.bases == (5, 9) and log.segments.active is new


def test_truncation_renames_dropped_segments_before_their_names_are_reused(tmp_path: Path) -> None:
    log = local_log(tmp_path, LogConfig())
    for _ in range(3):
        append(log)
        log.roll(log.next_offset, NOW)
    assert log.segments.bases == (0, 3, 6, 9)
    doomed = log.truncate_to(4)
    assert [s.base_offset for s in doomed] == [6, 9] and all(s.suffix == ".deleted" for s in doomed)
    assert log.next_offset == 4 and log.segments.bases == (0, 3)
    log.roll(6, NOW)  # a name a dropped segment had
    assert log.segments.active.size == 0
    delete_segment_files(tmp_path, doomed)
    assert sorted(p.name for p in tmp_path.glob("*.log")) == [f"{b:020d}.log" for b in (0, 3, 6)]


def test_segment_list_lookups(tmp_path: Path) -> None:
    config = LogConfig()
    segs = [LogSegment(tmp_path, b, config, now_ms=NOW) for b in (0, 10, 20)]
    listed = LogSegments(segs)
    assert [listed.floor_index(o) for o in (0, 9, 10, 15, 20, 99)] == [0, 0, 1, 1, 2, 2]
    assert [s.base_offset for s in listed.from_offset(12)] == [10, 20]
    assert listed.active is segs[-1] and list(listed.sealed) == segs[:2]
    assert listed.take_prefix(1) == segs[:1] and listed.bases == (10, 20)
    assert listed.take_above(10) == segs[2:] and listed.active is segs[1]
    with pytest.raises(ValueError):
        listed.replace(segs[0], segs[0])
