"""Transactions in the partition log: open transactions, markers, the last stable offset, the aborted-transaction
index, restarts (clean, unclean, torn index), truncation, and compaction of aborted records. Real files."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from dataplane.protocol.control import build_marker
from dataplane.protocol.errors import ErrorCode, InvalidRecordError, KafkaError
from dataplane.protocol.records import Record, build_batch
from dataplane.storage import Log, LogConfig
from dataplane.storage.txn_index import INDEX_NAME, AbortedTxn


def data(pid: int, epoch: int, seq: int, *, key: bytes = b"k", count: int = 2, txn: bool = True) -> bytes:
    return build_batch([Record(i, 1000 + i, key, b"v%d" % i, ()) for i in range(count)], producer_id=pid,
                       producer_epoch=epoch, base_sequence=seq, is_transactional=txn)


def marker(pid: int, epoch: int, *, commit: bool, coordinator_epoch: int = 0) -> bytes:
    return build_marker(pid, epoch, commit=commit, coordinator_epoch=coordinator_epoch, timestamp=2000)


def end(log: Log, pid: int, epoch: int, *, commit: bool, coordinator_epoch: int = 0) -> int:
    return log.append_as_leader(marker(pid, epoch, commit=commit, coordinator_epoch=coordinator_epoch), 0,
                                control=True).first_offset


def every_batch(log: Log) -> list[tuple[int, bool]]:
    """(base offset, is control) of every batch in the log, segment after segment."""
    found: list[tuple[int, bool]] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        batches = log.read_batches(offset)
        if not batches:
            break
        found += [(b.header.base_offset, b.header.is_control) for b in batches]
        offset = batches[-1].header.next_offset
    return found


def test_the_lso_follows_open_transactions_and_the_high_watermark(tmp_path: Path) -> None:
    log = Log.open(tmp_path / "t-0", LogConfig())
    log.append_as_leader(data(-1, -1, -1, txn=False), 0)  # 0-1 plain
    log.append_as_leader(data(7, 0, 0), 0)  # 2-3 producer 7 opens
    log.append_as_leader(data(8, 0, 0), 0)  # 4-5 producer 8 opens
    assert log.first_unstable_offset(6) == 2
    assert log.first_unstable_offset(1) == 1  # never above the high watermark
    commit = end(log, 7, 0, commit=True)  # 6
    assert log.first_unstable_offset(commit) == 2  # the marker is not below the high watermark yet
    assert log.first_unstable_offset(commit + 1) == 4  # now 7's transaction is settled; 8's holds
    abort = end(log, 8, 0, commit=False)  # 7
    assert log.first_unstable_offset(abort + 1) == abort + 1
    assert log.collect_aborted(0, 100) == [AbortedTxn(8, 4, 7, 8)]  # the LSO once it ended
    assert log.collect_aborted(8, 100) == []
    assert log.collect_aborted(0, 4) == []  # the aborted range starts at 4
    assert log.open_transactions() == {}
    log.close()


@pytest.mark.parametrize("clean", [True, False])
def test_open_transactions_and_aborts_survive_a_restart(tmp_path: Path, clean: bool) -> None:
    directory = tmp_path / "t-0"
    log = Log.open(directory, LogConfig(segment_bytes=300))
    for i in range(6):  # several segments and snapshots
        log.append_as_leader(data(7, 0, 2 * i), 0)
        end(log, 7, 0, commit=i % 2 == 0)
    log.append_as_leader(data(9, 0, 0), 0)  # left open
    aborted = log.collect_aborted(0, 10**6)
    if clean:
        log.close()
    else:
        log.flush()
        log.close_unclean()
    log = Log.open(directory, LogConfig(segment_bytes=300))
    assert log.collect_aborted(0, 10**6) == aborted and len(aborted) == 3
    assert log.open_transactions() == {9: log.log_end_offset - 2}
    assert log.first_unstable_offset(log.log_end_offset) == log.log_end_offset - 2
    end(log, 9, 0, commit=True)
    assert log.open_transactions() == {}
    log.close()


def test_a_torn_index_is_rebuilt_from_the_log(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    log = Log.open(directory, LogConfig())
    for i in range(3):
        log.append_as_leader(data(7, 0, 2 * i), 0)
        end(log, 7, 0, commit=False)
    expected = log.collect_aborted(0, 100)
    log.flush()
    log.close_unclean()
    index = directory / INDEX_NAME
    index.write_bytes(index.read_bytes()[:-40])  # the last entry and a half gone
    for snapshot in directory.glob("*.snapshot"):
        snapshot.unlink()
    log = Log.open(directory, LogConfig())
    assert log.collect_aborted(0, 100) == expected
    log.close()


def test_truncation_reopens_a_transaction_whose_marker_it_removed(tmp_path: Path) -> None:
    log = Log.open(tmp_path / "t-0", LogConfig())
    log.append_as_leader(data(7, 0, 0), 0)  # 0-1
    abort = end(log, 7, 0, commit=False)  # 2
    assert log.collect_aborted(0, 10) != []
    log.truncate_to(abort)
    assert log.collect_aborted(0, 10) == []
    assert log.open_transactions() == {7: 0}
    log.truncate_to(0)
    assert log.open_transactions() == {}
    log.close()


def test_transaction_rules(tmp_path: Path) -> None:
    log = Log.open(tmp_path / "t-0", LogConfig())
    log.append_as_leader(data(7, 0, 0), 0)
    with pytest.raises(KafkaError) as caught:  # a non-transactional write while its transaction is open
        log.append_as_leader(data(7, 0, 2, txn=False), 0)
    assert caught.value.code == ErrorCode.INVALID_TXN_STATE
    with pytest.raises(InvalidRecordError):  # clients may not write markers
        log.append_as_leader(marker(7, 0, commit=True), 0)
    end(log, 7, 1, commit=False, coordinator_epoch=5)  # KIP-890: the marker's higher epoch becomes current
    with pytest.raises(KafkaError) as caught:
        log.append_as_leader(data(7, 0, 2), 0)  # a late write of the old epoch
    assert caught.value.code == ErrorCode.INVALID_PRODUCER_EPOCH
    log.append_as_leader(data(7, 1, 0), 0)
    with pytest.raises(KafkaError) as caught:  # an older coordinator's marker
        end(log, 7, 1, commit=True, coordinator_epoch=4)
    assert caught.value.code == ErrorCode.TRANSACTION_COORDINATOR_FENCED
    end(log, 7, 1, commit=True, coordinator_epoch=-1)  # an administrator's abort is not epoch-checked
    assert log.open_transactions() == {}
    log.close()


def test_compaction_drops_aborted_records_and_never_lets_them_shadow_committed_ones(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=200, cleanup_policy="compact")
    log = Log.open(tmp_path / "t-0", config)
    log.append_as_leader(data(7, 0, 0, key=b"a", count=1), 0)  # committed a=v0
    end(log, 7, 0, commit=True)
    log.append_as_leader(data(7, 0, 1, key=b"a", count=1), 0)  # aborted a=v0 (newer, must not win)
    end(log, 7, 0, commit=False)
    log.append_as_leader(data(8, 0, 0, key=b"b", count=1), 0)  # open: the cleaner stops below it
    for _ in range(4):
        log.append_as_leader(data(-1, -1, -1, key=b"z", count=1, txn=False), 0)
    log.roll()
    log.high_watermark_moved(log.log_end_offset)  # the high watermark passed the markers: they are settled
    log.compact()
    kept = [(r.offset, r.key) for r in log.read_records(0) if r.key in (b"a", b"b")]
    assert (0, b"a") in kept  # the committed record survived
    assert (2, b"a") not in kept  # the aborted one went
    assert (4, b"b") in kept  # above the open transaction nothing is cleaned
    log.close()


def test_compaction_removes_a_marker_once_no_record_of_its_transaction_is_left_and_it_is_past_the_horizon(
        tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=200, cleanup_policy="compact")
    log = Log.open(tmp_path / "t-0", config)
    log.append_as_leader(data(7, 0, 0, key=b"a", count=1), 0)  # 0: committed a, replaced below
    end(log, 7, 0, commit=True)  # 1: goes (its transaction has nothing left)
    log.append_as_leader(data(7, 0, 1, key=b"b", count=1), 0)  # 2: aborted
    end(log, 7, 0, commit=False)  # 3: goes (an abort's records always go)
    log.append_as_leader(data(8, 0, 0, key=b"c", count=1), 0)  # 4: committed c, still the newest c
    end(log, 8, 0, commit=True)  # 5: stays (its record stays)
    log.append_as_leader(data(9, 0, 0, key=b"d", count=1), 0)  # 6: aborted, but its marker is recent
    now = int(time.time() * 1000)  # 7: stays (younger than delete.retention.ms)
    recent = log.append_as_leader(build_marker(9, 0, commit=False, coordinator_epoch=0, timestamp=now), 0,
                                  control=True).first_offset
    log.append_as_leader(data(-1, -1, -1, key=b"a", count=1, txn=False), 0)  # 8: replaces a
    for _ in range(4):
        log.append_as_leader(data(-1, -1, -1, key=b"z", count=1, txn=False), 0)
    log.roll()
    log.high_watermark_moved(log.log_end_offset)  # the high watermark passed the markers: they are settled
    log.compact()
    batches = every_batch(log)
    assert [offset for offset, control in batches if control] == [5, recent]
    assert [offset for offset, _ in batches][:3] == [4, 5, recent]
    log.close()
    log = Log.open(tmp_path / "t-0", config)  # the producer state rebuilt from what is left: nothing open
    assert log.open_transactions() == {}
    assert log.first_unstable_offset(log.log_end_offset) == log.log_end_offset
    log.close()
