"""The partition log: an ordered list of segments behind one lock.

On-disk format of a partition directory (``<topic>-<partition>/``):

* ``<base:020d>.log`` / ``.index`` / ``.timeindex`` — segments, see :mod:`segment`;
* ``recovery-point-offset-checkpoint`` — offset below which everything was fsynced;
* ``log-start-offset-checkpoint`` — first readable offset (DeleteRecords, retention);
* ``leader-epoch-checkpoint`` — epoch → start offset, see :mod:`epoch_cache`;
* ``cleaner-offset-checkpoint`` — first offset compaction has not yet cleaned;
* ``.clean_shutdown`` — present only while the log is closed cleanly; it lets the next
  open skip the recovery scan. It is removed as soon as the log is opened.

Files named ``*.cleaned``, ``*.swap`` and ``*.deleted`` are in-flight multi-file changes;
:meth:`Log.open` finishes or rolls them back (see ``_complete_interrupted_changes``).

Thread-safety: every public method is safe to call from any thread. ``_lock`` guards
the in-memory state and all appends; it is held only for bookkeeping and ``write``
calls, never across an ``fsync``. ``_flush_lock`` serialises flushes and truncations
(lock order: ``_flush_lock`` then ``_lock``), so appends continue while a flush fsyncs
what was written before it started.
"""

from __future__ import annotations

import bisect
import contextlib
import itertools
import os
import struct
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import crc32c as crc32c_module

from dataplane.protocol.errors import (
    CorruptRecordError,
    InvalidRecordError,
    KafkaStorageError,
    MessageTooLargeError,
    OffsetOutOfRangeError,
    RecordListTooLargeError,
    UnexpectedAppendOffsetError,
)
from dataplane.protocol.records import (
    BATCH_HEADER,
    CODEC_MASK,
    CRC_START,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MIN_RECORD_SIZE,
    NO_PRODUCER_ID,
    BatchesSummary,
    BatchHeader,
    Record,
    RecordBatch,
    TimestampType,
    batch_length_at,
    build_batch,
    decode_batch,
    iter_batch_headers,
    set_log_append_time,
    stamp_batch,
    validate_batches,
    validate_single_batch,
)
from dataplane.storage.checkpoints import fsync_dir, read_offset, write_offset
from dataplane.storage.config import LogConfig
from dataplane.storage.epoch_cache import EpochEndOffset, LeaderEpochCache
from dataplane.storage.producer_state import BatchMetadata, ProducerStateManager
from dataplane.storage.segment import (
    INDEX_SUFFIX,
    INT32_MAX,
    LOG_SUFFIX,
    TIMEINDEX_SUFFIX,
    BatchPlacement,
    FileHandle,
    LogSegment,
    segment_name,
)

RECOVERY_POINT_FILE = "recovery-point-offset-checkpoint"
LOG_START_FILE = "log-start-offset-checkpoint"
EPOCH_FILE = "leader-epoch-checkpoint"
CLEANER_FILE = "cleaner-offset-checkpoint"
CLEAN_SHUTDOWN_FILE = ".clean_shutdown"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
DELETED_SUFFIX = ".deleted"

# ListOffsets special timestamps.
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3


_PREFIX = struct.Struct(">q" "i" "i")  # baseOffset, batchLength, partitionLeaderEpoch
_unpack_header = BATCH_HEADER.unpack_from
_crc32c = crc32c_module.crc32c


def _now_ms() -> int:
    return int(time.time() * 1000)


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
class FileRegion:
    """Whole batches at ``[position, position + length)`` of an open file, ready for sendfile.

    The region holds a reference to the file, so it stays readable even if its segment is
    deleted or compacted meanwhile. A truncation (follower catching up after a leader
    change) may shorten the file: a reader then gets fewer bytes, never other bytes.
    """

    file: FileHandle
    position: int
    length: int
    first_offset: int  # base offset of the first batch (the requested offset if empty)
    next_offset: int  # offset after the last batch (where the next read continues)

    @property
    def fd(self) -> int:
        return self.file.fd

    def read_bytes(self) -> bytes:
        return os.pread(self.file.fd, self.length, self.position) if self.length else b""


@dataclass(frozen=True, slots=True)
class TimestampAndOffset:
    timestamp: int
    offset: int
    leader_epoch: int


@dataclass(frozen=True, slots=True)
class CleanResult:
    segments_rewritten: int
    bytes_before: int
    bytes_after: int


class Log:
    """A partition's log.

    On disk: one directory of segments (``<base:020d>.log/.index/.timeindex``), four
    checkpoint files and a ``.clean_shutdown`` marker (details in the module docstring).
    Thread-safety: every public method is thread-safe; ``_lock`` is never held across an
    fsync, ``_flush_lock`` serialises flushes and truncations (taken before ``_lock``).
    """

    def __init__(self, directory: Path, config: LogConfig, *, time_ms: Callable[[], int] = _now_ms) -> None:
        self.dir = directory
        self.config = config
        self._fast_path = not (config.log_append_time or config.compact)
        self._time = time_ms
        self._lock = threading.RLock()
        self._flush_lock = threading.Lock()
        self._segments: list[LogSegment] = []
        self._bases: list[int] = []
        self._leo = 0
        self._log_start = 0
        self._recovery_point = 0
        self._cleaner_offset = 0
        self._closed = False
        self._layout_version = 0
        self._last_flush_ms = time_ms()
        self.had_clean_shutdown = False
        self.recovered_bytes = 0
        directory.mkdir(parents=True, exist_ok=True)
        self._epochs = LeaderEpochCache(directory / EPOCH_FILE)
        self._producers = ProducerStateManager(directory)
        self._load()

    @classmethod
    def open(cls, directory: Path, config: LogConfig | None = None, *,
             time_ms: Callable[[], int] = _now_ms) -> Log:
        return cls(directory, config or LogConfig(), time_ms=time_ms)

    # ------------------------------------------------------------------ loading

    def _load(self) -> None:
        marker = self.dir / CLEAN_SHUTDOWN_FILE
        clean = marker.exists()
        self.had_clean_shutdown = clean
        must_recover = self._complete_interrupted_changes()
        now = self._time()
        rp = read_offset(self.dir / RECOVERY_POINT_FILE) or 0
        ls = read_offset(self.dir / LOG_START_FILE) or 0
        bases = sorted(int(p.name[: -len(LOG_SUFFIX)]) for p in self.dir.glob("*" + LOG_SUFFIX)
                       if p.name[: -len(LOG_SUFFIX)].isdigit())
        self._remove_orphan_indexes(set(bases))
        segments: list[LogSegment] = []
        for i, base in enumerate(bases):
            seg = LogSegment(self.dir, base, self.config, now_ms=now)
            segments.append(seg)
            end = bases[i + 1] if i + 1 < len(bases) else None
            if clean and base not in must_recover:
                seg.load(now)
            elif base in must_recover or end is None or end > rp:
                self.recovered_bytes += seg.size
                if seg.recover() > 0:
                    # Everything after a torn or corrupt batch is unreachable: offsets must stay dense.
                    for later in bases[i + 1 :]:
                        LogSegment(self.dir, later, self.config, now_ms=now).delete_files()
                    break
            else:
                seg.load(now)
        if not segments:
            segments.append(LogSegment(self.dir, ls, self.config, now_ms=now))
        self._segments = segments
        self._bases = [s.base_offset for s in segments]
        self._leo = segments[-1].next_offset
        self._log_start = max(ls, segments[0].base_offset)
        if self._log_start > self._leo:
            self._truncate_fully_locked(self._log_start)
        # Recovered bytes are not fsynced here (that would rewrite a page cache's worth of
        # data at start-up); the recovery point stays put, so a second crash rescans them.
        self._recovery_point = min(rp, self._leo)
        self._cleaner_offset = min(max(read_offset(self.dir / CLEANER_FILE) or 0, self._log_start), self._leo)
        self._epochs.truncate_from_end(self._leo)
        self._epochs.truncate_from_start(self._log_start)
        self._producers.load(self._log_start, self._leo, self._headers_locked)
        if clean:
            marker.unlink()
            fsync_dir(self.dir)

    def _complete_interrupted_changes(self) -> set[int]:
        """Finish or roll back renames a crash interrupted; return bases that need a rebuild.

        ``.cleaned``: compaction output not yet complete → delete. ``.deleted``: already
        removed from the log → delete. ``.log.swap``: complete, fsynced compaction output →
        it replaces the segment of the same base (old files deleted, indexes rebuilt).
        """
        rebuild: set[int] = set()
        for p in list(self.dir.iterdir()):
            name = p.name
            if name.endswith((CLEANED_SUFFIX, DELETED_SUFFIX, ".tmp")):
                p.unlink()
        for p in list(self.dir.glob("*" + LOG_SUFFIX + SWAP_SUFFIX)):
            base = int(p.name.split(".")[0])
            name = segment_name(base)
            for ext in (LOG_SUFFIX, INDEX_SUFFIX, TIMEINDEX_SUFFIX):
                with contextlib.suppress(FileNotFoundError):
                    (self.dir / f"{name}{ext}").unlink()
            os.replace(p, self.dir / f"{name}{LOG_SUFFIX}")
            rebuild.add(base)
        for p in list(self.dir.glob("*" + SWAP_SUFFIX)):
            p.unlink()  # index swaps: indexes are rebuilt from the swapped-in log
        if rebuild:
            fsync_dir(self.dir)
        return rebuild

    def _remove_orphan_indexes(self, bases: set[int]) -> None:
        for ext in (INDEX_SUFFIX, TIMEINDEX_SUFFIX):
            for p in self.dir.glob("*" + ext):
                stem = p.name[: -len(ext)]
                if stem.isdigit() and int(stem) not in bases:
                    p.unlink()

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
        return self._leo

    @property
    def recovery_point(self) -> int:
        return self._recovery_point

    @property
    def size_in_bytes(self) -> int:
        with self._lock:
            return sum(s.size for s in self._segments)

    @property
    def segment_base_offsets(self) -> tuple[int, ...]:
        with self._lock:
            return tuple(self._bases)

    @property
    def latest_epoch(self) -> int:
        with self._lock:
            return self._epochs.latest_epoch

    def epoch_entries(self) -> tuple[tuple[int, int], ...]:
        with self._lock:
            return tuple((e.epoch, e.start_offset) for e in self._epochs.entries)

    def end_offset_for_epoch(self, epoch: int) -> EpochEndOffset:
        with self._lock:
            return self._epochs.end_offset_for(epoch, self._leo)

    def begin_leader_epoch(self, epoch: int) -> None:
        """Becoming leader at ``epoch``: it starts at the log end (KIP-101), even before anything is appended.

        Without the entry, a follower asking for the end of an epoch this leader
        never wrote in would get UNDEFINED instead of the boundary it must truncate to.
        """
        with self._lock:
            self._check_open()
            if epoch > self._epochs.latest_epoch:
                self._epochs.assign(epoch, self._leo)

    def ms_since_last_flush(self) -> int:
        return self._time() - self._last_flush_ms

    def update_config(self, config: LogConfig) -> None:
        with self._lock:
            self.config = config
            self._fast_path = not (config.log_append_time or config.compact)
            for s in self._segments:
                s.config = config

    # ------------------------------------------------------------------ append

    def append_as_leader(self, batches: bytes | bytearray | memoryview, leader_epoch: int) -> AppendInfo:
        """Validate client batches, assign offsets and the leader epoch, and append them."""
        n = len(batches)
        if self._fast_path and n >= HEADER_SIZE and batch_length_at(batches) + LOG_OVERHEAD == n:
            return self._append_single_as_leader(batches, leader_epoch)
        summary = validate_batches(batches, strict_offsets=True)
        self._check_sizes(summary)
        if self.config.compact:
            _require_keys(batches, summary)
        idempotent = [h for _, h in summary.headers if h.producer_id != NO_PRODUCER_ID]
        if idempotent and len(summary.headers) > 1:
            raise InvalidRecordError("an idempotent produce must carry exactly one batch per partition")
        log_append = self.config.log_append_time
        mv = memoryview(batches)
        with self._lock:
            self._check_open()
            if idempotent:
                duplicate = self._producers.check(idempotent[0])
                if duplicate is not None:
                    return AppendInfo.of_duplicate(duplicate, self._log_start)
            now = self._time()
            first = offset = self._leo
            placements: list[BatchPlacement] = []
            # The batches go to disk as they came: only a new 16-byte prefix per batch
            # (baseOffset, batchLength, partitionLeaderEpoch) is written in front of the
            # client's bytes with pwritev, so the payload is never copied in Python.
            iov: list[bytes | memoryview] = []
            max_ts, offset_of_max = -1, -1
            for pos, h in summary.headers:
                last = offset + h.last_offset_delta
                ts = h.max_timestamp
                if log_append:
                    copy = bytearray(mv[pos : pos + h.size])
                    stamp_batch(copy, 0, offset, leader_epoch)
                    set_log_append_time(copy, 0, h.size, now)
                    iov.append(bytes(copy))
                    ts = now
                else:
                    iov.append(_PREFIX.pack(offset, h.batch_length, leader_epoch))
                    iov.append(mv[pos + _PREFIX.size : pos + h.size])
                if ts > max_ts:
                    max_ts, offset_of_max = ts, last
                placements.append(BatchPlacement(pos, h.size, last, ts))
                offset = last + 1
            self._append_locked(iov, placements, first, offset - 1, now, summary.total_size)
            if idempotent:
                self._producers.update(idempotent[0], first)
            if leader_epoch > self._epochs.latest_epoch:
                self._epochs.assign(leader_epoch, first)
            info = AppendInfo(first, offset - 1, max_ts, offset_of_max, now if log_append else -1,
                              self._log_start, offset - first, summary.total_size)
            need_flush = self._leo - self._recovery_point >= self.config.flush_messages
        if need_flush:
            self.flush()
        return info

    def _append_single_as_leader(
        self, batch: bytes | bytearray | memoryview, leader_epoch: int
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
        with self._lock:
            if self._closed:
                self._check_open()
            if header is not None:
                duplicate = self._producers.check(header)
                if duplicate is not None:
                    return AppendInfo.of_duplicate(duplicate, self._log_start)
            first = self._leo
            last = first + lod
            now = self._time()
            active = self._segments[-1]
            if (
                active.size + n > config.segment_bytes
                or last - active.base_offset > INT32_MAX
                or active.index_full
                or (active.size > 0 and now - active.created_ms >= config.segment_ms)
            ) and not (active.size == 0 and active.can_hold(n, last)):
                active = self._roll_locked(first, now)
            before = active.size
            try:
                active.append_batch(_PREFIX.pack(first, batch_length, leader_epoch), rest, n, last, max_ts)
            except OSError as exc:
                with contextlib.suppress(OSError):
                    os.ftruncate(active.file.fd, before)
                active.size = before
                raise KafkaStorageError(f"append to {active.log_path} failed: {exc}") from exc
            self._leo = last + 1
            if header is not None:
                self._producers.update(header, first)
            if leader_epoch > self._epochs.latest_epoch:
                self._epochs.assign(leader_epoch, first)
            info = AppendInfo(first, last, max_ts, last, -1, self._log_start, lod + 1, n)
            need_flush = last + 1 - self._recovery_point >= config.flush_messages
        if need_flush:
            self.flush()
        return info

    def append_as_follower(self, batches: bytes | bytearray | memoryview) -> AppendInfo:
        """Append replicated batches keeping their offsets and epochs."""
        summary = validate_batches(batches, strict_offsets=False)
        self._check_sizes(summary)
        headers = [h for _, h in summary.headers]
        for prev, nxt in itertools.pairwise(headers):
            if nxt.base_offset < prev.next_offset:
                raise UnexpectedAppendOffsetError("batch offsets are not increasing")
        with self._lock:
            self._check_open()
            first = headers[0].base_offset
            if first < self._leo:
                raise UnexpectedAppendOffsetError(f"first offset {first} is below log end offset {self._leo}")
            placements = []
            max_ts, offset_of_max = -1, -1
            for pos, h in summary.headers:
                placements.append(BatchPlacement(pos, h.size, h.last_offset, h.max_timestamp))
                if h.max_timestamp > max_ts:
                    max_ts, offset_of_max = h.max_timestamp, h.last_offset
            last = headers[-1].last_offset
            data = batches if not isinstance(batches, memoryview) else bytes(batches)
            self._append_locked(data, placements, first, last, self._time(), summary.total_size)
            for h in headers:
                if h.partition_leader_epoch >= 0:
                    self._epochs.assign(h.partition_leader_epoch, h.base_offset)
                if h.producer_id != NO_PRODUCER_ID:
                    self._producers.update(h, h.base_offset)
            info = AppendInfo(first, last, max_ts, offset_of_max, -1, self._log_start,
                              last + 1 - first, summary.total_size)
            need_flush = self._leo - self._recovery_point >= self.config.flush_messages
        if need_flush:
            self.flush()
        return info

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

    def _append_locked(self, data: bytes | bytearray | list[bytes | memoryview],
                       placements: list[BatchPlacement], first: int, last: int, now: int,
                       size: int) -> None:
        active = self._segments[-1]
        if (
            not active.can_hold(size, last)
            or first - active.base_offset > INT32_MAX
            or (active.size > 0 and now - active.created_ms >= self.config.segment_ms)
        ):
            active = self._roll_locked(first, now)
        before = active.size
        try:
            active.append(data, placements)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.ftruncate(active.file.fd, before)
            raise KafkaStorageError(f"append to {active.log_path} failed: {exc}") from exc
        self._leo = last + 1

    def roll(self) -> None:
        """Start a new active segment at the log end offset (no-op if the active one is empty)."""
        with self._lock:
            self._check_open()
            self._roll_locked(self._leo, self._time())

    def _roll_locked(self, new_base: int, now: int) -> LogSegment:
        active = self._segments[-1]
        if active.size == 0 and active.base_offset == new_base:
            return active
        # An empty active segment with a lower base stays (it anchors the log start offset).
        active.seal()
        seg = LogSegment(self.dir, new_base, self.config, now_ms=now)
        self._segments = [*self._segments, seg]
        self._bases = [*self._bases, new_base]
        # The producer state as of the new segment's base (nothing lies between the log end and it),
        # so a restart or a truncation rescans at most one segment.
        self._producers.take_snapshot(new_base)
        return seg

    # ------------------------------------------------------------------ read

    def read(self, offset: int, max_bytes: int, max_offset: int | None = None, *,
             min_one_batch: bool = True) -> FileRegion:
        """Whole batches starting at the one containing ``offset``, below ``max_offset``.

        Returns at least one whole batch (even above ``max_bytes``) unless
        ``min_one_batch`` is false; an empty region at the log end.
        """
        with self._lock:
            self._check_open()
            if offset < self._log_start or offset > self._leo:
                raise OffsetOutOfRangeError(
                    f"offset {offset} outside [{self._log_start}, {self._leo}] of {self.dir.name}"
                )
            upper = self._leo if max_offset is None else min(max_offset, self._leo)
            empty = FileRegion(self._segments[-1].file, self._segments[-1].size, 0, offset, offset)
            if offset >= upper:
                return empty
            i = max(0, bisect.bisect_right(self._bases, offset) - 1)
            target = offset
            for seg in self._segments[i:]:
                found = seg.translate_offset(target)
                if found is None:
                    continue
                pos, h = found
                if h.last_offset >= upper:  # upper inside or before this batch
                    return empty
                length = h.size
                if length > max_bytes and not min_one_batch:
                    return FileRegion(seg.file, pos, 0, h.base_offset, offset)
                next_offset = h.next_offset
                scan_from = pos + h.size
                # Jump over whole batches using the index (entries are batch starts whose
                # last offsets are known), then scan only the last few headers.
                hint = seg.offset_index.floor_entry(pos + max_bytes, upper - 1)
                if hint is not None and hint[1] > scan_from:
                    scan_from = hint[1]
                    length = scan_from - pos
                    next_offset = hint[0]  # placeholder; replaced by the batch header below
                    first_scanned = True
                else:
                    first_scanned = False
                for _, nxt in seg.scan_headers(scan_from):
                    if first_scanned:
                        next_offset = nxt.base_offset
                        first_scanned = False
                    if nxt.last_offset >= upper or length + nxt.size > max_bytes:
                        break
                    length += nxt.size
                    next_offset = nxt.next_offset
                return FileRegion(seg.file, pos, length, h.base_offset, next_offset)
            return empty

    def read_batches(self, offset: int, max_bytes: int = 1 << 30,
                     max_offset: int | None = None) -> list[RecordBatch]:
        """Decoded batches from :meth:`read` (tools and tests, not the fetch path)."""
        data = self.read(offset, max_bytes, max_offset).read_bytes()
        return [decode_batch(data, pos) for pos, _ in iter_batch_headers(data, allow_partial_tail=True)]

    def read_records(self, offset: int, max_offset: int | None = None) -> Iterator[Record]:
        """Every record from ``offset`` (inclusive) to ``max_offset`` or the end, decoded."""
        pos = offset
        end = self._leo if max_offset is None else max_offset
        while pos < end:
            batches = self.read_batches(pos, 1 << 20, end)
            if not batches:
                return
            for b in batches:
                for r in b.records:
                    if offset <= r.offset < end:
                        yield r
                pos = max(pos, b.header.next_offset)

    def _headers_locked(self, start: int, end: int) -> Iterator[BatchHeader]:
        """Headers of the batches holding offsets in ``[start, end)``, in order (the producer state's source)."""
        for seg in self._segments_from(start):
            if seg.base_offset >= end:
                return
            found = seg.translate_offset(start) if seg.base_offset <= start else None
            position = found[0] if found is not None else 0
            if seg.base_offset <= start and found is None:
                continue
            for _, h in seg.scan_headers(position):
                if h.base_offset >= end:
                    return
                yield h

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
                return TimestampAndOffset(-1, self._leo, self._epochs.latest_epoch)
            if timestamp == MAX_TIMESTAMP:
                best: tuple[int, int] | None = None
                for s in self._segments:
                    if s.max_timestamp >= 0 and (best is None or s.max_timestamp > best[0]):
                        best = (s.max_timestamp, s.offset_of_max_timestamp)
                if best is None:
                    return None
                return TimestampAndOffset(best[0], best[1], self._epoch_for(best[1]))
            for seg in self._segments:
                if seg.max_timestamp < timestamp:
                    continue
                found = seg.find_offset_for_timestamp(timestamp)
                if found is None:
                    continue
                pos, h = found
                for pos2, h2 in [(pos, h), *seg.scan_headers(pos + h.size)]:
                    if h2.max_timestamp < timestamp or h2.last_offset < self._log_start:
                        continue
                    batch = decode_batch(seg.pread(pos2, h2.size))
                    for r in batch.records:
                        if r.timestamp >= timestamp and r.offset >= self._log_start:
                            return TimestampAndOffset(r.timestamp, r.offset, self._epoch_for(r.offset))
            return None

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
                target = self._leo if up_to is None else min(up_to, self._leo)
                if target <= self._recovery_point and up_to is not None:
                    return
                first = self._segments_from(self._recovery_point)[0].base_offset
                active = self._segments[-1]
                work = [(s, s.take_pending(with_indexes=s is not active)) for s in self._segments
                        if s.base_offset >= first or s.has_pending()]
                snapshots = self._producers.take_unsynced()
            for seg, pending in work:
                seg.sync(pending)
            ProducerStateManager.sync_snapshots(snapshots)
            with self._lock:
                self._recovery_point = max(self._recovery_point, target)
                self._last_flush_ms = self._time()

    def _segments_from(self, offset: int) -> list[LogSegment]:
        i = max(0, bisect.bisect_right(self._bases, offset) - 1)
        return self._segments[i:]

    def checkpoint(self) -> None:
        """Persist recovery point and log start offset (the manager calls this periodically)."""
        with self._flush_lock:
            with self._lock:
                pending = [(s, s.take_pending()) for s in self._segments if s.has_pending()]
            for seg, p in pending:
                seg.sync(p, fsync_data=False)  # data durability is flush()'s job
            write_offset(self.dir / RECOVERY_POINT_FILE, self._recovery_point)
            write_offset(self.dir / LOG_START_FILE, self._log_start)

    def close(self) -> None:
        """Flush, checkpoint and mark a clean shutdown; readers' regions stay readable."""
        with self._flush_lock, self._lock:
            if self._closed:
                return
            for seg in self._segments:
                seg.seal()
                seg.flush()
            self._producers.take_snapshot(self._leo, sync=True)
            self._recovery_point = self._leo
            write_offset(self.dir / RECOVERY_POINT_FILE, self._recovery_point)
            write_offset(self.dir / LOG_START_FILE, self._log_start)
            write_offset(self.dir / CLEANER_FILE, self._cleaner_offset)
            (self.dir / CLEAN_SHUTDOWN_FILE).touch()
            fsync_dir(self.dir)
            self._closed = True
            self._segments = []

    def close_unclean(self) -> None:
        """Drop the log without flushing or marking (tests and the broker's abort path)."""
        with self._lock:
            self._closed = True
            self._segments = []

    # ------------------------------------------------------------------ truncation

    def truncate_to(self, offset: int) -> None:
        """Remove every batch whose last offset ≥ ``offset``; the log end becomes ``offset``."""
        with self._flush_lock, self._lock:
            self._check_open()
            if offset >= self._leo:
                return
            if offset < self._log_start:
                self._truncate_fully_locked(offset)
                return
            keep = [s for s in self._segments if s.base_offset <= offset]
            if not keep:
                self._truncate_fully_locked(offset)
                return
            doomed = [s for s in self._segments if s.base_offset > offset]
            self._segments = keep
            self._bases = [s.base_offset for s in keep]
            keep[-1].truncate_to(offset)
            # Kafka's rule: the log end becomes ``offset`` even when it fell inside a batch
            # (the whole batch goes). After a restart the end is re-derived from the bytes.
            keep[-1].next_offset = offset
            self._leo = offset
            self._recovery_point = min(self._recovery_point, self._leo)
            self._cleaner_offset = min(self._cleaner_offset, self._leo)
            self._epochs.truncate_from_end(self._leo)
            self._layout_version += 1
            write_offset(self.dir / RECOVERY_POINT_FILE, self._recovery_point)
            self._delete_segments(doomed)
            # Kafka's truncateTo: snapshots above the new end go, the state comes back from the log.
            self._producers.load(self._log_start, self._leo, self._headers_locked)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Discard everything; the log restarts empty at ``offset``."""
        with self._flush_lock, self._lock:
            self._check_open()
            self._truncate_fully_locked(offset)

    def _truncate_fully_locked(self, offset: int) -> None:
        doomed = self._segments
        self._segments = []
        self._bases = []
        self._delete_segments(doomed)
        seg = LogSegment(self.dir, offset, self.config, now_ms=self._time())
        self._segments = [seg]
        self._bases = [offset]
        self._leo = self._log_start = self._recovery_point = self._cleaner_offset = offset
        self._epochs.clear()
        self._producers.clear()
        self._layout_version += 1
        write_offset(self.dir / RECOVERY_POINT_FILE, offset)
        write_offset(self.dir / LOG_START_FILE, offset)

    def _delete_segments(self, segs: list[LogSegment]) -> None:
        """Rename to ``.deleted`` (so a crash finishes the job), then unlink."""
        if not segs:
            return
        for s in segs:
            s.rename_suffix(DELETED_SUFFIX)
        fsync_dir(self.dir)
        for s in segs:
            s.delete_files()

    # ------------------------------------------------------------------ retention

    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords: advance the log start offset (persisted) and drop whole segments below it."""
        with self._lock:
            self._check_open()
            if offset > self._leo or offset < 0:
                raise OffsetOutOfRangeError(f"cannot delete records before {offset}: log end is {self._leo}")
            if offset > self._log_start:
                self._log_start = offset
                self._cleaner_offset = max(self._cleaner_offset, offset)
                self._epochs.truncate_from_start(offset)
                write_offset(self.dir / LOG_START_FILE, offset)
                self._delete_prefix(self._breached_prefix())
            return self._log_start

    def _breached_prefix(self) -> int:
        n = 0
        while n + 1 < len(self._segments) and self._bases[n + 1] <= self._log_start:
            n += 1
        return n

    def delete_old_segments(self) -> int:
        """Retention by log start, ``retention.ms`` and ``retention.bytes``; never the active segment."""
        with self._lock:
            if self._closed:
                return 0
            n = self._breached_prefix()
            sealed = len(self._segments) - 1
            if self.config.delete:
                if self.config.retention_ms >= 0:
                    horizon = self._time() - self.config.retention_ms
                    while n < sealed and _retention_time(self._segments[n]) < horizon:
                        n += 1
                if self.config.retention_bytes >= 0:
                    total = sum(s.size for s in self._segments[n:])
                    while n < sealed and total - self._segments[n].size >= self.config.retention_bytes:
                        total -= self._segments[n].size
                        n += 1
            self._delete_prefix(n)
            return n

    def _delete_prefix(self, n: int) -> None:
        if n <= 0:
            return
        doomed = self._segments[:n]
        self._segments = self._segments[n:]
        self._bases = self._bases[n:]
        if self._bases[0] > self._log_start:
            self._log_start = self._bases[0]
            self._epochs.truncate_from_start(self._log_start)
            write_offset(self.dir / LOG_START_FILE, self._log_start)
        self._cleaner_offset = max(self._cleaner_offset, self._log_start)
        self._layout_version += 1
        self._delete_segments(doomed)
        self._producers.prune_below(self._bases[0])

    # ------------------------------------------------------------------ compaction

    def dirty_ratio(self) -> float:
        with self._lock:
            sealed = self._segments[:-1]
            total = sum(s.size for s in sealed)
            if not total:
                return 0.0
            dirty = sum(s.size for s in sealed if s.next_offset > self._cleaner_offset)
            return dirty / total

    def compact(self, *, max_map_keys: int = 4_000_000) -> CleanResult | None:
        """Keep the newest record per key in sealed segments, preserving offsets.

        Runs mostly without the lock: segments are snapshotted, cleaned into ``.cleaned``
        files, and swapped in under the lock only if the log layout did not change.
        The key map covers whole dirty segments until it holds ``max_map_keys`` keys
        (Kafka's dedupe-buffer bound); the rest waits for the next pass.
        """
        with self._lock:
            if self._closed or not self.config.compact or len(self._segments) < 2:
                return None
            snapshot = [(s, s.size) for s in self._segments[:-1]]
            first_dirty = max(self._cleaner_offset, self._log_start)
            dirty_end = self._segments[-1].base_offset
            version = self._layout_version
            now = self._time()
            delete_horizon = now - self.config.delete_retention_ms
        if first_dirty >= dirty_end:
            return None
        offset_map: dict[bytes, int] = {}
        for i, (seg, size) in enumerate(snapshot):
            if seg.next_offset <= first_dirty:
                continue
            if len(offset_map) >= max_map_keys and seg.base_offset > first_dirty:
                dirty_end = seg.base_offset  # map full: clean up to here this time
                snapshot = snapshot[:i]
                break
            for batch in _segment_batches(seg, size):
                if batch.header.is_control:
                    continue
                for r in batch.records:
                    if r.key is not None and r.offset >= first_dirty:
                        offset_map[r.key] = r.offset
        outputs: list[tuple[LogSegment, LogSegment]] = []
        before = after = 0
        try:
            for seg, size in snapshot:
                drop_tombstones = seg.max_timestamp < delete_horizon
                out = bytearray()
                placements: list[BatchPlacement] = []
                changed = False
                data = seg.pread(0, size)
                for pos, h in iter_batch_headers(data):
                    raw = data[pos : pos + h.size]
                    if h.is_control:
                        kept_raw: bytes | None = raw
                    else:
                        kept_raw = _filter_batch(decode_batch(raw), raw, offset_map, drop_tombstones)
                    if kept_raw is not raw:
                        changed = True
                    if kept_raw is None:
                        continue
                    kh = BatchHeader.parse(kept_raw)
                    placements.append(BatchPlacement(len(out), kh.size, kh.last_offset, kh.max_timestamp))
                    out += kept_raw
                if not changed:
                    continue
                cleaned = LogSegment(
                    self.dir, seg.base_offset, self.config, now_ms=now, suffix=CLEANED_SUFFIX
                )
                if cleaned.size or len(cleaned.offset_index) or len(cleaned.time_index):
                    os.ftruncate(cleaned.file.fd, 0)
                    cleaned.size = 0
                    cleaned.offset_index.reset()
                    cleaned.time_index.reset()
                cleaned.append(out, placements)
                cleaned.seal()
                cleaned.flush()
                outputs.append((seg, cleaned))
                before += size
                after += len(out)
        except BaseException:
            for _, c in outputs:
                c.delete_files()
            raise
        with self._lock:
            if self._closed or version != self._layout_version:
                for _, c in outputs:
                    c.delete_files()
                return None
            doomed = []
            for _, new in outputs:
                new.rename_suffix(SWAP_SUFFIX)
            fsync_dir(self.dir)
            for old, new in outputs:
                old.rename_suffix(DELETED_SUFFIX)
                new.rename_suffix("")
                i = self._segments.index(old)
                new.created_ms = old.created_ms
                self._segments = [*self._segments[:i], new, *self._segments[i + 1 :]]
                doomed.append(old)
            fsync_dir(self.dir)
            self._cleaner_offset = max(self._cleaner_offset, dirty_end)
            write_offset(self.dir / CLEANER_FILE, self._cleaner_offset)
            self._layout_version += 1
        for old in doomed:
            old.delete_files()
        return CleanResult(len(outputs), before, after)


def _require_keys(buf: bytes | bytearray | memoryview, summary: BatchesSummary) -> None:
    """Compacted topics reject null keys (Kafka does too); this is the one decode on produce."""
    for pos, h in summary.headers:
        if h.is_control:
            continue
        if any(r.key is None for r in decode_batch(buf, pos, verify_crc=False).records):
            raise InvalidRecordError("compacted topic cannot accept a record without a key")


def _retention_time(seg: LogSegment) -> int:
    """A segment's age for retention.ms: its newest timestamp, or when it was opened if none."""
    return seg.max_timestamp if seg.max_timestamp >= 0 else seg.created_ms


def _segment_batches(seg: LogSegment, size: int) -> Iterator[RecordBatch]:
    data = seg.pread(0, size)
    for pos, _ in iter_batch_headers(data):
        yield decode_batch(data, pos)


def _filter_batch(batch: RecordBatch, raw: bytes, offset_map: dict[bytes, int],
                  drop_tombstones: bool) -> bytes | None:
    """The batch bytes to keep: ``raw`` if unchanged, a rebuilt batch, or None if empty."""
    kept = []
    for r in batch.records:
        if r.key is not None:
            latest = offset_map.get(r.key)
            if latest is not None and latest > r.offset:
                continue
            if r.value is None and drop_tombstones:
                continue
        kept.append(r)
    if len(kept) == len(batch.records):
        return raw
    if not kept:
        return None
    h = batch.header
    log_append = h.timestamp_type == TimestampType.LOG_APPEND_TIME
    return build_batch(
        kept,
        base_offset=h.base_offset,
        compression=h.compression,
        timestamp_type=h.timestamp_type,
        producer_id=h.producer_id,
        producer_epoch=h.producer_epoch,
        base_sequence=h.base_sequence,
        partition_leader_epoch=h.partition_leader_epoch,
        is_transactional=h.is_transactional,
        last_offset_delta=h.last_offset_delta,
        base_timestamp=h.base_timestamp,
        max_timestamp=h.max_timestamp if log_append else None,
    )
