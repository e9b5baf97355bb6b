"""Rebuilding a ``__consumer_offsets`` partition's state from its batches, sans-IO.

The latest record per key wins and a null value deletes (compaction may lag).
Transactional batches (KIP-98) are held per producer id until that producer's
end marker: a commit applies each offset unless a later record of its
partition was already applied (log order decides, as in Kafka), an abort drops
them, and a transaction still open at the end stays pending. A tombstone of a
partition or group drops its pending offsets too. The whole log is replayed,
markers included (not a read_committed view).

Used by the loader thread on a partition no request can see yet.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field

from dataplane.coordinator.markers import parse_end_txn_marker
from dataplane.coordinator.pending import Positioned
from dataplane.coordinator.records import (
    CoordinatorRecordError,
    GroupValue,
    OffsetKey,
    decode_group_value,
    decode_key,
    decode_offset_value,
)
from dataplane.protocol.records import RecordBatch

log = logging.getLogger(__name__)

GroupPartition = tuple[str, str, int]  # group, topic, partition


@dataclass(slots=True)
class OffsetsReplay:
    """Feed batches in log order with ``apply``; read ``offsets``, ``groups`` and ``pending`` after the last."""

    offsets: dict[GroupPartition, Positioned] = field(default_factory=dict)
    groups: dict[str, GroupValue] = field(default_factory=dict)
    pending: dict[int, dict[GroupPartition, Positioned]] = field(default_factory=dict)  # producer id -> offsets
    end: int = 0  # the offset after the last batch applied

    def apply(self, batch: RecordBatch) -> None:
        header = batch.header
        self.end = max(self.end, header.next_offset)
        if header.is_control:
            marker = parse_end_txn_marker(batch)
            if marker is not None:
                self._end_transaction(header.producer_id, marker.commit)
            return
        for record in batch.records:
            if record.key is None:
                continue
            try:
                key = decode_key(record.key)
                if isinstance(key, OffsetKey):
                    gp = (key.group, key.topic, key.partition)
                    if record.value is None:
                        self._forget({gp}, None)
                    elif header.is_transactional:
                        self.pending.setdefault(header.producer_id, {})[gp] = Positioned(
                            record.offset, decode_offset_value(record.value))
                    else:
                        self.offsets[gp] = Positioned(record.offset, decode_offset_value(record.value))
                elif record.value is None:
                    self.groups.pop(key.group, None)
                    self._forget(set(), key.group)
                else:
                    self.groups[key.group] = decode_group_value(record.value)
            except CoordinatorRecordError as exc:
                log.warning("skipping unreadable record at offset %d: %s", record.offset, exc)

    def apply_all(self, batches: Iterable[RecordBatch]) -> OffsetsReplay:
        for batch in batches:
            self.apply(batch)
        return self

    def _end_transaction(self, producer_id: int, commit: bool) -> None:
        found = self.pending.pop(producer_id, {})
        if commit:
            for gp, pending in found.items():
                current = self.offsets.get(gp)
                if current is None or current.position < pending.position:
                    self.offsets[gp] = pending

    def _forget(self, partitions: set[GroupPartition], group: str | None) -> None:
        """Tombstones: these partitions', or the whole group's, committed and pending offsets are gone."""
        for stale in [k for k in self.offsets if k in partitions or k[0] == group]:
            del self.offsets[stale]
        for producer_id, offsets in list(self.pending.items()):
            for stale in [k for k in offsets if k in partitions or k[0] == group]:
                del offsets[stale]
            if not offsets:
                del self.pending[producer_id]
