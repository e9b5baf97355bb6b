"""Transactional offsets of one group (KIP-98) waiting for their transaction's end marker, sans-IO.

A TxnOffsetCommit is written to ``__consumer_offsets`` inside the producer's
transaction and stays *pending* (invisible to OffsetFetch) until the
transaction's marker lands: a commit marker makes each pending offset the
committed one unless a later record of the same partition already is (Kafka
compares the records' positions in the log, so a plain OffsetCommit written
after the transactional one wins whatever order the markers come in); an abort
drops them. A tombstone of a partition (OffsetDelete, expiry, group deletion)
drops its pending offsets too, as Kafka's replay does.

Positions are log offsets when replaying and, live, a per-partition counter
in append order (the coordinator's appends are serialised): only their order
matters.

Owned by its ``Group``; used on the coordinator's event loop, or by the loader before the group is published.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from dataplane.coordinator.records import OffsetValue

TopicPartition = tuple[str, int]


@dataclass(frozen=True, slots=True)
class Positioned:
    position: int  # of the record in the offsets partition
    value: OffsetValue


@dataclass(slots=True)
class PendingOffsets:
    """One group's open transactions' offsets, and the position of each committed offset's record."""

    by_producer: dict[int, dict[TopicPartition, Positioned]] = field(default_factory=dict)
    positions: dict[TopicPartition, int] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.by_producer)

    def has(self, tp: TopicPartition) -> bool:
        return any(tp in offsets for offsets in self.by_producer.values())

    def partitions(self) -> set[TopicPartition]:
        return {tp for offsets in self.by_producer.values() for tp in offsets}

    def add(self, producer_id: int, position: int, offsets: Mapping[TopicPartition, OffsetValue]) -> None:
        pending = self.by_producer.setdefault(producer_id, {})
        for tp, value in offsets.items():
            pending[tp] = Positioned(position, value)

    def committed(self, position: int, partitions: Iterable[TopicPartition]) -> None:
        """A plain OffsetCommit of these partitions was written at ``position``."""
        for tp in partitions:
            self.positions[tp] = position

    def complete(self, producer_id: int, commit: bool, offsets: dict[TopicPartition, OffsetValue]) -> None:
        """The producer's marker: on commit, move its offsets into ``offsets`` where newer than what is there."""
        pending = self.by_producer.pop(producer_id, {})
        if not commit:
            return
        for tp, found in pending.items():
            if tp not in offsets or self.positions.get(tp, -1) < found.position:
                offsets[tp] = found.value
                self.positions[tp] = found.position

    def forget(self, partitions: Iterable[TopicPartition]) -> None:
        """Tombstones: the partitions' committed and pending offsets are gone."""
        for tp in partitions:
            self.positions.pop(tp, None)
            for pending in self.by_producer.values():
                pending.pop(tp, None)
        for producer_id in [p for p, pending in self.by_producer.items() if not pending]:
            del self.by_producer[producer_id]

    def clear(self) -> None:
        self.by_producer.clear()
        self.positions.clear()
