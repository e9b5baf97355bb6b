"""Replaying ``__consumer_offsets`` batches (sans-IO), transactions and markers included, as tables."""

from __future__ import annotations

import pytest

from dataplane.coordinator.markers import EndTxnMarker, build_end_txn_marker, parse_end_txn_marker
from dataplane.coordinator.records import (
    GroupKey,
    GroupValue,
    OffsetKey,
    OffsetValue,
    encode_group_value,
    encode_key,
    encode_offset_value,
)
from dataplane.coordinator.replay import OffsetsReplay
from dataplane.protocol.records import Record, RecordBatch, build_batch, decode_batch

GP = ("g", "t", 0)
GP2 = ("g", "t", 1)
OTHER = ("h", "t", 0)


def _offsets(at: int, entries: dict[tuple[str, str, int], int | None], producer: int = -1) -> RecordBatch:
    records = [Record(at + i, 0, encode_key(OffsetKey(*gp)),
                      None if o is None else encode_offset_value(OffsetValue(o, -1, "", 0)))
               for i, (gp, o) in enumerate(entries.items())]
    return decode_batch(build_batch(records, producer_id=producer, producer_epoch=0 if producer >= 0 else -1,
                                    is_transactional=producer >= 0))


def _marker(at: int, producer: int, commit: bool) -> RecordBatch:
    raw = bytearray(build_end_txn_marker(producer, 0, commit=commit, coordinator_epoch=9))
    raw[:8] = at.to_bytes(8, "big")  # base offset, outside the CRC
    return decode_batch(bytes(raw))


def _group_tombstone(at: int, group: str) -> RecordBatch:
    return decode_batch(build_batch([Record(at, 0, encode_key(GroupKey(group)), None)]))


def _group(at: int, group: str) -> RecordBatch:
    value = GroupValue("consumer", 1, None, None, -1, ())
    return decode_batch(build_batch([Record(at, 0, encode_key(GroupKey(group)), encode_group_value(value))]))


# Each case: the batches (log order), then the committed offsets and the open transactions left.
CASES = {
    "plain": ([_offsets(0, {GP: 1}), _offsets(1, {GP: 2})], {GP: 2}, {}),
    "tombstone": ([_offsets(0, {GP: 1, GP2: 1}), _offsets(2, {GP: None})], {GP2: 1}, {}),
    "committed": ([_offsets(0, {GP: 5}, 7), _marker(1, 7, True)], {GP: 5}, {}),
    "aborted": ([_offsets(0, {GP: 1}), _offsets(1, {GP: 5}, 7), _marker(2, 7, False)], {GP: 1}, {}),
    "open": ([_offsets(0, {GP: 1}), _offsets(1, {GP: 5, GP2: 6}, 7)], {GP: 1}, {7: {GP: 5, GP2: 6}}),
    "plain-after-txn-wins": ([_offsets(0, {GP: 5}, 7), _offsets(1, {GP: 2}), _marker(2, 7, True)], {GP: 2}, {}),
    "txn-after-plain-wins": ([_offsets(0, {GP: 2}), _offsets(1, {GP: 5}, 7), _marker(2, 7, True)], {GP: 5}, {}),
    "interleaved": ([_offsets(0, {GP: 5}, 7), _offsets(1, {GP: 6, OTHER: 1}, 8), _marker(3, 8, True),
                     _marker(4, 7, True)], {GP: 6, OTHER: 1}, {}),
    "tombstone-drops-pending": ([_offsets(0, {GP: 5, GP2: 6}, 7), _offsets(2, {GP: None}), _marker(3, 7, True)],
                                {GP2: 6}, {}),
    "group-tombstone-drops-pending": ([_offsets(0, {GP: 5, OTHER: 6}, 7), _group_tombstone(2, "g")],
                                      {}, {7: {OTHER: 6}}),
    "marker-of-another-producer": ([_offsets(0, {GP: 5}, 7), _marker(1, 8, True)], {}, {7: {GP: 5}}),
}


@pytest.mark.parametrize("batches, committed, pending", CASES.values(), ids=CASES.keys())
def test_replay(batches: list[RecordBatch], committed: dict[tuple[str, str, int], int],
                pending: dict[int, dict[tuple[str, str, int], int]]) -> None:
    replay = OffsetsReplay().apply_all(batches)
    assert {gp: p.value.offset for gp, p in replay.offsets.items()} == committed
    assert {pid: {gp: p.value.offset for gp, p in o.items()} for pid, o in replay.pending.items()} == pending
    assert replay.end == batches[-1].header.next_offset


def test_group_records_are_kept_and_deleted() -> None:
    replay = OffsetsReplay().apply_all([_group(0, "g"), _group(1, "h"), _group_tombstone(2, "h")])
    assert set(replay.groups) == {"g"}


@pytest.mark.parametrize("commit", [True, False])
def test_marker_round_trip(commit: bool) -> None:
    batch = decode_batch(build_end_txn_marker(12, 3, commit=commit, coordinator_epoch=9, timestamp=5))
    assert batch.header.is_control and batch.header.is_transactional and batch.header.base_sequence == -1
    assert batch.records[0].key == (b"\x00\x00\x00\x01" if commit else b"\x00\x00\x00\x00")
    assert parse_end_txn_marker(batch) == EndTxnMarker(12, 3, commit, 9)


def test_a_data_batch_or_an_unknown_control_type_is_no_marker() -> None:
    assert parse_end_txn_marker(_offsets(0, {GP: 1}, 7)) is None
    unknown = decode_batch(build_batch([Record(0, 0, b"\x00\x00\x00\x05", b"")], producer_id=7, producer_epoch=0,
                                       is_transactional=True, is_control=True))
    assert parse_end_txn_marker(unknown) is None
