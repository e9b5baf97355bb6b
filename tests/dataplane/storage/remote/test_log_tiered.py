"""A tiered Log: local retention only of uploaded segments, a log start in the remote tier, upload copies, and
the follower's restart from the remote tier's state."""

from __future__ import annotations

import os
from collections.abc import Callable

import pytest

from dataplane.protocol.errors import OffsetMovedToTieredStorageError
from dataplane.protocol.records import Record, build_batch
from dataplane.storage.config import LogConfig
from dataplane.storage.log import Log
from tests.dataplane.conftest import Clock, make_batch

OpenLog = Callable[..., Log]
TIERED = LogConfig(segment_bytes=1024, remote_storage_enable="true", local_retention_bytes=2048)


def _fill(log: Log, batches: int, epoch: int = 0) -> None:
    for _ in range(batches):
        log.append_as_leader(make_batch(5, value_size=40), epoch)


def test_local_retention_deletes_only_uploaded_segments_and_keeps_the_log_start(open_log: OpenLog) -> None:
    log = open_log(TIERED)
    _fill(log, 60)
    assert len(log.segment_base_offsets) > 5
    log.delete_old_segments()
    assert log.segment_base_offsets[0] == 0  # nothing uploaded: nothing leaves local disk
    bases = log.segment_base_offsets
    log.set_highest_remote_offset(bases[3] - 1)  # the first three segments are in the remote tier
    log.delete_old_segments()
    assert log.segment_base_offsets[0] == bases[3]
    assert log.log_start_offset == 0 and log.local_log_start_offset == bases[3]
    with pytest.raises(OffsetMovedToTieredStorageError) as raised:
        log.read(0, 1 << 20)
    assert raised.value.local_log_start == bases[3]
    assert log.read(bases[3], 100).length > 0


def test_log_start_in_the_remote_tier_survives_a_restart(open_log: OpenLog, tmp_path: object) -> None:
    log = open_log(TIERED, name="r-0")
    _fill(log, 60)
    bases = log.segment_base_offsets
    log.set_highest_remote_offset(bases[4] - 1)
    log.delete_old_segments()
    log.close()
    again = open_log(TIERED, name="r-0")
    assert again.log_start_offset == 0
    assert again.local_log_start_offset == bases[4]
    assert again.highest_remote_offset == bases[4] - 1


def test_next_upload_is_the_oldest_closed_segment_below_the_bound(open_log: OpenLog) -> None:
    log = open_log(TIERED)
    _fill(log, 30)
    bases = log.segment_base_offsets
    assert log.next_upload(bases[1] - 1) is None  # its last offset is not below the bound yet
    copy = log.next_upload(log.log_end_offset)
    assert copy is not None
    try:
        assert (copy.base_offset, copy.end_offset) == (0, bases[1] - 1)
        assert os.pread(copy.log_fd, copy.size, 0) == (log.dir / f"{0:020d}.log").read_bytes()
        assert copy.producer_snapshot is not None  # taken when the segment rolled
        assert copy.epochs == ((0, 0),)
    finally:
        os.close(copy.log_fd)
    log.set_highest_remote_offset(copy.end_offset)
    following = log.next_upload(log.log_end_offset)
    assert following is not None and following.base_offset == bases[1]
    os.close(following.log_fd)


def test_restore_from_remote_restarts_the_log_with_the_remote_state(open_log: OpenLog, clock: Clock) -> None:
    leader = open_log(TIERED, name="leader-0")
    producer_batch = build_batch([Record(0, clock.now, b"k", b"v")], producer_id=7, producer_epoch=0,
                                 base_sequence=0)
    leader.append_as_leader(producer_batch, 2)
    _fill(leader, 30, epoch=3)
    copy = leader.next_upload(leader.log_end_offset)
    assert copy is not None
    os.close(copy.log_fd)

    follower = open_log(TIERED, name="follower-0")
    follower.restore_from_remote(copy.end_offset + 1, 0, ((2, 0), (3, 1)), copy.producer_snapshot, copy.end_offset)
    assert follower.log_end_offset == copy.end_offset + 1
    assert follower.log_start_offset == 0 and follower.local_log_start_offset == copy.end_offset + 1
    assert follower.epoch_entries() == ((2, 0), (3, 1))
    batch = follower.producer_batch(7)
    assert batch is not None and batch.last_seq == 0
    follower.close()
    again = open_log(TIERED, name="follower-0")
    assert (again.log_start_offset, again.log_end_offset, again.highest_remote_offset) == (
        0, copy.end_offset + 1, copy.end_offset)
