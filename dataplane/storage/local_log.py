"""The local log: a partition's segments and what is done to them (Kafka's ``LocalLog``).

It appends already-validated batches with final offsets, reads whole batches, rolls,
truncates and drops segments, and tracks the log end offset and the recovery point. It
knows nothing of the log start offset, leader epochs or producers: those belong to the
partition :class:`~dataplane.storage.log.Log`, which owns a LocalLog.

Thread-safety: none; the owning Log calls every method under its lock, except
:func:`delete_segment_files`, which fsyncs and so runs after that lock is released.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from dataplane.protocol.errors import KafkaStorageError
from dataplane.protocol.records import BatchHeader, TimestampType, decode_batch
from dataplane.storage.checkpoints import fsync_dir
from dataplane.storage.config import LogConfig
from dataplane.storage.segment import (
    DELETED_SUFFIX,
    INT32_MAX,
    BatchPlacement,
    FileHandle,
    LogSegment,
    SegmentPending,
)
from dataplane.storage.segments import LogSegments


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


class LocalLog:
    """The segments of one partition directory (see the module docstring for ownership)."""

    def __init__(self, directory: Path, config: LogConfig, segments: Sequence[LogSegment], *,
                 recovery_point: int) -> None:
        self.dir = directory
        self.config = config
        self.segments = LogSegments(segments)
        self.next_offset = self.segments.active.next_offset  # the log end offset
        self.recovery_point = min(recovery_point, self.next_offset)  # everything below it was fsynced
        # Bumped by every change of the segment list but a roll, so compaction can tell whether the
        # sealed segments it cleaned are still the log's.
        self.layout_version = 0

    def update_config(self, config: LogConfig) -> None:
        self.config = config
        for s in self.segments:
            s.config = config

    # ------------------------------------------------------------------ append

    def must_roll(self, size: int, first: int, last: int, now: int) -> bool:
        """Whether appending ``size`` bytes holding offsets ``[first, last]`` needs a new segment first.

        The one roll rule (Kafka's ``LogSegment.shouldRoll``), for leader, follower and
        multi-batch appends alike. A non-empty active segment rolls when the append would
        take it past ``segment.bytes``, when an offset would lie more than INT32_MAX above
        its base (index entries hold int32 relative offsets), when an index is full, or
        when it is ``segment.ms`` old. An empty one is never rolled when it can hold the
        batch: only the offset range or a full index force it (a batch larger than
        ``segment.bytes`` was refused earlier), and never onto its own base, which would
        be the same segment again.
        """
        active = self.segments.active
        base = active.base_offset
        index_full = active.offset_index.is_full or active.time_index.is_full
        if active.size == 0:
            return (last - base > INT32_MAX or index_full) and first != base
        return (
            active.size + size > self.config.segment_bytes
            or last - base > INT32_MAX
            or index_full
            or now - active.created_ms >= self.config.segment_ms
        )

    def roll(self, new_base: int, now: int) -> LogSegment | None:
        """Seal the active segment and start one at ``new_base``; None if the active one is empty there.

        An empty active segment with a lower base is sealed and kept (it anchors the log
        start offset). Creating the files does not fsync; the owning Log's next flush syncs
        the directory (with the producer snapshot it takes at every roll).
        """
        active = self.segments.active
        if active.size == 0 and active.base_offset == new_base:
            return None
        active.seal()
        segment = LogSegment(self.dir, new_base, self.config, now_ms=now)
        self.segments.add(segment)
        return segment

    def append(self, data: bytes | bytearray | list[bytes | memoryview],
               placements: list[BatchPlacement], last: int) -> None:
        """Write batches (offsets final, roll already decided) to the active segment."""
        active = self.segments.active
        before = active.size
        try:
            active.append(data, placements)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.ftruncate(active.file.fd, before)
            raise KafkaStorageError(f"append to {active.log_path} failed: {exc}") from exc
        self.next_offset = last + 1

    def append_batch(self, prefix: bytes, rest: memoryview, size: int, last: int, max_ts: int) -> None:
        """The produce fast path's one batch: a new 16-byte prefix plus the client's bytes."""
        active = self.segments.active
        before = active.size
        try:
            active.append_batch(prefix, rest, size, last, max_ts)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.ftruncate(active.file.fd, before)
            active.size = before
            raise KafkaStorageError(f"append to {active.log_path} failed: {exc}") from exc
        self.next_offset = last + 1

    # ------------------------------------------------------------------ read

    def read(self, offset: int, max_bytes: int, upper: int, min_one_batch: bool) -> FileRegion:
        """Whole batches from the one holding ``offset``, below ``upper`` (offset range checked by the caller)."""
        active = self.segments.active
        empty = FileRegion(active.file, active.size, 0, offset, offset)
        if offset >= upper:
            return empty
        target = offset
        for seg in self.segments.from_offset(offset):
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

    def headers(self, start: int, end: int) -> Iterator[BatchHeader]:
        """Headers of the batches holding offsets in ``[start, end)``, in order (the producer state's source)."""
        for seg in self.segments.from_offset(start):
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

    def max_timestamp(self) -> tuple[int, int] | None:
        """(largest timestamp, offset of the first record that has it) over every segment; None if none has one.

        KIP-734 as Kafka answers it since KAFKA-16310: the record's offset, not its batch's last
        offset. Segments know the batch; that one batch is decoded to find the record (under
        LogAppendTime every record has the batch's timestamp, so the batch's first offset).
        """
        best: LogSegment | None = None
        for s in self.segments:
            if s.max_timestamp >= 0 and (best is None or s.max_timestamp > best.max_timestamp):
                best = s
        if best is None:
            return None
        found = best.translate_offset(best.offset_of_max_timestamp)
        if found is None:
            return best.max_timestamp, best.offset_of_max_timestamp
        pos, h = found
        batch = decode_batch(best.pread(pos, h.size))
        if batch.header.timestamp_type == TimestampType.LOG_APPEND_TIME:
            return h.max_timestamp, h.base_offset
        for r in batch.records:
            if r.timestamp == h.max_timestamp:
                return r.timestamp, r.offset
        return h.max_timestamp, h.last_offset  # a header whose max matches no record: trust the header

    def offset_for_timestamp(self, timestamp: int, min_offset: int) -> tuple[int, int] | None:
        """(timestamp, offset) of the first record at or above ``min_offset`` with timestamp ≥ ``timestamp``."""
        for seg in self.segments:
            if seg.max_timestamp < timestamp:
                continue
            found = seg.find_offset_for_timestamp(timestamp)
            if found is None:
                continue
            pos, h = found
            for pos2, h2 in [(pos, h), *seg.scan_headers(pos + h.size)]:
                if h2.max_timestamp < timestamp or h2.last_offset < min_offset:
                    continue
                for r in decode_batch(seg.pread(pos2, h2.size)).records:
                    if r.timestamp >= timestamp and r.offset >= min_offset:
                        return r.timestamp, r.offset
        return None

    # ------------------------------------------------------------------ truncation and deletion

    def truncate_to(self, offset: int) -> list[LogSegment]:
        """Cut everything from the batch holding ``offset`` on (some segment must start at or below it).

        Returns the segments removed whole, already renamed ``.deleted`` here, under the
        lock, because the next roll may reuse their names; :func:`delete_segment_files`
        finishes them.
        """
        doomed = self.segments.take_above(offset)
        for s in doomed:
            s.rename_suffix(DELETED_SUFFIX)
        active = self.segments.active
        active.truncate_to(offset)
        # Kafka's rule: the log end becomes ``offset`` even when it fell inside a batch
        # (the whole batch goes). After a restart the end is re-derived from the bytes.
        active.next_offset = offset
        self.next_offset = offset
        self.recovery_point = min(self.recovery_point, offset)
        self.layout_version += 1
        return doomed

    def truncate_fully(self, offset: int, now: int) -> list[LogSegment]:
        """Drop every segment and restart empty at ``offset``; returns the dropped ones (renamed ``.deleted``).

        The renames happen here, under the lock, because the new segment may take the name of
        an old one.
        """
        doomed = self.segments.take_all()
        for s in doomed:
            s.rename_suffix(DELETED_SUFFIX)
        self.segments.add(LogSegment(self.dir, offset, self.config, now_ms=now))
        self.next_offset = self.recovery_point = offset
        self.layout_version += 1
        return doomed

    def delete_prefix(self, n: int) -> list[LogSegment]:
        """Take the first ``n`` (sealed) segments out of the log; their files stay until :func:`delete_segment_files`.

        Their names are never reused (every later segment starts above them), so the
        renames can wait until the lock is released.
        """
        if n <= 0:
            return []
        doomed = self.segments.take_prefix(n)
        self.layout_version += 1
        return doomed

    def replace(self, old: LogSegment, new: LogSegment) -> None:
        """Compaction's swap: ``new`` holds a subset of ``old``'s batches at the same offsets."""
        new.created_ms = old.created_ms
        self.segments.replace(old, new)
        self.layout_version += 1

    # ------------------------------------------------------------------ durability

    def take_flush_work(self) -> list[tuple[LogSegment, SegmentPending]]:
        """What a flush must sync: segments from the recovery point on, and any with unwritten indexes.

        The active segment's indexes are left for checkpoints, roll and close.
        """
        first = self.segments.from_offset(self.recovery_point)[0].base_offset
        active = self.segments.active
        return [(s, s.take_pending(with_indexes=s is not active)) for s in self.segments
                if s.base_offset >= first or s.has_pending()]

    def take_index_work(self) -> list[tuple[LogSegment, SegmentPending]]:
        """Unwritten index tails of every segment (a checkpoint writes them without fsync)."""
        return [(s, s.take_pending()) for s in self.segments if s.has_pending()]

    def close(self) -> list[tuple[LogSegment, SegmentPending]]:
        """Seal and drop every segment; returns what the caller must still sync (outside the lock)."""
        work = []
        for seg in self.segments.take_all():
            seg.seal()
            work.append((seg, seg.take_pending()))
        return work


def delete_segment_files(directory: Path, segments: Sequence[LogSegment]) -> None:
    """Finish removing segments taken out of the log: ``.deleted`` rename, directory fsync, unlink.

    Called without the log's lock. A crash before the fsync may bring a segment back (the
    retention or truncation that dropped it runs again) or leave ``.deleted`` files, which
    the loader removes; after the fsync the segment is gone for good.
    """
    if not segments:
        return
    for s in segments:
        if s.suffix != DELETED_SUFFIX:
            s.rename_suffix(DELETED_SUFFIX)
    fsync_dir(directory)
    for s in segments:
        s.delete_files()
