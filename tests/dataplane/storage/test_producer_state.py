"""The idempotent producer's sequence rules, snapshots, and rebuilding from a log."""

from __future__ import annotations

from pathlib import Path

import pytest

from dataplane.protocol.errors import ErrorCode, KafkaError
from dataplane.protocol.records import BatchHeader, Record, build_batch
from dataplane.storage import Log, LogConfig
from dataplane.storage.producer_state import (
    SNAPSHOT_NAME,
    ProducerStateManager,
    next_sequence,
    rebuild_producer_state,
)


def batch(pid: int, epoch: int, seq: int, count: int = 3) -> bytes:
    return build_batch([Record(offset=i, timestamp=1000 + i, key=b"k", value=b"v%d" % i, headers=())
                        for i in range(count)], producer_id=pid, producer_epoch=epoch, base_sequence=seq)


def header(pid: int, epoch: int, seq: int, count: int = 3) -> BatchHeader:
    return BatchHeader.parse(batch(pid, epoch, seq, count))


def appended(state: ProducerStateManager, h: BatchHeader, first_offset: int) -> None:
    assert state.check(h) is None
    state.update(h, first_offset)


def test_in_order_batches_pass_and_retries_are_duplicates() -> None:
    state = ProducerStateManager()
    appended(state, header(7, 0, 0), 0)
    appended(state, header(7, 0, 3), 3)
    duplicate = state.check(header(7, 0, 0))
    assert duplicate is not None and (duplicate.first_offset, duplicate.last_offset) == (0, 2)
    assert state.check(header(7, 0, 3)) is not None


def test_a_gap_is_out_of_order() -> None:
    state = ProducerStateManager()
    appended(state, header(7, 0, 0), 0)
    with pytest.raises(KafkaError) as caught:
        state.check(header(7, 0, 5))
    assert caught.value.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_epochs_fence_and_restart_sequences() -> None:
    state = ProducerStateManager()
    appended(state, header(7, 1, 0), 0)
    with pytest.raises(KafkaError) as caught:
        state.check(header(7, 0, 3))
    assert caught.value.code == ErrorCode.INVALID_PRODUCER_EPOCH
    with pytest.raises(KafkaError) as caught:
        state.check(header(7, 2, 3))
    assert caught.value.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    appended(state, header(7, 2, 0), 3)
    assert state.producers[7].epoch == 2 and len(state.producers[7].batches) == 1


def test_only_the_last_five_batches_are_remembered() -> None:
    state = ProducerStateManager()
    for i in range(7):
        appended(state, header(7, 0, 3 * i), 3 * i)
    assert state.check(header(7, 0, 6)) is not None  # batch 2 of 7: still cached
    with pytest.raises(KafkaError):
        state.check(header(7, 0, 3))  # batch 1: forgotten, and not the next sequence


def test_unknown_producers_may_start_anywhere_and_sequences_wrap() -> None:
    state = ProducerStateManager()
    appended(state, header(9, 0, 2**31 - 2, count=3), 0)  # last sequence wraps to 0
    assert state.producers[9].batches[-1].last_seq == 0
    appended(state, header(9, 0, 1), 3)
    assert next_sequence(2**31 - 1) == 0


def test_snapshot_round_trip_and_rebuild_from_the_log(tmp_path: Path) -> None:
    log = Log.open(tmp_path / "t-0", LogConfig())
    state = ProducerStateManager()
    for i in range(4):
        data = batch(11, 0, 3 * i)
        info = log.append_as_leader(data, 0)
        state.update(BatchHeader.parse(data), info.first_offset)
    log.append_as_leader(build_batch([Record(offset=0, timestamp=1, key=None, value=b"x", headers=())]), 0)
    rebuilt = rebuild_producer_state(log)
    assert rebuilt.producers == state.producers
    state.write_snapshot(log.dir, log.log_end_offset)
    for i in range(4, 6):
        data = batch(11, 0, 3 * i)
        state.update(BatchHeader.parse(data), log.append_as_leader(data, 0).first_offset)
    assert rebuild_producer_state(log).producers == state.producers  # snapshot + scan of the tail
    (log.dir / SNAPSHOT_NAME).write_text("{torn")
    assert rebuild_producer_state(log).producers == state.producers  # unreadable snapshot: full scan
    log.close()
