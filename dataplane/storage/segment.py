"""One log segment: a ``.log`` file of whole batches plus its two sparse indexes.

On-disk format: ``<base:020d>.log`` holds RecordBatch v2 batches back to back, exactly as
the log stored them; ``.index`` and ``.timeindex`` as described in :mod:`index`. Optional
name suffixes mark multi-file state changes: ``.cleaned`` (compaction output being
written), ``.swap`` (complete compaction output about to replace a segment),
``.deleted`` (removed from the log, to be unlinked).

Index rule (Kafka's, applied identically by append and recovery so rebuilt indexes are
byte-equal): before writing a batch, if more than ``index.interval.bytes`` were written
since the last entry, add ``(batch.lastOffset → batch position)`` to the offset index and
``(max timestamp so far → its offset)`` to the time index; sealing the segment adds a last
time-index entry for the segment maximum.

Thread-safety: none; the owning Log serialises mutation. Reads through a FileHandle
(``os.pread``/``sendfile``) are safe against concurrent appends because the Log only
hands out positions below the size it has published.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

from dataplane.protocol.errors import CorruptRecordError
from dataplane.protocol.records import (
    HEADER_SIZE,
    MIN_BATCH_LENGTH,
    BatchHeader,
    check_batch,
)
from dataplane.storage.config import LogConfig
from dataplane.storage.index import OffsetIndex, TimeIndex

INT32_MAX = 2**31 - 1
LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIMEINDEX_SUFFIX = ".timeindex"
# Multi-file changes in flight (Kafka's suffixes); the loader finishes or rolls them back.
CLEANED_SUFFIX = ".cleaned"  # compaction output being written
SWAP_SUFFIX = ".swap"  # complete, fsynced compaction output about to replace its segment
DELETED_SUFFIX = ".deleted"  # removed from the log, to be unlinked
SCAN_CHUNK = 4096
RECOVER_CHUNK = 8 * 1024 * 1024
_IOV_MAX = 1024
IndexPending = tuple[int, bytes, int] | None  # (position, bytes, new length) of an index tail
SegmentPending = tuple[int, IndexPending, IndexPending]  # (data size to fsync, offset index, time index)


def segment_name(base_offset: int) -> str:
    return f"{base_offset:020d}"


class FileHandle:
    """An open fd that stays valid until the last holder drops it.

    File regions handed to readers keep a reference, so a segment deleted (unlinked)
    while a fetch is being sent still reads the old bytes; the fd closes when both the
    segment and every region let go (CPython refcounting makes this prompt).
    """

    __slots__ = ("__weakref__", "fd", "path")

    def __init__(self, path: Path, flags: int) -> None:
        self.path = path
        self.fd: int = os.open(path, flags, 0o644)

    def close(self) -> None:
        if self.fd >= 0:
            fd, self.fd = self.fd, -1
            os.close(fd)

    def __del__(self) -> None:
        with contextlib.suppress(OSError):
            self.close()


class BatchPlacement(NamedTuple):
    """Where an appended batch lands (offsets already final). A tuple: one per batch, hot path."""

    position: int  # relative to the start of the appended data
    size: int
    last_offset: int
    max_timestamp: int


class LogSegment:
    """A log file plus its two indexes.

    On disk: ``<base:020d>.log`` (v2 batches back to back, as stored), ``.index`` and
    ``.timeindex`` (see :mod:`index`), optionally suffixed ``.cleaned``/``.swap``/``.deleted``.
    Thread-safety: none; a single-threaded primitive that the owning Log serialises.
    """

    def __init__(
        self, directory: Path, base_offset: int, config: LogConfig, *, now_ms: int, suffix: str = ""
    ) -> None:
        self.dir = directory
        self.base_offset = base_offset
        self.config = config
        self.suffix = suffix
        name = segment_name(base_offset)
        self.file = FileHandle(directory / f"{name}{LOG_SUFFIX}{suffix}", os.O_RDWR | os.O_CREAT)
        self.size = os.fstat(self.file.fd).st_size
        self.offset_index = OffsetIndex(
            directory / f"{name}{INDEX_SUFFIX}{suffix}", base_offset, config.segment_index_bytes
        )
        self.time_index = TimeIndex(
            directory / f"{name}{TIMEINDEX_SUFFIX}{suffix}", base_offset, config.segment_index_bytes
        )
        self.next_offset = base_offset
        self.max_timestamp = -1
        self.offset_of_max_timestamp = -1
        self.bytes_since_last_index_entry = 0
        self.created_ms = now_ms
        self._synced_size = self.size

    # ------------------------------------------------------------ paths & lifecycle

    @property
    def log_path(self) -> Path:
        return self.file.path

    def paths(self) -> list[Path]:
        return [self.file.path, self.offset_index.path, self.time_index.path]

    def rename_suffix(self, new_suffix: str) -> None:
        """Rename all three files to carry ``new_suffix`` (open fds stay valid)."""
        name = segment_name(self.base_offset)
        for obj, ext in ((self.file, LOG_SUFFIX), (self.offset_index, INDEX_SUFFIX),
                         (self.time_index, TIMEINDEX_SUFFIX)):
            new = self.dir / f"{name}{ext}{new_suffix}"
            with contextlib.suppress(FileNotFoundError):
                os.replace(obj.path, new)
            obj.path = new
        self.suffix = new_suffix

    def delete_files(self) -> None:
        for p in self.paths():
            with contextlib.suppress(FileNotFoundError):
                p.unlink()

    def close(self) -> None:
        self.seal()
        self.flush()
        self.file.close()

    def load(self, now_ms: int) -> None:
        """Trust indexes (clean shutdown or below the recovery point); find the tail."""
        start = self.offset_index.last_position or 0
        if not self.offset_index.sane(self.size):
            self.recover()
            return
        if not (self.offset_index.existed and self.time_index.existed):
            self.recover()
            return
        last: BatchHeader | None = None
        tail_max: tuple[int, int] = (-1, -1)
        since = 0
        end = start
        try:
            for pos, h in self.scan_headers(start):
                if since > self.config.index_interval_bytes or pos != end:
                    # The index rule would have added an entry here: entries are missing.
                    self.recover()
                    return
                since += h.size
                end = pos + h.size
                last = h
                if h.max_timestamp > tail_max[0]:
                    tail_max = (h.max_timestamp, h.last_offset)
        except CorruptRecordError:
            end = -1
        if end != self.size:
            self.recover()  # the index pointed into the middle of a batch, or the tail is torn
            return
        if last is not None:
            self.next_offset = last.next_offset
        elif len(self.offset_index):
            self.recover()
            return
        if not self.time_index.sane(self.next_offset):
            self.recover()
            return
        self.bytes_since_last_index_entry = self.size - start if len(self.offset_index) else self.size
        entry = self.time_index.last_entry
        if entry is not None:
            self.max_timestamp, self.offset_of_max_timestamp = entry
        if tail_max[0] > self.max_timestamp:
            # The last time-index entry may predate the tail (written lazily): trust the bytes.
            self.max_timestamp, self.offset_of_max_timestamp = tail_max
        if self.size and self.max_timestamp < 0:
            self._rescan_max_timestamp()

    # ------------------------------------------------------------ append

    def append(
        self, data: bytes | bytearray | list[bytes | memoryview], batches: list[BatchPlacement]
    ) -> None:
        """Write ``data`` (bytes, or a list of buffers written with one ``pwritev``) at the end."""
        if isinstance(data, list):
            total = sum(map(len, data))
            if len(data) <= _IOV_MAX:
                written = os.pwritev(self.file.fd, data, self.size)
            else:
                written = 0
                for i in range(0, len(data), _IOV_MAX):
                    written += os.pwritev(self.file.fd, data[i : i + _IOV_MAX], self.size + written)
            if written < total:  # short write (disk nearly full, signal): finish by hand
                rest = b"".join(bytes(b) for b in data)[written:]
                self._pwrite_all(rest, self.size + written)
        else:
            total = len(data)
            self._pwrite_all(data, self.size)
        position = self.size
        for b in batches:
            self._index_batch(position + b.position, b.size, b.last_offset, b.max_timestamp)
        self.size += total
        if batches:
            self.next_offset = batches[-1].last_offset + 1

    def append_batch(self, prefix: bytes, rest: memoryview, size: int, last_offset: int, max_ts: int) -> None:
        """Produce fast path: one batch given as a rewritten 16-byte prefix plus the client's bytes."""
        position = self.size
        written = os.pwritev(self.file.fd, [prefix, rest], position)
        if written < size:  # short write: finish the rest by hand
            self._pwrite_all((prefix + bytes(rest))[written:], position + written)
        # _index_batch inlined: this runs once per produced batch.
        if max_ts > self.max_timestamp:
            self.max_timestamp = max_ts
            self.offset_of_max_timestamp = last_offset
        if self.bytes_since_last_index_entry > self.config.index_interval_bytes:
            self.offset_index.append(last_offset, position)
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
            self.bytes_since_last_index_entry = size
        else:
            self.bytes_since_last_index_entry += size
        self.size = position + size
        self.next_offset = last_offset + 1

    def _pwrite_all(self, data: bytes | bytearray, pos: int) -> None:
        mv = memoryview(data)
        written = 0
        while written < len(mv):
            written += os.pwrite(self.file.fd, mv[written:], pos + written)

    def _index_batch(self, position: int, size: int, last_offset: int, max_ts: int) -> None:
        if max_ts > self.max_timestamp:
            self.max_timestamp = max_ts
            self.offset_of_max_timestamp = last_offset
        if self.bytes_since_last_index_entry > self.config.index_interval_bytes:
            self.offset_index.append(last_offset, position)
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
            self.bytes_since_last_index_entry = 0
        self.bytes_since_last_index_entry += size

    def seal(self) -> None:
        """The segment stops being active: record its maximum timestamp in the time index."""
        if self.max_timestamp >= 0:
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)

    # ------------------------------------------------------------ read

    def pread(self, position: int, n: int) -> bytes:
        return os.pread(self.file.fd, n, position)

    def scan_headers(self, start: int = 0, end: int | None = None) -> Iterator[tuple[int, BatchHeader]]:
        """Batch headers from ``start`` up to ``end`` (default: current size), no CRC check."""
        end = self.size if end is None else end
        pos = start
        buf = b""
        buf_pos = 0
        while pos + HEADER_SIZE <= end:
            rel = pos - buf_pos
            if rel < 0 or rel + HEADER_SIZE > len(buf):
                buf = self.pread(pos, max(HEADER_SIZE, min(SCAN_CHUNK, end - pos)))
                buf_pos, rel = pos, 0
                if len(buf) < HEADER_SIZE:
                    return
            h = BatchHeader.parse(buf, rel)
            if h.batch_length < MIN_BATCH_LENGTH or pos + h.size > end:
                return
            yield pos, h
            pos += h.size

    def translate_offset(self, offset: int) -> tuple[int, BatchHeader] | None:
        """Position and header of the first batch whose last offset ≥ ``offset``."""
        _, start = self.offset_index.lookup(offset)
        for pos, h in self.scan_headers(start):
            if h.last_offset >= offset:
                return pos, h
        return None

    def find_offset_for_timestamp(self, timestamp: int) -> tuple[int, BatchHeader] | None:
        """First batch (from the time index hint) whose max timestamp ≥ ``timestamp``."""
        _, offset = self.time_index.lookup(timestamp)
        _, start = self.offset_index.lookup(offset)
        for pos, h in self.scan_headers(start):
            if h.max_timestamp >= timestamp:
                return pos, h
        return None

    # ------------------------------------------------------------ recovery & truncation

    def recover(self) -> int:
        """Validate every batch, truncate at the first bad one, rebuild indexes. Returns bytes cut."""
        self.offset_index.reset()
        self.time_index.reset()
        self.max_timestamp = -1
        self.offset_of_max_timestamp = -1
        self.bytes_since_last_index_entry = 0
        self.next_offset = self.base_offset
        size = os.fstat(self.file.fd).st_size
        valid = 0
        chunk = b""
        chunk_pos = 0
        max_batch = max(self.config.max_message_bytes, self.config.segment_bytes)
        while valid < size:
            rel = valid - chunk_pos
            if rel + HEADER_SIZE > len(chunk):
                chunk = self.pread(valid, max(RECOVER_CHUNK, HEADER_SIZE))
                chunk_pos, rel = valid, 0
                if len(chunk) < HEADER_SIZE:
                    break
            try:
                h = BatchHeader.parse(chunk, rel)
            except CorruptRecordError:
                break
            if h.batch_length < MIN_BATCH_LENGTH or h.size > max_batch or valid + h.size > size:
                break
            if rel + h.size > len(chunk):
                chunk = self.pread(valid, max(RECOVER_CHUNK, h.size))
                chunk_pos, rel = valid, 0
                if len(chunk) < h.size:
                    break
            try:
                check_batch(chunk, rel, h)
            except Exception:
                break
            if h.base_offset < self.next_offset or h.last_offset - self.base_offset > INT32_MAX:
                break
            self._index_batch(valid, h.size, h.last_offset, h.max_timestamp)
            self.next_offset = h.next_offset
            valid += h.size
        truncated = size - valid
        if truncated:
            os.ftruncate(self.file.fd, valid)
        self.size = valid
        self._synced_size = min(self._synced_size, valid)
        self.seal()
        return truncated

    def truncate_to(self, offset: int) -> int:
        """Remove every batch whose last offset ≥ ``offset``. Returns bytes removed."""
        found = self.translate_offset(offset)
        if found is None:
            return 0
        pos, _ = found
        removed = self.size - pos
        os.ftruncate(self.file.fd, pos)
        self.size = pos
        self._synced_size = min(self._synced_size, pos)
        self.offset_index.truncate_to_position(pos)
        last: BatchHeader | None = None
        for _, h in self.scan_headers(self.offset_index.last_position or 0):
            last = h
        self.next_offset = last.next_offset if last is not None else self.base_offset
        self.time_index.truncate_to_offset(self.next_offset)
        lp = self.offset_index.last_position
        self.bytes_since_last_index_entry = self.size - lp if lp is not None else self.size
        self._rescan_max_timestamp()
        return removed

    def _rescan_max_timestamp(self) -> None:
        self.max_timestamp, self.offset_of_max_timestamp = -1, -1
        for _, h in self.scan_headers(0):
            if h.max_timestamp > self.max_timestamp:
                self.max_timestamp, self.offset_of_max_timestamp = h.max_timestamp, h.last_offset

    # ------------------------------------------------------------ durability

    def has_pending(self) -> bool:
        return self.size > self._synced_size or self.offset_index.has_pending() or (
            self.time_index.has_pending()
        )

    def take_pending(self, *, with_indexes: bool = True) -> SegmentPending:
        """Snapshot what a flush must write (call under the Log lock)."""
        if not with_indexes:
            return self.size, None, None
        return self.size, self.offset_index.take_pending(), self.time_index.take_pending()

    def sync(self, pending: SegmentPending, *, fsync_indexes: bool = False,
             fsync_data: bool = True) -> None:
        """fsync the data and write the index tails (call without the Log lock).

        Index files are written but not fsynced on the regular flush path, and the active
        segment's are written only at checkpoints, roll and close: indexes are hints that
        :meth:`load` validates (monotonic, in bounds, no entry missing at the tail) and
        rebuilds when wrong, so keeping them out of the fsync path costs nothing in safety.
        """
        size, oi, ti = pending
        if fsync_data and size > self._synced_size and self.file.fd >= 0:
            os.fsync(self.file.fd)
            self._synced_size = size
        if oi is not None:
            self.offset_index.write_pending(*oi, fsync=fsync_indexes)
        if ti is not None:
            self.time_index.write_pending(*ti, fsync=fsync_indexes)

    def flush(self) -> None:
        """Flush data and indexes, fsyncing both (close, compaction output)."""
        self.sync(self.take_pending(), fsync_indexes=True)
