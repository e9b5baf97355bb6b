"""Idempotent-producer state of one partition log: the last batches of every producer id.

Kafka's rules (``ProducerStateManager``): per producer id the broker keeps the
current epoch and the metadata of its last five batches. A batch that repeats
one of them is a duplicate (answered with the original offsets, nothing
written); a batch whose first sequence does not follow the last one is
OUT_OF_ORDER_SEQUENCE_NUMBER; an older epoch is INVALID_PRODUCER_EPOCH; a new
epoch must start at sequence 0. A producer the partition has never seen (or
whose batches were all truncated away) may start at any sequence, as in Kafka
since KIP-360.

The state is part of the log's state, like its offsets: every replica keeps it
up to date on every append (leader or follower), so whichever replica becomes
leader already knows what it holds; it is truncated with the log and rebuilt
after a crash. It is a pure function of the batch headers in the log, so it
can always be rebuilt by scanning them; snapshots make that scan short. A
snapshot ``<offset:020d>.snapshot`` in the partition directory is the state
of the log up to (not including) ``offset``; one is taken at every segment
roll and at clean close. On load and on every truncation, snapshots above the
log end are deleted and the state is reloaded from the newest remaining one
plus the batches after it (``UnifiedLog.truncateTo`` / ``loadProducerState``),
so a snapshot can never describe batches a truncation removed. Snapshots
below the first segment are pruned with the segments.

Owned by one :class:`~dataplane.storage.log.Log` and called only under its
lock, from whichever thread holds it; it fsyncs nothing itself while called
that way (``sync_snapshots`` is for the log's flush, outside the lock).
"""

from __future__ import annotations

import contextlib
import json
import os
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from dataplane.protocol.errors import ErrorCode, KafkaError
from dataplane.protocol.records import NO_PRODUCER_ID, NO_SEQUENCE, BatchHeader
from dataplane.storage.checkpoints import fsync_dir

MAX_CACHED_BATCHES = 5  # Kafka's NUM_BATCHES_TO_RETAIN, and max.in.flight for idempotent producers
SNAPSHOT_SUFFIX = ".snapshot"
LEGACY_SNAPSHOT_NAME = "producer-state.json"  # one whole-log snapshot, written by earlier versions
_INT32_MAX = 2**31 - 1

# (start, end) -> headers of the log's batches with last offset >= start and base offset < end
HeaderSource = Callable[[int, int], Iterable[BatchHeader]]


class BatchMetadata(NamedTuple):
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int


@dataclass(slots=True)
class ProducerEntry:
    epoch: int
    batches: deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=MAX_CACHED_BATCHES))


def next_sequence(sequence: int, increment: int = 1) -> int:
    """Sequences wrap from 2**31-1 to 0, as in Kafka."""
    if sequence > _INT32_MAX - increment:
        return increment - (_INT32_MAX - sequence) - 1
    return sequence + increment


def last_sequence(header: BatchHeader) -> int:
    return next_sequence(header.base_sequence, header.last_offset_delta)


def snapshot_name(offset: int) -> str:
    return f"{offset:020d}{SNAPSHOT_SUFFIX}"


class ProducerStateManager:
    """The producer state of one log directory (see the module docstring for ownership)."""

    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self.producers: dict[int, ProducerEntry] = {}
        self._unsynced: set[Path] = set()

    # ------------------------------------------------------------------ the rules

    def check(self, header: BatchHeader) -> BatchMetadata | None:
        """Validate a batch about to be appended; the duplicate's metadata if it was appended before.

        Raises KafkaError with INVALID_PRODUCER_EPOCH or OUT_OF_ORDER_SEQUENCE_NUMBER.
        """
        if header.producer_id == NO_PRODUCER_ID:
            return None
        entry = self.producers.get(header.producer_id)
        if entry is None:
            return None
        if header.producer_epoch < entry.epoch:
            raise KafkaError(f"producer {header.producer_id} epoch {header.producer_epoch} is older than the "
                             f"current epoch {entry.epoch}", code=ErrorCode.INVALID_PRODUCER_EPOCH)
        if header.base_sequence == NO_SEQUENCE:
            return None  # a coordinator's write or a marker (Kafka checks sequences of client batches only)
        if header.producer_epoch > entry.epoch:
            if header.base_sequence != 0:
                raise KafkaError(f"producer {header.producer_id} started epoch {header.producer_epoch} at "
                                 f"sequence {header.base_sequence}, not 0",
                                 code=ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER)
            return None
        last = last_sequence(header)
        for cached in entry.batches:
            if cached.first_seq == header.base_sequence and cached.last_seq == last:
                return cached
        if entry.batches and header.base_sequence != next_sequence(entry.batches[-1].last_seq):
            raise KafkaError(f"producer {header.producer_id} sent sequence {header.base_sequence}, expected "
                             f"{next_sequence(entry.batches[-1].last_seq)}",
                             code=ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER)
        return None

    def update(self, header: BatchHeader, first_offset: int) -> None:
        """Record an appended batch (``first_offset`` is the offset the log gave it)."""
        if header.producer_id == NO_PRODUCER_ID:
            return
        entry = self.producers.get(header.producer_id)
        if entry is None or entry.epoch != header.producer_epoch:
            entry = self.producers[header.producer_id] = ProducerEntry(header.producer_epoch)
        if header.base_sequence == NO_SEQUENCE:
            return  # no sequence to dedupe later batches against
        entry.batches.append(BatchMetadata(header.base_sequence, last_sequence(header), first_offset,
                                           first_offset + header.last_offset_delta))

    def replay(self, headers: Iterable[BatchHeader]) -> None:
        """Apply batches already in the log (their base offsets are final)."""
        for header in headers:
            if header.producer_id != NO_PRODUCER_ID:
                self.update(header, header.base_offset)

    # ------------------------------------------------------------------ loading and truncation

    def load(self, log_start: int, log_end: int, headers: HeaderSource) -> None:
        """Rebuild the state of the log ``[log_start, log_end)``: at open, and after every truncation.

        Snapshots above ``log_end`` describe batches the log no longer has (a
        truncation, or a crash that lost an unflushed tail): they are deleted
        first, so the state comes from the newest snapshot the log still covers
        plus a scan of the batch headers after it.
        """
        with contextlib.suppress(FileNotFoundError):
            (self.dir / LEGACY_SNAPSHOT_NAME).unlink()
        self.producers = {}
        offsets = self.snapshot_offsets()
        for offset in offsets:
            if offset > log_end or offset < log_start:
                self._delete_snapshot(offset)
        start = log_start
        for offset in reversed([o for o in offsets if log_start <= o <= log_end]):
            loaded = self._read_snapshot(offset)
            if loaded is not None:
                self.producers, start = loaded, offset
                break
            self._delete_snapshot(offset)  # torn or unreadable: an older one, or a longer scan
        if start < log_end:
            self.replay(headers(start, log_end))

    def clear(self) -> None:
        """The log was emptied (and restarts at some offset): no state, no snapshots."""
        self.producers = {}
        for offset in self.snapshot_offsets():
            self._delete_snapshot(offset)

    def prune_below(self, offset: int) -> None:
        """Delete snapshots below ``offset`` (the first segment's base, after retention)."""
        for found in self.snapshot_offsets():
            if found < offset:
                self._delete_snapshot(found)

    # ------------------------------------------------------------------ snapshots

    def snapshot_offsets(self) -> list[int]:
        found = []
        for p in self.dir.glob("*" + SNAPSHOT_SUFFIX):
            stem = p.name[: -len(SNAPSHOT_SUFFIX)]
            if stem.isdigit():
                found.append(int(stem))
        return sorted(found)

    def take_snapshot(self, offset: int, *, sync: bool = False) -> None:
        """Write the state as of ``offset`` (the log end now); fsynced by ``sync_snapshots`` unless ``sync``."""
        body = {"offset": offset, "producers": {
            str(pid): [entry.epoch, [list(b) for b in entry.batches]] for pid, entry in self.producers.items()}}
        path = self.dir / snapshot_name(offset)
        tmp = path.with_name(path.name + ".tmp")
        with open(tmp, "w") as out:
            json.dump(body, out, separators=(",", ":"))
            if sync:
                out.flush()
                os.fsync(out.fileno())
        os.replace(tmp, path)
        if sync:
            fsync_dir(self.dir)
            self._unsynced.discard(path)
        else:
            self._unsynced.add(path)

    def take_unsynced(self) -> list[Path]:
        """Snapshot files written since the last flush (under the log's lock; fsync them outside it)."""
        found, self._unsynced = list(self._unsynced), set()
        return found

    @staticmethod
    def sync_snapshots(paths: list[Path]) -> None:
        """fsync snapshot files (the log's flush, without its lock); vanished ones were pruned meanwhile."""
        directories = set()
        for path in paths:
            try:
                fd = os.open(path, os.O_RDONLY)
            except FileNotFoundError:
                continue
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
            directories.add(path.parent)
        for directory in directories:
            fsync_dir(directory)

    def _read_snapshot(self, offset: int) -> dict[int, ProducerEntry] | None:
        try:
            body = json.loads((self.dir / snapshot_name(offset)).read_text())
            if int(body["offset"]) != offset:
                return None
            producers: dict[int, ProducerEntry] = {}
            for pid, (epoch, batches) in body["producers"].items():
                entry = producers[int(pid)] = ProducerEntry(int(epoch))
                entry.batches.extend(BatchMetadata(*map(int, b)) for b in batches)
            return producers
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def _delete_snapshot(self, offset: int) -> None:
        path = self.dir / snapshot_name(offset)
        self._unsynced.discard(path)
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
