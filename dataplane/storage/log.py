"""The partition log (Kafka's ``UnifiedLog``): offsets, leader epochs and producer state over a local log.

On-disk format of a partition directory (``<topic>-<partition>/``):

* ``<base:020d>.log`` / ``.index`` / ``.timeindex`` — segments, see :mod:`segment`;
* ``recovery-point-offset-checkpoint`` — offset below which everything was fsynced;
* ``log-start-offset-checkpoint`` — first readable offset (DeleteRecords, retention);
* ``leader-epoch-checkpoint`` — epoch → start offset, see :mod:`epoch_cache`;
* ``cleaner-offset-checkpoint`` — first offset compaction has not yet cleaned;
* ``<offset:020d>.snapshot`` — producer state (idempotence, open transactions), see :mod:`producer_state`;
* ``aborted-transactions.index`` — aborted transactions for read_committed reads, see :mod:`txn_index`;
* ``remote-log-offset-checkpoint`` — tiered logs: the highest offset the remote tier holds (:mod:`remote`);
  with it the log start offset may lie below the first local segment (the *local* log start);
* ``.clean_shutdown`` — present only while the log is closed cleanly; it lets the next
  open skip the recovery scan. It is removed as soon as the log is opened.

Files named ``*.cleaned``, ``*.swap`` and ``*.deleted`` are in-flight multi-file changes;
opening the log finishes or rolls them back (:mod:`loader`).

The work is split as in Kafka: :mod:`loader` opens and recovers a directory,
:mod:`segments` is the segment list, :mod:`local_log` appends, reads, rolls and truncates
segments (and holds the one roll rule), :mod:`cleaner` compacts. This module is the facade
the broker uses; it owns the log start offset, the leader epochs, the producer state and
the locks.

Thread-safety: every public method is safe to call from any thread. Three locks, always
taken in this order:

* ``_flush_lock`` serialises flushes, checkpoints and every change to the directory that
  finishes outside ``_lock``: truncation, retention, DeleteRecords, the compaction swap
  and close. While it is held the sealed segments stay as they are (a roll, the only
  change made under ``_lock`` alone, adds a segment at the end).
* ``_checkpoint_lock`` serialises writers of the checkpoint files (:meth:`Log._write_checkpoints`).
* ``_lock`` guards the in-memory state and every append. It is held for bookkeeping and
  writes only (``pwrite``, ``ftruncate``, file creation, and the renames a truncation must
  make before the names are reused), never across an fsync: appends go on while a flush,
  a retention pass or a compaction swap fsyncs, and a non-blocking append on the event
  loop waits for nothing (see :class:`WouldBlock`).
"""

from __future__ import annotations

import itertools
import os
import struct
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import crc32c as crc32c_module

from dataplane.protocol.control import Marker, marker_at
from dataplane.protocol.errors import (
    CorruptRecordError,
    InvalidRecordError,
    KafkaStorageError,
    MessageTooLargeError,
    OffsetMovedToTieredStorageError,
    OffsetOutOfRangeError,
    RecordListTooLargeError,
    UnexpectedAppendOffsetError,
)
from dataplane.protocol.records import (
    ATTRIBUTES_OFFSET,
    BATCH_HEADER,
    CODEC_MASK,
    CONTROL_MASK,
    CRC_START,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MIN_RECORD_SIZE,
    NO_PRODUCER_ID,
    BatchesSummary,
    BatchHeader,
    Record,
    RecordBatch,
    batch_length_at,
    decode_batch,
    iter_batch_headers,
    set_log_append_time,
    set_max_timestamp,
    stamp_batch,
    validate_batches,
    validate_single_batch,
)
from dataplane.storage import cleaner
from dataplane.storage.checkpoints import fsync_dir, write_offset
from dataplane.storage.cleaner import CleaningPlan, CleanResult
from dataplane.storage.config import LogConfig
from dataplane.storage.epoch_cache import EpochEndOffset, LeaderEpochCache
from dataplane.storage.loader import (
    CLEAN_SHUTDOWN_FILE,
    CLEANER_FILE,
    EPOCH_FILE,
    LOG_START_FILE,
    RECOVERY_POINT_FILE,
    REMOTE_OFFSET_FILE,
    load_log,
    remove_clean_shutdown_marker,
)
from dataplane.storage.local_log import FileRegion, LocalLog, delete_segment_files
from dataplane.storage.producer_state import ActiveProducer, BatchMetadata, ProducerStateManager, snapshot_name
from dataplane.storage.segment import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    SWAP_SUFFIX,
    BatchPlacement,
    LogSegment,
)
from dataplane.storage.txn_index import AbortedTxn

__all__ = [
    "CLEANED_SUFFIX",
    "CLEANER_FILE",
    "CLEAN_SHUTDOWN_FILE",
    "DELETED_SUFFIX",
    "EARLIEST_TIMESTAMP",
    "EPOCH_FILE",
    "LATEST_TIMESTAMP",
    "LOG_START_FILE",
    "MAX_TIMESTAMP",
    "RECOVERY_POINT_FILE",
    "SWAP_SUFFIX",
    "AppendInfo",
    "CleanResult",
    "FileRegion",
    "Log",
    "SegmentCopy",
    "TimestampAndOffset",
    "WouldBlock",
]

# ListOffsets special timestamps.
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3


_PREFIX = struct.Struct(">q" "i" "i")  # baseOffset, batchLength, partitionLeaderEpoch
_MAX_TIMESTAMP = struct.Struct(">q")
MAX_TIMESTAMP_OFFSET = 35  # of a batch: baseOffset 8, length 4, epoch 4, magic 1, crc 4, attributes 2, delta 4, base 8
_unpack_header = BATCH_HEADER.unpack_from
_crc32c = crc32c_module.crc32c


def _now_ms() -> int:
    return int(time.time() * 1000)


class WouldBlock(Exception):
    """A ``blocking=False`` append could not finish without waiting; nothing was changed.

    ``reason`` says why: ``"lock"`` (another thread holds the log's lock), ``"roll"`` (a new
    segment is due), ``"epoch"`` (the batch starts a leader epoch, whose checkpoint is
    fsynced) or ``"flush"`` (``flush.messages`` would be reached). The caller makes the
    same call again where it may block (a worker thread, ``blocking=True``).
    """

    def __init__(self, reason: str) -> None:
        super().__init__(f"append would block: {reason}")
        self.reason = reason


class AppendInfo(NamedTuple):
    """What an append did. A NamedTuple (immutable, ~2 µs cheaper than a frozen dataclass)
    because one is built per produce request on the hot path."""

    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    log_append_time: int  # -1 unless the topic uses LogAppendTime
    log_start_offset: int
    num_offsets: int
    valid_bytes: int
    duplicate: bool = False  # an idempotent producer's retry of a batch the log holds: nothing written

    @classmethod
    def of_duplicate(cls, batch: BatchMetadata, log_start_offset: int) -> AppendInfo:
        return cls(batch.first_offset, batch.last_offset, -1, -1, -1, log_start_offset, 0, 0, True)


@dataclass(frozen=True, slots=True)
class SegmentCopy:
    """What uploading one closed segment needs, taken under the log's lock (see :meth:`Log.next_upload`).

    ``log_fd`` is a duplicate of the segment's file descriptor, so the bytes stay readable even if the
    segment is deleted meanwhile; the uploader closes it.
    """

    base_offset: int
    end_offset: int  # last offset held (inclusive)
    size: int
    max_timestamp: int
    offset_of_max_timestamp: int
    log_fd: int
    offset_index: bytes
    time_index: bytes
    producer_snapshot: bytes | None  # the producer state as of end_offset + 1, if the log still has it
    epochs: tuple[tuple[int, int], ...]  # (epoch, start offset) of the segment's batches
    aborted: tuple[AbortedTxn, ...]  # aborted transactions with records in the segment


@dataclass(frozen=True, slots=True)
class TimestampAndOffset:
    timestamp: int
    offset: int
    leader_epoch: int


class Log:
    """A partition's log.

    On disk: one directory of segments (``<base:020d>.log/.index/.timeindex``), four
    checkpoint files, producer snapshots and a ``.clean_shutdown`` marker (details in the
    module docstring). Thread-safety: every public method is thread-safe; ``_lock`` is
    never held across an fsync (lock order in the module docstring).
    """

    def __init__(self, directory: Path, config: LogConfig, *, time_ms: Callable[[], int] = _now_ms) -> None:
        self.dir = directory
        self.config = config
        self._fast_path = not (config.log_append_time or config.compact)
        self._time = time_ms
        self._lock = threading.RLock()
        self._flush_lock = threading.Lock()
        self._checkpoint_lock = threading.Lock()
        self._closed = False
        self._last_flush_ms = time_ms()
        directory.mkdir(parents=True, exist_ok=True)
        self._epochs = LeaderEpochCache(directory / EPOCH_FILE)
        self._producers = ProducerStateManager(directory)
        loaded = load_log(directory, config, time_ms())
        self.had_clean_shutdown = loaded.had_clean_shutdown
        self.recovered_bytes = loaded.recovered_bytes
        self._local = LocalLog(directory, config, loaded.segments, recovery_point=loaded.recovery_point)
        self._highest_remote = loaded.highest_remote_offset
        first_base = loaded.segments[0].base_offset
        if loaded.checkpointed_log_start < first_base <= self._highest_remote + 1:
            # Tiered: the offsets below the first local segment are in the remote tier, which reaches it.
            self._log_start = loaded.checkpointed_log_start
        else:
            self._log_start = loaded.log_start_offset
        self.remote_size_bytes = 0  # the remote tier's bytes of this partition (the remote log manager sets it)
        self._cleaner_offset = 0
        if self._log_start > self._local.next_offset:
            self._truncate(self._log_start, full=True)
        leo = self._local.next_offset
        # Recovered bytes are not fsynced here (that would rewrite a page cache's worth of
        # data at start-up); the recovery point stays put, so a second crash rescans them.
        self._local.recovery_point = min(loaded.recovery_point, leo)
        self._cleaner_offset = min(max(loaded.cleaner_offset, self._log_start), leo)
        self._epochs.truncate_from_end(leo)
        self._epochs.truncate_from_start(self._log_start)
        self._producers.load(self._log_start, leo, self._local.headers, self._marker_in_log)
        self._write_checkpoints()  # the epochs, if loading changed them
        if loaded.had_clean_shutdown:
            remove_clean_shutdown_marker(directory)

    @classmethod
    def open(cls, directory: Path, config: LogConfig | None = None, *,
             time_ms: Callable[[], int] = _now_ms) -> Log:
        return cls(directory, config or LogConfig(), time_ms=time_ms)

    # ------------------------------------------------------------------ properties

    @property
    def closed(self) -> bool:
        """True once closed or deleted: holders should fetch the log again from the manager."""
        return self._closed

    @property
    def log_start_offset(self) -> int:
        return self._log_start

    @property
    def log_end_offset(self) -> int:
        return self._local.next_offset

    @property
    def local_log_start_offset(self) -> int:
        """The first offset on local disk (ListOffsets -4); the log start itself may lie in the remote tier."""
        with self._lock:
            return self._local_start_locked()

    def _local_start_locked(self) -> int:
        segments = self._local.segments.all
        return max(self._log_start, segments[0].base_offset) if segments else self._log_start

    @property
    def highest_remote_offset(self) -> int:
        """The last offset the remote tier holds (ListOffsets -5); -1 when none."""
        return self._highest_remote

    @property
    def recovery_point(self) -> int:
        return self._local.recovery_point

    @property
    def size_in_bytes(self) -> int:
        with self._lock:
            return self._local.segments.size_in_bytes

    @property
    def segment_base_offsets(self) -> tuple[int, ...]:
        with self._lock:
            return self._local.segments.bases

    @property
    def latest_epoch(self) -> int:
        with self._lock:
            return self._epochs.latest_epoch

    def epoch_entries(self) -> tuple[tuple[int, int], ...]:
        with self._lock:
            return tuple((e.epoch, e.start_offset) for e in self._epochs.entries)

    def end_offset_for_epoch(self, epoch: int) -> EpochEndOffset:
        with self._lock:
            return self._epochs.end_offset_for(epoch, self._local.next_offset)

    def begin_leader_epoch(self, epoch: int) -> None:
        """Becoming leader at ``epoch``: it starts at the log end (KIP-101), even before anything is appended.

        Without the entry, a follower asking for the end of an epoch this leader
        never wrote in would get UNDEFINED instead of the boundary it must truncate to.
        """
        with self._lock:
            self._check_open()
            if epoch > self._epochs.latest_epoch:
                self._epochs.assign(epoch, self._local.next_offset)
        self._write_checkpoints()

    def ms_since_last_flush(self) -> int:
        return self._time() - self._last_flush_ms

    def update_config(self, config: LogConfig) -> None:
        with self._lock:
            self.config = config
            self._fast_path = not (config.log_append_time or config.compact)
            self._local.update_config(config)

    # ------------------------------------------------------------------ append

    def append_as_leader(self, batches: bytes | bytearray | memoryview, leader_epoch: int, *,
                         blocking: bool = True, control: bool = False) -> AppendInfo:
        """Validate client batches, assign offsets and the leader epoch, and append them.

        ``control``: the batch may be a transaction marker (a coordinator's write; clients may not send one).

        ``blocking=False`` is for the broker's event loop: the call then neither waits for
        the lock nor fsyncs, and raises :class:`WouldBlock` (having changed nothing) when it
        would have to.
        """
        n = len(batches)
        if self._fast_path and n >= HEADER_SIZE and batch_length_at(batches) + LOG_OVERHEAD == n \
                and _MAX_TIMESTAMP.unpack_from(batches, MAX_TIMESTAMP_OFFSET)[0] >= 0 \
                and not batches[ATTRIBUTES_OFFSET + 1] & CONTROL_MASK:
            return self._append_single_as_leader(batches, leader_epoch, blocking)
        summary = validate_batches(batches, strict_offsets=True)
        self._check_sizes(summary)
        if self.config.compact:
            _require_keys(batches, summary)
        log_append = self.config.log_append_time
        # Older clients leave a batch's maxTimestamp at -1: Kafka computes it from the records, so
        # time lookups, the time index and retention work for them. Only such batches are decoded.
        restamped = {} if log_append else _with_record_max_timestamps(batches, summary)
        idempotent = [h for _, h in summary.headers if h.producer_id != NO_PRODUCER_ID]
        if idempotent and len(summary.headers) > 1:
            raise InvalidRecordError("an idempotent produce must carry exactly one batch per partition")
        marker = None
        if any(h.is_control for _, h in summary.headers):
            if not control:
                raise InvalidRecordError("control batches are written by transaction coordinators only")
            marker = marker_at(batches, *summary.headers[0])
        mv = memoryview(batches)
        if not self._lock.acquire(blocking):
            raise WouldBlock("lock")
        try:
            self._check_open()
            if idempotent:
                duplicate = self._producers.check(idempotent[0], marker)
                if duplicate is not None:
                    return AppendInfo.of_duplicate(duplicate, self._log_start)
            local = self._local
            now = self._time()
            first = offset = local.next_offset
            last = first + summary.record_count - 1
            new_epoch, need_flush = self._make_room_locked(summary.total_size, first, last, now, leader_epoch, blocking)
            placements: list[BatchPlacement] = []
            # The batches go to disk as they came: only a new 16-byte prefix per batch
            # (baseOffset, batchLength, partitionLeaderEpoch) is written in front of the
            # client's bytes with pwritev, so the payload is never copied in Python.
            iov: list[bytes | memoryview] = []
            max_ts, offset_of_max = -1, -1
            for pos, h in summary.headers:
                batch_last = offset + h.last_offset_delta
                ts = h.max_timestamp
                if log_append:
                    copy = bytearray(mv[pos : pos + h.size])
                    stamp_batch(copy, 0, offset, leader_epoch)
                    set_log_append_time(copy, 0, h.size, now)
                    iov.append(bytes(copy))
                    ts = now
                elif pos in restamped:
                    ts, fixed = restamped[pos]
                    iov.append(_PREFIX.pack(offset, h.batch_length, leader_epoch))
                    iov.append(memoryview(fixed)[_PREFIX.size :])
                else:
                    iov.append(_PREFIX.pack(offset, h.batch_length, leader_epoch))
                    iov.append(mv[pos + _PREFIX.size : pos + h.size])
                if ts > max_ts:
                    max_ts, offset_of_max = ts, batch_last
                placements.append(BatchPlacement(pos, h.size, batch_last, ts))
                offset = batch_last + 1
            local.append(iov, placements, last)
            if idempotent:
                self._producers.update(idempotent[0], first, marker)
            if new_epoch:
                self._epochs.assign(leader_epoch, first)
            info = AppendInfo(first, last, max_ts, offset_of_max, now if log_append else -1,
                              self._log_start, last + 1 - first, summary.total_size)
        finally:
            self._lock.release()
        if new_epoch:
            self._write_checkpoints()
        if need_flush:
            self.flush()
        return info

    def _append_single_as_leader(
        self, batch: bytes | bytearray | memoryview, leader_epoch: int, blocking: bool
    ) -> AppendInfo:
        """The common produce case (one batch per partition), with as little Python as possible.

        The checks are :func:`validate_single_batch` inlined over the raw header tuple; on
        any failure that function is called to raise the precise typed error.
        """
        n = len(batch)
        fields = _unpack_header(batch, 0)
        (_, batch_length, _, magic, crc, attrs, lod, _, max_ts, producer_id, _, _, count) = fields
        codec = attrs & CODEC_MASK
        if (
            magic != 2
            or batch_length + LOG_OVERHEAD != n
            or count <= 0
            or lod != count - 1
            or codec > 4
            or (codec == 0 and count * MIN_RECORD_SIZE > n - HEADER_SIZE)
            or _crc32c(memoryview(batch)[CRC_START:]) != crc
        ):
            validate_single_batch(batch)
            raise CorruptRecordError("invalid batch")  # unreachable: the line above raises
        config = self.config
        if n > config.max_message_bytes or n > config.segment_bytes:
            h = BatchHeader.parse(batch)
            self._check_sizes(BatchesSummary(((0, h),), n, lod + 1))
        rest = memoryview(batch)[_PREFIX.size :]
        header = BatchHeader._make(fields) if producer_id != NO_PRODUCER_ID else None
        lock = self._lock
        if not lock.acquire(blocking):
            raise WouldBlock("lock")
        try:
            if self._closed:
                self._check_open()
            if header is not None:
                duplicate = self._producers.check(header)
                if duplicate is not None:
                    return AppendInfo.of_duplicate(duplicate, self._log_start)
            local = self._local
            first = local.next_offset
            last = first + lod
            now = self._time()
            new_epoch, need_flush = self._make_room_locked(n, first, last, now, leader_epoch, blocking)
            local.append_batch(_PREFIX.pack(first, batch_length, leader_epoch), rest, n, last, max_ts)
            if header is not None:
                self._producers.update(header, first)
            if new_epoch:
                self._epochs.assign(leader_epoch, first)
            info = AppendInfo(first, last, max_ts, last, -1, self._log_start, lod + 1, n)
        finally:
            lock.release()
        if new_epoch:
            self._write_checkpoints()
        if need_flush:
            self.flush()
        return info

    def append_as_follower(self, batches: bytes | bytearray | memoryview, *, blocking: bool = True) -> AppendInfo:
        """Append replicated batches keeping their offsets and epochs (``blocking`` as for the leader)."""
        summary = validate_batches(batches, strict_offsets=False)
        self._check_sizes(summary)
        headers = [h for _, h in summary.headers]
        for prev, nxt in itertools.pairwise(headers):
            if nxt.base_offset < prev.next_offset:
                raise UnexpectedAppendOffsetError("batch offsets are not increasing")
        if not self._lock.acquire(blocking):
            raise WouldBlock("lock")
        try:
            self._check_open()
            local = self._local
            first = headers[0].base_offset
            if first < local.next_offset:
                raise UnexpectedAppendOffsetError(
                    f"first offset {first} is below log end offset {local.next_offset}")
            last = headers[-1].last_offset
            placements = []
            max_ts, offset_of_max, max_epoch = -1, -1, -1
            for pos, h in summary.headers:
                placements.append(BatchPlacement(pos, h.size, h.last_offset, h.max_timestamp))
                if h.max_timestamp > max_ts:
                    max_ts, offset_of_max = h.max_timestamp, h.last_offset
                if h.partition_leader_epoch > max_epoch:
                    max_epoch = h.partition_leader_epoch
            now = self._time()
            new_epoch, need_flush = self._make_room_locked(summary.total_size, first, last, now, max_epoch, blocking)
            data = batches if not isinstance(batches, memoryview) else bytes(batches)
            local.append(data, placements, last)
            for pos, h in summary.headers:
                if h.partition_leader_epoch >= 0:
                    self._epochs.assign(h.partition_leader_epoch, h.base_offset)
                if h.producer_id != NO_PRODUCER_ID:
                    self._producers.update(h, h.base_offset, marker_at(batches, pos, h) if h.is_control else None)
            info = AppendInfo(first, last, max_ts, offset_of_max, -1, self._log_start,
                              last + 1 - first, summary.total_size)
        finally:
            self._lock.release()
        if new_epoch:
            self._write_checkpoints()
        if need_flush:
            self.flush()
        return info

    def _make_room_locked(self, size: int, first: int, last: int, now: int, leader_epoch: int,
                          blocking: bool) -> tuple[bool, bool]:
        """Before an append (under ``_lock``): roll if the one rule says so; (new leader epoch, flush due).

        A non-blocking append refuses (``WouldBlock``) anything that would fsync or roll.
        """
        local = self._local
        roll = local.must_roll(size, first, last, now)
        new_epoch = leader_epoch > self._epochs.latest_epoch
        need_flush = last + 1 - local.recovery_point >= self.config.flush_messages
        if roll or new_epoch or need_flush:
            if not blocking:
                raise WouldBlock("roll" if roll else "epoch" if new_epoch else "flush")
            if roll:
                self._roll_locked(first, now)
        return new_epoch, need_flush

    def _check_sizes(self, summary: BatchesSummary) -> None:
        for _, h in summary.headers:
            if h.size > self.config.max_message_bytes:
                raise MessageTooLargeError(
                    f"batch of {h.size} bytes exceeds max.message.bytes {self.config.max_message_bytes}"
                )
        if summary.total_size > self.config.segment_bytes:
            raise RecordListTooLargeError(
                f"{summary.total_size} bytes exceed segment.bytes {self.config.segment_bytes}"
            )

    def _check_open(self) -> None:
        if self._closed:
            raise KafkaStorageError(f"log {self.dir.name} is closed")

    def roll(self) -> None:
        """Start a new active segment at the log end offset (no-op if the active one is empty there)."""
        with self._lock:
            self._check_open()
            self._roll_locked(self._local.next_offset, self._time())

    def _roll_locked(self, new_base: int, now: int) -> None:
        if self._local.roll(new_base, now) is not None:
            # The producer state as of the new segment's base (nothing lies between the log end and it),
            # so a restart or a truncation rescans at most one segment. Written, not fsynced: the next
            # flush syncs it, and the directory with it (so the new segment's name too).
            self._producers.take_snapshot(new_base)

    # ------------------------------------------------------------------ read

    @property
    def active_segment_base(self) -> int:
        """Base offset of the active segment (no lock: one attribute read, for a hint)."""
        return self._local.segments.active.base_offset

    def read(self, offset: int, max_bytes: int, max_offset: int | None = None, *,
             min_one_batch: bool = True, blocking: bool = True) -> FileRegion:
        """Whole batches starting at the one containing ``offset``, below ``max_offset``.

        Returns at least one whole batch (even above ``max_bytes``) unless
        ``min_one_batch`` is false; an empty region at the log end. With
        ``blocking=False`` it raises ``WouldBlock`` instead of waiting for the lock.
        """
        if not self._lock.acquire(blocking=blocking):
            raise WouldBlock("lock")
        try:
            self._check_open()
            leo = self._local.next_offset
            if offset < self._log_start or offset > leo:
                raise OffsetOutOfRangeError(
                    f"offset {offset} outside [{self._log_start}, {leo}] of {self.dir.name}"
                )
            local_start = self._local_start_locked()
            if offset < local_start:
                raise OffsetMovedToTieredStorageError(
                    f"offset {offset} of {self.dir.name} is in the remote tier (local log start {local_start})",
                    local_log_start=local_start)
            upper = leo if max_offset is None else min(max_offset, leo)
            return self._local.read(offset, max_bytes, upper, min_one_batch)
        finally:
            self._lock.release()

    def read_batches(self, offset: int, max_bytes: int = 1 << 30,
                     max_offset: int | None = None) -> list[RecordBatch]:
        """Decoded batches from :meth:`read` (tools and tests, not the fetch path)."""
        data = self.read(offset, max_bytes, max_offset).read_bytes()
        return [decode_batch(data, pos) for pos, _ in iter_batch_headers(data, allow_partial_tail=True)]

    def read_records(self, offset: int, max_offset: int | None = None) -> Iterator[Record]:
        """Every record from ``offset`` (inclusive) to ``max_offset`` or the end, decoded."""
        pos = offset
        end = self._local.next_offset if max_offset is None else max_offset
        while pos < end:
            batches = self.read_batches(pos, 1 << 20, end)
            if not batches:
                return
            for b in batches:
                for r in b.records:
                    if offset <= r.offset < end:
                        yield r
                pos = max(pos, b.header.next_offset)

    # ------------------------------------------------------------------ transactions

    def first_unstable_offset(self, high_watermark: int) -> int:
        """The last stable offset for ``high_watermark``: below the first record of any transaction that is
        open, or closed by a marker the high watermark has not passed (never above ``high_watermark``)."""
        producers = self._producers
        if not producers.ongoing and not producers.unreplicated:
            return high_watermark  # no transaction here: the common case, without the lock
        with self._lock:
            self._producers.forget_replicated(high_watermark)
            return self._producers.first_unstable_offset(high_watermark)

    def high_watermark_moved(self, high_watermark: int) -> None:
        """The partition's high watermark is now ``high_watermark``: transactions whose markers it passed are
        settled and stop bounding the last stable offset (the replication layer calls this on every move)."""
        if self._producers.unreplicated:  # a lock-free hint: nothing to settle in the common case
            with self._lock:
                self._producers.forget_replicated(high_watermark)

    def collect_aborted(self, start: int, upper: int) -> list[AbortedTxn]:
        """Aborted transactions overlapping ``[start, upper)``, for a read_committed fetch."""
        with self._lock:
            return self._producers.aborted.collect(start, upper)

    def open_transactions(self) -> dict[int, int]:
        """Producer id -> first offset of its transaction open in this log."""
        with self._lock:
            return self._producers.open_transactions()

    def active_producers(self) -> list[ActiveProducer]:
        """Every producer this log holds state for (DescribeProducers)."""
        with self._lock:
            return self._producers.active_producers()

    def in_transaction(self, producer_id: int) -> bool:
        """Whether the producer's transaction is open here (a lock-free read: a hint for the produce path)."""
        return producer_id in self._producers.ongoing

    def _marker_in_log(self, header: BatchHeader) -> Marker | None:
        """The marker of a control batch already in the log (the producer state's replay)."""
        data = self._local.read(header.base_offset, 1, header.next_offset, True).read_bytes()
        return marker_at(data, 0, header) if data else None

    def producer_batch(self, producer_id: int) -> BatchMetadata | None:
        """The last batch the log holds of ``producer_id`` (None if it has none): tests and tools."""
        with self._lock:
            entry = self._producers.producers.get(producer_id)
            return entry.batches[-1] if entry is not None and entry.batches else None

    # ------------------------------------------------------------------ timestamps

    def offset_for_timestamp(self, timestamp: int) -> TimestampAndOffset | None:
        """ListOffsets: the first offset whose record timestamp ≥ ``timestamp``."""
        with self._lock:
            if timestamp == EARLIEST_TIMESTAMP:
                return TimestampAndOffset(-1, self._log_start, self._epoch_for(self._log_start))
            if timestamp == LATEST_TIMESTAMP:
                return TimestampAndOffset(-1, self._local.next_offset, self._epochs.latest_epoch)
            found = (self._local.max_timestamp() if timestamp == MAX_TIMESTAMP
                     else self._local.offset_for_timestamp(timestamp, self._log_start))
            if found is None:
                return None
            return TimestampAndOffset(found[0], found[1], self._epoch_for(found[1]))

    def epoch_for(self, offset: int) -> int:
        """The leader epoch ``offset`` was written in (-1 when the log knows none for it)."""
        with self._lock:
            return self._epoch_for(offset)

    def _epoch_for(self, offset: int) -> int:
        epoch = -1
        for e in self._epochs.entries:
            if e.start_offset <= offset:
                epoch = e.epoch
        return epoch

    # ------------------------------------------------------------------ flush & checkpoints

    def flush(self, up_to: int | None = None) -> None:
        """fsync everything appended before the call; appends may proceed meanwhile."""
        with self._flush_lock:
            with self._lock:
                if self._closed:
                    return
                local = self._local
                target = local.next_offset if up_to is None else min(up_to, local.next_offset)
                if target <= local.recovery_point and up_to is not None:
                    return
                work = local.take_flush_work()
                snapshots = self._producers.take_unsynced()
            for seg, pending in work:
                seg.sync(pending)
            self._producers.aborted.fsync()
            ProducerStateManager.sync_snapshots(snapshots)
            with self._lock:
                local.recovery_point = max(local.recovery_point, target)
                self._last_flush_ms = self._time()

    def checkpoint(self) -> None:
        """Persist recovery point and log start offset (the manager calls this periodically)."""
        with self._flush_lock:
            with self._lock:
                work = self._local.take_index_work()
            for seg, pending in work:
                seg.sync(pending, fsync_data=False)  # data durability is flush()'s job
            self._write_checkpoints(RECOVERY_POINT_FILE, LOG_START_FILE)

    def _write_checkpoints(self, *files: str) -> None:
        """Write ``files`` and, if they changed, the epochs, from the in-memory state.

        Never under ``_lock``: every checkpoint write fsyncs. ``_checkpoint_lock``
        serialises the writers and each reads the state only once it holds it, so a file
        never goes back to a value older than one already written.
        """
        with self._checkpoint_lock:
            with self._lock:
                values = {
                    RECOVERY_POINT_FILE: self._local.recovery_point,
                    LOG_START_FILE: self._log_start,
                    CLEANER_FILE: self._cleaner_offset,
                }
                epochs = self._epochs.take_dirty()
            try:
                if epochs is not None:
                    self._epochs.write(epochs)
            except BaseException:
                with self._lock:
                    self._epochs.mark_dirty()
                raise
            for name in files:
                write_offset(self.dir / name, values[name])

    def close(self) -> None:
        """Flush, checkpoint and mark a clean shutdown; readers' regions stay readable.

        The log is marked closed first, under the lock, so no append can land after the
        final sync; the fsyncs follow without the lock, and the marker comes last, once
        everything it vouches for is on disk.
        """
        with self._flush_lock:
            with self._lock:
                if self._closed:
                    return
                self._closed = True
                leo = self._local.next_offset
                self._producers.take_snapshot(leo)
                snapshots = self._producers.take_unsynced()
                work = self._local.close()
                self._local.recovery_point = leo
            for seg, pending in work:
                seg.sync(pending, fsync_indexes=True)
            self._producers.aborted.fsync()
            ProducerStateManager.sync_snapshots(snapshots)
            self._write_checkpoints(RECOVERY_POINT_FILE, LOG_START_FILE, CLEANER_FILE)
            (self.dir / CLEAN_SHUTDOWN_FILE).touch()
            fsync_dir(self.dir)

    def close_unclean(self) -> None:
        """Drop the log without flushing or marking (tests and the broker's abort path)."""
        with self._lock:
            self._closed = True
            self._local.segments.take_all()

    # ------------------------------------------------------------------ truncation

    def truncate_to(self, offset: int) -> None:
        """Remove every batch whose last offset ≥ ``offset``; the log end becomes ``offset``."""
        self._truncate(offset, full=False)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Discard everything; the log restarts empty at ``offset``."""
        self._truncate(offset, full=True)

    def _truncate(self, offset: int, *, full: bool) -> None:
        """Both truncations, in three steps so that no fsync happens under ``_lock``.

        1. The recovery point and the epochs drop to ``offset`` on disk before any byte
           goes. A recovery point too low only costs a longer scan after a crash; one too
           high would vouch for bytes appended there later and not yet flushed. Likewise
           an epoch file missing entries makes a follower truncate further; one with stale
           entries could let it keep divergent data.
        2. Under ``_lock``: the bytes are cut and whole segments renamed ``.deleted`` (a
           later roll, or the new segment of a full truncation, reuses their names).
        3. The directory is fsynced and the files unlinked; only then does a full
           truncation checkpoint its new log start, so no checkpoint claims a start whose
           old segments a crash could still bring back.
        A crash between 2 and 3 may bring back segments above the (lowered) recovery
        point: they are recovered like any unflushed tail, and the replica truncates again.
        """
        with self._flush_lock:
            with self._lock:
                self._check_open()
                local = self._local
                if not full and offset >= local.next_offset:
                    return
                full = full or offset < self._log_start or local.segments.all[0].base_offset > offset
                local.recovery_point = min(local.recovery_point, offset)
                if full:
                    self._epochs.clear()
                else:
                    self._epochs.truncate_from_end(offset)
            self._write_checkpoints(RECOVERY_POINT_FILE)
            with self._lock:
                self._check_open()
                if full:
                    doomed = self._truncate_fully_locked(offset)
                else:
                    doomed = local.truncate_to(offset)
                    self._cleaner_offset = min(self._cleaner_offset, offset)
                    self._epochs.truncate_from_end(offset)
                    # Kafka's truncateTo: snapshots above the new end go, the state comes back from the log.
                    self._producers.load(self._log_start, offset, local.headers, self._marker_in_log)
            delete_segment_files(self.dir, doomed)
            self._write_checkpoints(*((RECOVERY_POINT_FILE, LOG_START_FILE) if full else ()))

    def _truncate_fully_locked(self, offset: int) -> list[LogSegment]:
        doomed = self._local.truncate_fully(offset, self._time())
        self._log_start = self._cleaner_offset = offset
        self._epochs.clear()
        self._producers.clear()
        return doomed

    # ------------------------------------------------------------------ retention

    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords: advance the log start offset (persisted) and drop whole segments below it."""
        with self._flush_lock:
            with self._lock:
                self._check_open()
                leo = self._local.next_offset
                if offset > leo or offset < 0:
                    raise OffsetOutOfRangeError(f"cannot delete records before {offset}: log end is {leo}")
                if offset <= self._log_start:
                    return self._log_start
                self._log_start = offset
                self._cleaner_offset = max(self._cleaner_offset, offset)
                self._epochs.truncate_from_start(offset)
                doomed, _ = self._delete_prefix_locked(self._local.segments.floor_index(offset))
                start = self._log_start
            # The new start is durable before the call returns (and DeleteRecords is acknowledged).
            self._finish_deletion(doomed, log_start_moved=True)
            return start

    def delete_old_segments(self) -> int:
        """Retention by log start, ``retention.ms`` and ``retention.bytes``; never the active segment."""
        with self._flush_lock:
            with self._lock:
                if self._closed:
                    return 0
                segments = self._local.segments.all
                n = self._local.segments.floor_index(self._log_start)
                sealed = len(segments) - 1
                if self.config.remote_storage:
                    n = self._local_retention_locked(n)
                    doomed, _ = self._delete_prefix_locked(n, move_start=False)
                    moved = False
                elif self.config.delete:
                    if self.config.retention_ms >= 0:
                        horizon = self._time() - self.config.retention_ms
                        while n < sealed and _retention_time(segments[n]) < horizon:
                            n += 1
                    if self.config.retention_bytes >= 0:
                        total = sum(s.size for s in segments[n:])
                        while n < sealed and total - segments[n].size >= self.config.retention_bytes:
                            total -= segments[n].size
                            n += 1
                if not self.config.remote_storage:
                    doomed, moved = self._delete_prefix_locked(n)
            self._finish_deletion(doomed, log_start_moved=moved)
            return n

    def _local_retention_locked(self, n: int) -> int:
        """A tiered log's local retention: past the first ``n`` segments (below the log start), the oldest
        segments the remote tier already holds while ``local.retention.ms``/``.bytes`` are exceeded.

        Never a segment that is not uploaded: it would then be neither local nor remote.
        """
        segments = self._local.segments.all
        sealed = len(segments) - 1
        uploaded = self._highest_remote
        retention_ms = self.config.local_retention_ms_in_force
        retention_bytes = self.config.local_retention_bytes_in_force
        horizon = self._time() - retention_ms
        total = sum(s.size for s in segments[n:])
        while n < sealed and segments[n].next_offset - 1 <= uploaded:
            seg = segments[n]
            too_old = retention_ms >= 0 and _retention_time(seg) < horizon
            too_big = retention_bytes >= 0 and total - seg.size >= retention_bytes
            if not (too_old or too_big):
                break
            total -= seg.size
            n += 1
        return n

    def _delete_prefix_locked(self, n: int, *, move_start: bool = True) -> tuple[list[LogSegment], bool]:
        """Take the first ``n`` segments out of the log; returns them and whether the log start moved.

        ``move_start=False`` (a tiered log's local retention): the log start stays where it is, in the
        remote tier.
        """
        doomed = self._local.delete_prefix(n)
        if not doomed:
            return [], False
        first = self._local.segments.all[0].base_offset
        if not move_start:
            self._producers.prune_below(first)
            return doomed, False
        moved = first > self._log_start
        if moved:
            self._log_start = first
            self._epochs.truncate_from_start(first)
        self._cleaner_offset = max(self._cleaner_offset, self._log_start)
        self._producers.prune_below(first)
        return doomed, moved

    def _finish_deletion(self, doomed: Sequence[LogSegment], *, log_start_moved: bool) -> None:
        """After ``_lock``: checkpoint the new log start, then delete the segments below it.

        In this order a crash leaves at worst segments below the checkpointed start, which
        the loader reads past (the log start is the higher of the checkpoint and the first
        base) and the next retention pass deletes; it never leaves an older log start over
        segments already gone.
        """
        if log_start_moved:
            self._write_checkpoints(LOG_START_FILE)
        delete_segment_files(self.dir, doomed)

    # ------------------------------------------------------------------ the remote tier

    def set_highest_remote_offset(self, offset: int) -> None:
        """The remote tier now holds every offset up to ``offset`` (persisted: after a restart, local segments
        at or below it may still be deleted by local retention, and the log start may stay below them)."""
        with self._lock:
            if offset <= self._highest_remote or self._closed:
                return
            self._highest_remote = offset
        with self._checkpoint_lock:
            write_offset(self.dir / REMOTE_OFFSET_FILE, self._highest_remote)

    def next_uploads(self, upper: int, limit: int = 1, after: int = -1) -> list[SegmentCopy]:
        """The oldest closed segments not yet in the remote tier (nor holding only offsets up to ``after``: those
        already being uploaded) whose offsets all lie below ``upper`` (the high watermark and the last stable
        offset), in order, at most ``limit``; the caller closes their fds."""
        found: list[SegmentCopy] = []
        with self._lock:
            if self._closed:
                return found
            epochs = tuple((e.epoch, e.start_offset) for e in self._epochs.entries)
            for seg in self._local.segments.sealed:
                end = seg.next_offset - 1
                if end <= max(self._highest_remote, after) or seg.size == 0:
                    continue
                if seg.next_offset > upper or len(found) >= limit:
                    break
                try:
                    snapshot: bytes | None = (self.dir / snapshot_name(seg.next_offset)).read_bytes()
                except OSError:
                    snapshot = None
                found.append(SegmentCopy(
                    seg.base_offset, end, seg.size, seg.max_timestamp, seg.offset_of_max_timestamp,
                    os.dup(seg.file.fd), seg.offset_index.to_bytes(), seg.time_index.to_bytes(), snapshot,
                    _epochs_within(epochs, seg.base_offset, end),
                    # Every aborted transaction with records here, its marker here or later: the segment is
                    # below the last stable offset, so each of its transactions is decided and indexed.
                    tuple(self._producers.aborted.collect(seg.base_offset, seg.next_offset))))
        return found

    def next_upload(self, upper: int) -> SegmentCopy | None:
        """The oldest closed segment not yet in the remote tier below ``upper`` (see :meth:`next_uploads`)."""
        found = self.next_uploads(upper, 1)
        return found[0] if found else None

    def local_only_bytes(self) -> int:
        """Bytes of the local segments that the remote tier does not hold yet (total retention counts them)."""
        with self._lock:
            return sum(s.size for s in self._local.segments if s.next_offset - 1 > self._highest_remote)

    def restore_from_remote(self, next_offset: int, log_start: int, epochs: Sequence[tuple[int, int]],
                            producer_snapshot: bytes | None, highest_remote: int) -> None:
        """A follower below its leader's local log start (KIP-405): empty the log and restart it at
        ``next_offset`` with the leader epochs and producer state the remote tier holds for the offsets below,
        the log start at ``log_start`` (in the remote tier) and the remote tier known to reach ``highest_remote``.
        """
        self._truncate(next_offset, full=True)
        with self._lock:
            self._check_open()
            for epoch, start in epochs:
                self._epochs.assign(epoch, start)
            if producer_snapshot is not None:
                self._producers.install_snapshot(next_offset, producer_snapshot)
                self._producers.load(next_offset, next_offset, self._local.headers, self._marker_in_log)
            self._log_start = min(max(log_start, 0), next_offset)
            self._highest_remote = max(self._highest_remote, highest_remote)
        self._write_checkpoints(LOG_START_FILE)
        with self._checkpoint_lock:
            write_offset(self.dir / REMOTE_OFFSET_FILE, self._highest_remote)

    # ------------------------------------------------------------------ compaction

    def dirty_ratio(self) -> float:
        with self._lock:
            return cleaner.dirty_ratio(self._local.segments.sealed, self._cleaner_offset)

    def compact(self, *, max_map_keys: int = 4_000_000) -> CleanResult | None:
        """Keep the newest record per key in sealed segments, preserving offsets (see :mod:`cleaner`)."""
        return cleaner.compact(self, max_map_keys=max_map_keys)

    def cleaning_plan(self) -> CleaningPlan | None:
        """The cleaner's view of the log (see :class:`cleaner.Cleanable`)."""
        with self._lock:
            segments = self._local.segments
            if self._closed or not self.config.compact or len(segments) < 2:
                return None
            # Only below every open (or not yet settled) transaction: its outcome decides what may go.
            unsettled = self._producers.first_unsettled_offset(self._local.next_offset)
            sealed = [s for s in segments.sealed if s.next_offset <= unsettled]
            if not sealed:
                return None
            dirty_end = min(segments.active.base_offset, sealed[-1].next_offset)
            return CleaningPlan(
                directory=self.dir,
                config=self.config,
                segments=tuple((s, s.size) for s in sealed),
                first_dirty=max(self._cleaner_offset, self._log_start),
                dirty_end=dirty_end,
                aborted=tuple(self._producers.aborted.collect(self._log_start, dirty_end)),
                layout_version=self._local.layout_version,
                now_ms=self._time(),
            )

    def swap_cleaned(self, plan: CleaningPlan, cleaned: Sequence[tuple[LogSegment, LogSegment]],
                     clean_end: int) -> bool:
        """Swap compacted copies in for their segments, if the layout is still the one ``plan`` saw.

        Order, with ``_flush_lock`` held throughout so the sealed segments cannot change:
        ``.cleaned`` → ``.swap`` and a directory fsync (from here a crash completes the swap
        on open: each ``.swap`` is a complete, fsynced copy of its segment); the in-memory
        swap under ``_lock``; old → ``.deleted``, ``.swap`` → final name, directory fsync
        (the swap is done on disk); unlink the old files; checkpoint the cleaner offset last,
        so a crash before it only means cleaning those offsets again.
        """
        with self._flush_lock:
            with self._lock:
                current = not self._closed and plan.layout_version == self._local.layout_version
            if not current:
                for _, new in cleaned:
                    new.delete_files()
                return False
            for _, new in cleaned:
                new.rename_suffix(SWAP_SUFFIX)
            if cleaned:
                fsync_dir(self.dir)
            with self._lock:
                for old, new in cleaned:
                    self._local.replace(old, new)
                self._cleaner_offset = max(self._cleaner_offset, clean_end)
            for old, new in cleaned:
                old.rename_suffix(DELETED_SUFFIX)
                new.rename_suffix("")
            if cleaned:
                fsync_dir(self.dir)
            for old, _ in cleaned:
                old.delete_files()
            self._write_checkpoints(CLEANER_FILE)
        return True


def _with_record_max_timestamps(buf: bytes | bytearray | memoryview,
                                summary: BatchesSummary) -> dict[int, tuple[int, bytes]]:
    """Batches whose header leaves maxTimestamp unset: position -> (their records' newest timestamp, fixed bytes)."""
    fixed: dict[int, tuple[int, bytes]] = {}
    for pos, h in summary.headers:
        if h.max_timestamp >= 0 or h.is_control:
            continue
        newest = max((r.timestamp for r in decode_batch(buf, pos, verify_crc=False).records), default=-1)
        if newest >= 0:
            copy = bytearray(memoryview(buf)[pos : pos + h.size])
            set_max_timestamp(copy, 0, h.size, newest)
            fixed[pos] = (newest, bytes(copy))
    return fixed


def _epochs_within(entries: Sequence[tuple[int, int]], base: int, end: int) -> tuple[tuple[int, int], ...]:
    """The leader epochs of offsets ``[base, end]``, from a log's ``(epoch, start offset)`` entries."""
    found: list[tuple[int, int]] = []
    for i, (epoch, start) in enumerate(entries):
        nxt = entries[i + 1][1] if i + 1 < len(entries) else None
        if nxt is not None and nxt <= base:
            continue
        if start > end:
            break
        found.append((epoch, max(start, base)))
    return tuple(found)


def _require_keys(buf: bytes | bytearray | memoryview, summary: BatchesSummary) -> None:
    """Compacted topics reject null keys, naming each keyless record, as Kafka does; the one decode on produce."""
    keyless: list[tuple[int, str | None]] = []
    index = 0
    for pos, h in summary.headers:
        if not h.is_control:
            records = decode_batch(buf, pos, verify_crc=False).records
            keyless += [(index + i, KEYLESS_ON_COMPACTED) for i, r in enumerate(records) if r.key is None]
        index += h.record_count
    if keyless:
        raise InvalidRecordError(f"One or more records have been rejected due to {len(keyless)} record errors in "
                                 f"total: {KEYLESS_ON_COMPACTED}", record_errors=tuple(keyless))


KEYLESS_ON_COMPACTED = "Compacted topic cannot accept message without key."


def _retention_time(seg: LogSegment) -> int:
    """A segment's age for retention.ms: its newest timestamp, or when it was opened if none."""
    return seg.max_timestamp if seg.max_timestamp >= 0 else seg.created_ms
