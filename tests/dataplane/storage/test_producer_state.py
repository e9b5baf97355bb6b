"""The idempotent producer's sequence rules, snapshots, and rebuilding from a log."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from dataplane.protocol.errors import ErrorCode, KafkaError
from dataplane.protocol.records import BatchHeader, Record, build_batch
from dataplane.storage import Log, LogConfig
from dataplane.storage.producer_state import (
    SNAPSHOT_SUFFIX,
    ProducerStateManager,
    next_sequence,
    snapshot_name,
)


def batch(pid: int, epoch: int, seq: int, count: int = 3) -> bytes:
    return build_batch([Record(offset=i, timestamp=1000 + i, key=b"k", value=b"v%d" % i, headers=())
                        for i in range(count)], producer_id=pid, producer_epoch=epoch, base_sequence=seq)


def header(pid: int, epoch: int, seq: int, count: int = 3) -> BatchHeader:
    return BatchHeader.parse(batch(pid, epoch, seq, count))


def appended(state: ProducerStateManager, h: BatchHeader, first_offset: int) -> None:
    assert state.check(h) is None
    state.update(h, first_offset)


def test_in_order_batches_pass_and_retries_are_duplicates(tmp_path: Path) -> None:
    state = ProducerStateManager(tmp_path)
    appended(state, header(7, 0, 0), 0)
    appended(state, header(7, 0, 3), 3)
    duplicate = state.check(header(7, 0, 0))
    assert duplicate is not None and (duplicate.first_offset, duplicate.last_offset) == (0, 2)
    assert state.check(header(7, 0, 3)) is not None


def test_a_gap_is_out_of_order(tmp_path: Path) -> None:
    state = ProducerStateManager(tmp_path)
    appended(state, header(7, 0, 0), 0)
    with pytest.raises(KafkaError) as caught:
        state.check(header(7, 0, 5))
    assert caught.value.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_epochs_fence_and_restart_sequences(tmp_path: Path) -> None:
    state = ProducerStateManager(tmp_path)
    appended(state, header(7, 1, 0), 0)
    with pytest.raises(KafkaError) as caught:
        state.check(header(7, 0, 3))
    assert caught.value.code == ErrorCode.INVALID_PRODUCER_EPOCH
    with pytest.raises(KafkaError) as caught:
        state.check(header(7, 2, 3))
    assert caught.value.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    appended(state, header(7, 2, 0), 3)
    assert state.producers[7].epoch == 2 and len(state.producers[7].batches) == 1


def test_only_the_last_five_batches_are_remembered(tmp_path: Path) -> None:
    state = ProducerStateManager(tmp_path)
    for i in range(7):
        appended(state, header(7, 0, 3 * i), 3 * i)
    assert state.check(header(7, 0, 6)) is not None  # batch 2 of 7: still cached
    with pytest.raises(KafkaError):
        state.check(header(7, 0, 3))  # batch 1: forgotten, and not the next sequence


def test_unknown_producers_may_start_anywhere_and_sequences_wrap(tmp_path: Path) -> None:
    state = ProducerStateManager(tmp_path)
    appended(state, header(9, 0, 2**31 - 2, count=3), 0)  # last sequence wraps to 0
    assert state.producers[9].batches[-1].last_seq == 0
    appended(state, header(9, 0, 1), 3)
    assert next_sequence(2**31 - 1) == 0


def keyed(i: int) -> bytes:
    """A batch without a producer id (a plain producer's)."""
    return build_batch([Record(offset=0, timestamp=1, key=b"x", value=b"plain-%d" % i, headers=())])


def as_replicated(data: bytes, base_offset: int, leader_epoch: int = 0) -> bytes:
    """The batch as a follower receives it: offsets and leader epoch assigned by the leader."""
    h = BatchHeader.parse(data)
    records = [dataclasses.replace(r, offset=base_offset + i) for i, r in enumerate(decode(data))]
    return build_batch(records, base_offset=base_offset, producer_id=h.producer_id,
                       producer_epoch=h.producer_epoch, base_sequence=h.base_sequence,
                       partition_leader_epoch=leader_epoch)


def decode(data: bytes) -> list[Record]:
    from dataplane.protocol.records import decode_batch
    return list(decode_batch(data).records)


def test_a_retry_is_a_duplicate_on_the_log_that_holds_it(tmp_path: Path) -> None:
    log = Log.open(tmp_path / "t-0", LogConfig())
    first = log.append_as_leader(batch(11, 0, 0), 0)
    second = log.append_as_leader(batch(11, 0, 0), 0)
    assert second.duplicate and (second.first_offset, second.last_offset) == (first.first_offset, first.last_offset)
    assert log.log_end_offset == 3
    with pytest.raises(KafkaError) as caught:
        log.append_as_leader(batch(11, 0, 9), 0)
    assert caught.value.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert log.log_end_offset == 3
    log.close()


def test_a_follower_keeps_producer_state_so_a_retry_after_failover_is_a_duplicate(tmp_path: Path) -> None:
    """The new leader knows what it replicated: the producer's retry of an acked batch writes nothing."""
    follower = Log.open(tmp_path / "t-0", LogConfig())
    follower.append_as_follower(as_replicated(keyed(0), 0))
    follower.append_as_follower(as_replicated(batch(11, 0, 0), 1))
    follower.append_as_follower(as_replicated(batch(11, 0, 3), 4))
    retry = follower.append_as_leader(batch(11, 0, 3), 1)  # the ack was lost with the old leader
    assert retry.duplicate and (retry.first_offset, retry.last_offset) == (4, 6)
    assert follower.log_end_offset == 7
    follower.close()


def test_truncation_below_a_snapshot_does_not_resurrect_its_state(tmp_path: Path) -> None:
    """KIP-101 failover: a snapshot taken before a truncation must not describe the re-grown log.

    The log holds batches of producer 11 up to offset 9 and is closed (snapshot at 9);
    it restarts as a follower, is truncated to 3 (the new leader never had the rest),
    and replicates the new leader's different history past 9. A snapshot kept across
    the truncation would say producer 11's last batch is the truncated one, and the
    retry of the batch now at offset 3 would be appended a second time.
    """
    directory = tmp_path / "t-0"
    log = Log.open(directory, LogConfig())
    for i in range(3):
        log.append_as_leader(batch(11, 0, 3 * i), 0)  # offsets 0-8, sequences 0-8
    log.append_as_leader(keyed(0), 0)  # offset 9
    log.close()
    assert (directory / snapshot_name(10)).exists()
    log = Log.open(directory, LogConfig())
    log.truncate_to(3)  # keeps producer 11's sequences 0-2
    assert not (directory / snapshot_name(10)).exists()
    new_history = [keyed(1), batch(11, 0, 3), *[keyed(i) for i in range(2, 12)]]
    for data in new_history:
        log.append_as_follower(as_replicated(data, log.log_end_offset, leader_epoch=1))
    assert log.log_end_offset > 10
    retry = log.append_as_leader(batch(11, 0, 3), 2)
    assert retry.duplicate and (retry.first_offset, retry.last_offset) == (4, 6)
    log.close()


def test_state_survives_a_crash_from_the_last_snapshot_and_the_log_tail(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    log = Log.open(directory, LogConfig(segment_bytes=400))
    for i in range(12):
        log.append_as_leader(batch(11, 0, 3 * i), 0)
    assert len(log.segment_base_offsets) > 2
    snapshots = sorted(p.name for p in directory.glob("*" + SNAPSHOT_SUFFIX))
    assert snapshots and snapshots[-1] == snapshot_name(log.segment_base_offsets[-1])
    expected = log.producer_batch(11)
    log.close_unclean()  # SIGKILL: no snapshot at the end, the tail is rescanned
    log = Log.open(directory, LogConfig(segment_bytes=400))
    assert log.producer_batch(11) == expected
    assert log.append_as_leader(batch(11, 0, 33), 0).duplicate
    log.close()


def test_a_torn_snapshot_is_ignored_and_the_log_rescanned(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    log = Log.open(directory, LogConfig())
    for i in range(3):
        log.append_as_leader(batch(11, 0, 3 * i), 0)
    expected = log.producer_batch(11)
    log.close()
    (directory / snapshot_name(9)).write_text("{torn")
    log = Log.open(directory, LogConfig())
    assert log.producer_batch(11) == expected
    assert not (directory / snapshot_name(9)).exists()
    log.close()


def test_snapshots_below_the_first_segment_are_pruned(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    log = Log.open(directory, LogConfig(segment_bytes=400))
    for i in range(12):
        log.append_as_leader(batch(11, 0, 3 * i), 0)
    bases = log.segment_base_offsets
    log.delete_records_before(bases[2])
    remaining = sorted(int(p.name.split(".")[0]) for p in directory.glob("*" + SNAPSHOT_SUFFIX))
    assert remaining and min(remaining) >= log.segment_base_offsets[0]
    assert log.append_as_leader(batch(11, 0, 33), 0).duplicate  # the newest batches are still known
    log.close()


def test_truncating_everything_forgets_every_producer(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    log = Log.open(directory, LogConfig(segment_bytes=400))
    for i in range(6):
        log.append_as_leader(batch(11, 0, 3 * i), 0)
    log.truncate_fully_and_start_at(100)
    assert log.producer_batch(11) is None
    assert not list(directory.glob("*" + SNAPSHOT_SUFFIX))
    assert not log.append_as_leader(batch(11, 0, 0), 0).duplicate
    log.close()


def test_batches_without_a_sequence_are_never_duplicates_but_still_fenced(tmp_path: Path) -> None:
    """A coordinator's transactional writes and markers carry no sequence (Kafka checks client batches only)."""
    state = ProducerStateManager(tmp_path)
    appended(state, header(7, 2, -1), 0)
    appended(state, header(7, 2, -1), 3)  # the same header again: a second write, not a retry
    appended(state, header(7, 3, -1), 6)  # a bumped epoch needs no sequence 0 here
    with pytest.raises(KafkaError) as fenced:
        state.check(header(7, 2, -1))
    assert fenced.value.code is ErrorCode.INVALID_PRODUCER_EPOCH
    appended(state, header(7, 3, 0), 9)  # client batches of the epoch still start their sequences
