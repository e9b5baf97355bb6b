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

Transactions (KIP-98): a transactional batch opens the producer's transaction in this partition at its first
offset, and an end-transaction marker (a control batch, :mod:`dataplane.protocol.control`) closes it. A marker
may carry a higher epoch than the producer's (KIP-890 part 2: the coordinator bumps the epoch at every
transaction end), which then becomes the producer's epoch, so a late batch of the old epoch is refused. The
first offset of every open transaction, and of every closed one whose marker the high watermark has not yet
passed, bounds the last stable offset; aborted transactions go to the :mod:`txn_index`. A client batch with no
sequence (a coordinator's own transactional write) is neither deduplicated nor sequence-checked.

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

from dataplane.protocol.control import Marker
from dataplane.protocol.errors import ErrorCode, KafkaError
from dataplane.protocol.records import NO_PRODUCER_ID, NO_SEQUENCE, BatchHeader
from dataplane.storage.checkpoints import fsync_dir
from dataplane.storage.txn_index import AbortedTxn, AbortedTxnIndex

MAX_CACHED_BATCHES = 5  # Kafka's NUM_BATCHES_TO_RETAIN, and max.in.flight for idempotent producers
SNAPSHOT_SUFFIX = ".snapshot"
LEGACY_SNAPSHOT_NAME = "producer-state.json"  # one whole-log snapshot, written by earlier versions
_INT32_MAX = 2**31 - 1

# (start, end) -> headers of the log's batches with last offset >= start and base offset < end
HeaderSource = Callable[[int, int], Iterable[BatchHeader]]
# the marker of a control batch in the log (its header given); None for a control batch that is no marker
MarkerSource = Callable[[BatchHeader], Marker | None]


class BatchMetadata(NamedTuple):
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int


@dataclass(slots=True)
class ProducerEntry:
    epoch: int
    batches: deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=MAX_CACHED_BATCHES))
    txn_first: int = -1  # first offset of the producer's open transaction here; -1: none open
    coordinator_epoch: int = -1  # of the last marker written for it
    last_timestamp: int = -1  # the max timestamp of its last batch here (DescribeProducers)


class ActiveProducer(NamedTuple):
    """One producer's state in a partition, as DescribeProducers reports it."""

    producer_id: int
    producer_epoch: int
    last_sequence: int  # -1 when it has no sequenced batch here (a marker or a coordinator's write only)
    last_timestamp: int
    coordinator_epoch: int
    txn_start_offset: int  # -1 when no transaction of it is open here


class CompletedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int  # the marker's offset
    commit: bool


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
        self.aborted = AbortedTxnIndex(directory)
        # (first offset, marker offset) of closed transactions whose marker the high watermark has not passed
        self.unreplicated: list[tuple[int, int]] = []
        self.ongoing: dict[int, int] = {}  # producer id -> first offset of its open transaction (entries' txn_first)
        self._unsynced: set[Path] = set()

    # ------------------------------------------------------------------ the rules

    def check(self, header: BatchHeader, marker: Marker | None = None) -> BatchMetadata | None:
        """Validate a batch about to be appended; the duplicate's metadata if it was appended before.

        Raises KafkaError with INVALID_PRODUCER_EPOCH, OUT_OF_ORDER_SEQUENCE_NUMBER, INVALID_TXN_STATE (a
        non-transactional batch while the producer's transaction is open) or TRANSACTION_COORDINATOR_FENCED (a
        marker from an older coordinator than the last one; -1, an administrator's abort, is not checked).
        """
        if header.producer_id == NO_PRODUCER_ID:
            return None
        entry = self.producers.get(header.producer_id)
        if entry is None:
            return None
        if header.producer_epoch < entry.epoch:
            raise KafkaError(f"producer {header.producer_id} epoch {header.producer_epoch} is older than the "
                             f"current epoch {entry.epoch}", code=ErrorCode.INVALID_PRODUCER_EPOCH)
        if header.is_control:
            if marker is not None and 0 <= marker.coordinator_epoch < entry.coordinator_epoch:
                raise KafkaError(f"a marker from coordinator epoch {marker.coordinator_epoch}, older than "
                                 f"{entry.coordinator_epoch}", code=ErrorCode.TRANSACTION_COORDINATOR_FENCED)
            return None
        if not header.is_transactional and entry.txn_first >= 0 and header.producer_epoch == entry.epoch:
            raise KafkaError(f"producer {header.producer_id} sent a non-transactional batch while its "
                             "transaction is open", code=ErrorCode.INVALID_TXN_STATE)
        if header.base_sequence == NO_SEQUENCE:
            return None  # a coordinator's write (Kafka checks sequences of client batches only)
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

    def update(self, header: BatchHeader, first_offset: int, marker: Marker | None = None) -> CompletedTxn | None:
        """Record an appended batch (``first_offset`` is the offset the log gave it); for a marker, the
        transaction it closed (None if none was open here)."""
        if header.producer_id == NO_PRODUCER_ID:
            return None
        entry = self.producers.get(header.producer_id)
        if entry is None or entry.epoch < header.producer_epoch:
            txn_first = entry.txn_first if entry is not None else -1  # a marker's bumped epoch closes it below
            coordinator_epoch = entry.coordinator_epoch if entry is not None else -1
            entry = self.producers[header.producer_id] = ProducerEntry(header.producer_epoch, txn_first=txn_first,
                                                                       coordinator_epoch=coordinator_epoch)
        entry.last_timestamp = max(entry.last_timestamp, header.max_timestamp)
        if header.is_control:
            if marker is None:
                return None
            if marker.coordinator_epoch >= 0:
                entry.coordinator_epoch = marker.coordinator_epoch
            if entry.txn_first < 0:
                return None
            done = CompletedTxn(header.producer_id, entry.txn_first, first_offset, marker.commit)
            entry.txn_first = -1
            self.ongoing.pop(header.producer_id, None)
            self.unreplicated.append((done.first_offset, done.last_offset))
            if not done.commit:
                self.aborted.append(AbortedTxn(done.producer_id, done.first_offset, done.last_offset,
                                               self.first_unstable_offset(done.last_offset + 1)))
            return done
        if header.is_transactional and entry.txn_first < 0:
            entry.txn_first = self.ongoing[header.producer_id] = first_offset
        if header.base_sequence != NO_SEQUENCE:
            entry.batches.append(BatchMetadata(header.base_sequence, last_sequence(header), first_offset,
                                               first_offset + header.last_offset_delta))
        return None

    def first_unstable_offset(self, high_watermark: int) -> int:
        """The first offset of an open transaction, or of a closed one whose marker is not below
        ``high_watermark``; ``high_watermark`` if there is none (the last stable offset is never above it)."""
        first = min(high_watermark, *self.ongoing.values()) if self.ongoing else high_watermark
        for txn_first, marker in self.unreplicated:
            if marker >= high_watermark:
                first = min(first, txn_first)
        return first

    def first_unsettled_offset(self, log_end: int) -> int:
        """The first offset of an open transaction or of one whose marker may still be truncated away; the
        cleaner stops below it (``log_end`` if none)."""
        firsts = [*self.ongoing.values(), *(first for first, _ in self.unreplicated)]
        return min([log_end, *firsts])

    def forget_replicated(self, high_watermark: int) -> None:
        """Closed transactions whose marker is below the high watermark no longer bound the LSO."""
        if self.unreplicated and self.unreplicated[0][1] < high_watermark:
            self.unreplicated = [t for t in self.unreplicated if t[1] >= high_watermark]

    def open_transactions(self) -> dict[int, int]:
        """Producer id -> first offset of its open transaction here (tools, tests)."""
        return dict(self.ongoing)

    def active_producers(self) -> list[ActiveProducer]:
        """Every producer the partition holds state for, by producer id (DescribeProducers)."""
        return [ActiveProducer(pid, entry.epoch, entry.batches[-1].last_seq if entry.batches else -1,
                               entry.last_timestamp, entry.coordinator_epoch, entry.txn_first)
                for pid, entry in sorted(self.producers.items())]

    def replay(self, headers: Iterable[BatchHeader], markers: MarkerSource | None = None) -> None:
        """Apply batches already in the log (their base offsets are final)."""
        for header in headers:
            if header.producer_id != NO_PRODUCER_ID:
                marker = markers(header) if header.is_control and markers is not None else None
                self.update(header, header.base_offset, marker)

    # ------------------------------------------------------------------ loading and truncation

    def load(self, log_start: int, log_end: int, headers: HeaderSource, markers: MarkerSource | None = None) -> None:
        """Rebuild the state of the log ``[log_start, log_end)``: at open, and after every truncation.

        Snapshots above ``log_end`` describe batches the log no longer has (a
        truncation, or a crash that lost an unflushed tail): they are deleted
        first, so the state comes from the newest snapshot the log still covers
        plus a scan of the batch headers after it.
        """
        with contextlib.suppress(FileNotFoundError):
            (self.dir / LEGACY_SNAPSHOT_NAME).unlink()
        self.producers = {}
        self.unreplicated = []
        self.ongoing = {}
        self.aborted.load(log_start, log_end)
        offsets = self.snapshot_offsets()
        for offset in offsets:
            if offset > log_end or offset < log_start:
                self._delete_snapshot(offset)
        start = log_start
        for offset in reversed([o for o in offsets if log_start <= o <= log_end]):
            loaded = self._read_snapshot(offset)
            if loaded is not None:
                self.producers, start = loaded, offset
                self.ongoing = {pid: e.txn_first for pid, e in loaded.items() if e.txn_first >= 0}
                break
            self._delete_snapshot(offset)  # torn, unreadable, or ahead of the aborted index: older, or a longer scan
        if start < log_end:
            self.replay(headers(start, log_end), markers)

    def clear(self) -> None:
        """The log was emptied (and restarts at some offset): no state, no snapshots."""
        self.producers = {}
        self.unreplicated = []
        self.ongoing = {}
        self.aborted.clear()
        for offset in self.snapshot_offsets():
            self._delete_snapshot(offset)

    def prune_below(self, offset: int) -> None:
        """Delete snapshots below ``offset`` (the first segment's base, after retention)."""
        for found in self.snapshot_offsets():
            if found < offset:
                self._delete_snapshot(found)
        self.aborted.prune_below(offset)

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
        # "aborted": the newest abort marker indexed then; a snapshot whose aborted index lost it (a crash before
        # the index was fsynced) is not used, so the replay from an older one indexes that abort again.
        body = {"offset": offset, "aborted": self.aborted.last_marker(), "producers": {
            str(pid): [entry.epoch, [list(b) for b in entry.batches], entry.txn_first, entry.coordinator_epoch,
                       entry.last_timestamp]
            for pid, entry in self.producers.items()}}
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

    def install_snapshot(self, offset: int, data: bytes) -> None:
        """Write a snapshot taken elsewhere (the remote tier's copy of the leader's) as the state at ``offset``.

        Its aborted-index check is dropped: the aborted transactions it refers to lie below this log's start.
        Raises ValueError for bytes that are no snapshot.
        """
        try:
            body = json.loads(data)
            body["offset"] = offset
            body["aborted"] = -1
            dict(body["producers"])
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"not a producer snapshot: {exc}") from exc
        path = self.dir / snapshot_name(offset)
        tmp = path.with_name(path.name + ".tmp")
        with open(tmp, "w") as out:
            json.dump(body, out, separators=(",", ":"))
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
        fsync_dir(self.dir)

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
            aborted = int(body.get("aborted", -1))
            if aborted >= 0 and not self.aborted.holds(aborted):
                return None
            producers: dict[int, ProducerEntry] = {}
            for pid, (epoch, batches, *txn) in body["producers"].items():
                entry = producers[int(pid)] = ProducerEntry(int(epoch))
                entry.batches.extend(BatchMetadata(*map(int, b)) for b in batches)
                if txn:  # written by a version that knows transactions
                    entry.txn_first, entry.coordinator_epoch = int(txn[0]), int(txn[1])
                if len(txn) > 2:  # and the last timestamp
                    entry.last_timestamp = int(txn[2])
            return producers
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def _delete_snapshot(self, offset: int) -> None:
        path = self.dir / snapshot_name(offset)
        self._unsynced.discard(path)
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
