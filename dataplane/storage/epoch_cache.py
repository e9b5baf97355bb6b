"""Leader epoch → start offset cache (Kafka's ``LeaderEpochFileCache``).

On-disk format: checkpoint file ``leader-epoch-checkpoint`` with ``<epoch> <startOffset>``
lines (Kafka's layout). Thread-safety: none; the owning Log calls it under its lock.
Mutators change memory only and mark the cache dirty: writing the file fsyncs, so the Log
takes the entries with :meth:`take_dirty` under its lock and writes them with
:meth:`write` after releasing it.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from pathlib import Path

from dataplane.storage.checkpoints import read_checkpoint, write_checkpoint

UNDEFINED_EPOCH = -1
UNDEFINED_OFFSET = -1


@dataclass(frozen=True, slots=True)
class EpochEntry:
    epoch: int
    start_offset: int


@dataclass(frozen=True, slots=True)
class EpochEndOffset:
    epoch: int
    end_offset: int


class LeaderEpochCache:
    """Epochs with strictly increasing epoch and start offset; the owner persists every change.

    On disk: ``leader-epoch-checkpoint`` (``0``, count, ``<epoch> <startOffset>`` lines),
    rewritten atomically. Thread-safety: none; the owning Log calls it under its lock, and
    :meth:`write` without it.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._entries: list[EpochEntry] = []
        self._dirty = False
        for fields in read_checkpoint(path) or []:
            if len(fields) == 2:
                self._entries.append(EpochEntry(int(fields[0]), int(fields[1])))

    @property
    def entries(self) -> tuple[EpochEntry, ...]:
        return tuple(self._entries)

    @property
    def latest_epoch(self) -> int:
        return self._entries[-1].epoch if self._entries else UNDEFINED_EPOCH

    def assign(self, epoch: int, start_offset: int) -> None:
        """Record that ``epoch`` starts at ``start_offset`` if it is newer than the latest."""
        if epoch < 0 or (self._entries and epoch <= self._entries[-1].epoch):
            return
        # A new epoch supersedes any entry that claims offsets at or after its start.
        while self._entries and self._entries[-1].start_offset >= start_offset:
            self._entries.pop()
        self._entries.append(EpochEntry(epoch, start_offset))
        self._dirty = True

    def end_offset_for(self, epoch: int, log_end_offset: int) -> EpochEndOffset:
        """Kafka's OffsetForLeaderEpoch answer: (largest epoch ≤ requested, its end offset)."""
        if epoch == UNDEFINED_EPOCH or not self._entries:
            return EpochEndOffset(UNDEFINED_EPOCH, UNDEFINED_OFFSET)
        if epoch == self._entries[-1].epoch:
            return EpochEndOffset(epoch, log_end_offset)
        epochs = [e.epoch for e in self._entries]
        hi = bisect.bisect_right(epochs, epoch)  # first entry with epoch > requested
        if hi == len(self._entries):
            return EpochEndOffset(UNDEFINED_EPOCH, UNDEFINED_OFFSET)
        higher = self._entries[hi]
        if hi == 0:
            return EpochEndOffset(epoch, higher.start_offset)
        return EpochEndOffset(self._entries[hi - 1].epoch, higher.start_offset)

    def truncate_from_end(self, end_offset: int) -> None:
        """Drop entries starting at or after ``end_offset`` (log truncated to it)."""
        n = len(self._entries)
        while self._entries and self._entries[-1].start_offset >= end_offset:
            self._entries.pop()
        if len(self._entries) != n:
            self._dirty = True

    def truncate_from_start(self, start_offset: int) -> None:
        """Log start moved to ``start_offset``: drop older epochs, keep the one covering it."""
        keep: list[EpochEntry] = []
        for i, e in enumerate(self._entries):
            nxt = self._entries[i + 1].start_offset if i + 1 < len(self._entries) else None
            if nxt is not None and nxt <= start_offset:
                continue
            keep.append(EpochEntry(e.epoch, max(e.start_offset, start_offset)) if not keep else e)
        if keep != self._entries:
            self._entries = keep
            self._dirty = True

    def clear(self) -> None:
        self._entries = []
        self._dirty = True

    def take_dirty(self) -> tuple[EpochEntry, ...] | None:
        """The entries to write if they changed since the last call (which the caller then must write)."""
        if not self._dirty:
            return None
        self._dirty = False
        return tuple(self._entries)

    def mark_dirty(self) -> None:
        """A write of what :meth:`take_dirty` returned failed: the next one must write again."""
        self._dirty = True

    def write(self, entries: tuple[EpochEntry, ...]) -> None:
        """Write the checkpoint file (it fsyncs: never under the owning Log's lock)."""
        write_checkpoint(self.path, [[e.epoch, e.start_offset] for e in entries])
