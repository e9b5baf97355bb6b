"""Sparse offset and time indexes of one segment.

On-disk format (Kafka's): ``<base>.index`` is a sequence of 8-byte big-endian entries
``(relativeOffset int32, position int32)``; ``<base>.timeindex`` of 12-byte entries
``(timestamp int64, relativeOffset int32)``. No header and no preallocation: the file
length is always a whole number of entries, so a clean file is exactly what a rebuild
produces. The entries live in a ``bytearray`` (8 to 12 bytes each, ~200 KiB for a 1 GiB
segment of 64 KiB batches) and the unwritten tail is written and fsynced by
:meth:`flush`. An index past the recovery point is rebuilt after a crash, so the file
may lag memory until then.

Thread-safety: none. The owning Log serialises every call; :meth:`take_pending` runs
under the Log lock and :meth:`write_pending` under the Log's flush lock.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

OFFSET_ENTRY = struct.Struct(">i" "i")  # relativeOffset, position
TIME_ENTRY = struct.Struct(">q" "i")  # timestamp, relativeOffset


class _Index:
    ENTRY: struct.Struct

    def __init__(self, path: Path, base_offset: int, max_index_bytes: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.max_entries = max(1, max_index_bytes // self.ENTRY.size)
        self._max_bytes = self.max_entries * self.ENTRY.size
        self.existed = True
        try:
            self._buf = bytearray(path.read_bytes())
        except FileNotFoundError:
            self.existed = False
            self._buf = bytearray()
            path.touch()
        self._persisted = len(self._buf)
        self._size_on_disk = len(self._buf)
        # An attribute kept current by every change of ``_buf``: the roll rule reads it per append.
        self.is_full = len(self._buf) >= self._max_bytes

    def __len__(self) -> int:
        return len(self._buf) // self.ENTRY.size

    def entry(self, i: int) -> tuple[int, int]:
        a, b = self.ENTRY.unpack_from(self._buf, i * self.ENTRY.size)
        return int(a), int(b)

    def to_bytes(self) -> bytes:
        return bytes(self._buf)

    def reset(self) -> None:
        self._truncate_entries(0)

    def _truncate_entries(self, n: int) -> None:
        del self._buf[n * self.ENTRY.size :]
        self.is_full = len(self._buf) >= self._max_bytes
        if len(self._buf) < self._persisted:
            self._persisted = len(self._buf)

    def has_pending(self) -> bool:
        return self._persisted != len(self._buf) or self._size_on_disk != len(self._buf)

    def take_pending(self) -> tuple[int, bytes, int]:
        """(file position, bytes to write, new file length) of the unwritten tail; marks it written."""
        pos = self._persisted
        data = bytes(self._buf[pos:])
        self._persisted = self._size_on_disk = len(self._buf)
        return pos, data, len(self._buf)

    def write_pending(self, pos: int, data: bytes, length: int, *, fsync: bool = True) -> None:
        try:
            fd = os.open(self.path, os.O_WRONLY)
        except FileNotFoundError:
            return  # the segment was deleted or swapped meanwhile; nothing to keep
        try:
            if data:
                os.pwrite(fd, data, pos)
            if os.fstat(fd).st_size != length:
                os.ftruncate(fd, length)
            if fsync:
                os.fsync(fd)
        finally:
            os.close(fd)

    def flush(self) -> None:
        self.write_pending(*self.take_pending())

    def _bsearch(self, key: int, field: int) -> int:
        """Index of the last entry whose ``field`` ≤ key, or -1."""
        lo, hi = 0, len(self) - 1
        res = -1
        unpack = self.ENTRY.unpack_from
        size = self.ENTRY.size
        buf = self._buf
        while lo <= hi:
            mid = (lo + hi) >> 1
            if unpack(buf, mid * size)[field] <= key:
                res = mid
                lo = mid + 1
            else:
                hi = mid - 1
        return res


class OffsetIndex(_Index):
    """Maps a batch's last offset to the file position where that batch starts.

    On disk: ``<base>.index``, 8-byte big-endian entries ``(relativeOffset i32, position i32)``.
    Thread-safety: none; the owning Log serialises access.
    """

    ENTRY = OFFSET_ENTRY

    def append(self, offset: int, position: int) -> None:
        self._buf += OFFSET_ENTRY.pack(offset - self.base_offset, position)
        self.is_full = len(self._buf) >= self._max_bytes

    def lookup(self, offset: int) -> tuple[int, int]:
        """(offset, position) of the last entry with offset ≤ target, else (base, 0)."""
        i = self._bsearch(offset - self.base_offset, 0)
        if i < 0:
            return self.base_offset, 0
        rel, pos = self.entry(i)
        return self.base_offset + rel, pos

    def floor_entry(self, position: int, offset: int) -> tuple[int, int] | None:
        """(offset, position) of the last entry with position ≤ ``position`` and offset ≤ ``offset``."""
        i = min(self._bsearch(position, 1), self._bsearch(offset - self.base_offset, 0))
        if i < 0:
            return None
        rel, pos = self.entry(i)
        return self.base_offset + rel, pos

    @property
    def last_position(self) -> int | None:
        return self.entry(len(self) - 1)[1] if len(self) else None

    def truncate_to_position(self, position: int) -> None:
        """Drop entries for batches starting at or after ``position``."""
        i = self._bsearch(position - 1, 1)
        self._truncate_entries(i + 1)

    def sane(self, log_size: int) -> bool:
        if len(self._buf) % OFFSET_ENTRY.size:
            return False
        prev_off, prev_pos = -1, -1
        for rel, pos in OFFSET_ENTRY.iter_unpack(self._buf):
            if rel <= prev_off or pos <= prev_pos or pos >= log_size or rel < 0:
                return False
            prev_off, prev_pos = rel, pos
        return True


class TimeIndex(_Index):
    """Maps a timestamp to the offset of the batch where it became the segment maximum.

    On disk: ``<base>.timeindex``, 12-byte big-endian entries ``(timestamp i64, relativeOffset i32)``.
    Thread-safety: none; the owning Log serialises access.
    """

    ENTRY = TIME_ENTRY

    def maybe_append(self, timestamp: int, offset: int) -> None:
        buf = self._buf
        if buf:
            last_ts, last_rel = TIME_ENTRY.unpack_from(buf, len(buf) - 12)
            if timestamp <= last_ts or offset - self.base_offset < last_rel:
                return
        buf += TIME_ENTRY.pack(timestamp, offset - self.base_offset)
        self.is_full = len(buf) >= self._max_bytes

    @property
    def last_entry(self) -> tuple[int, int] | None:
        """(timestamp, absolute offset) of the last entry."""
        if not len(self):
            return None
        ts, rel = self.entry(len(self) - 1)
        return ts, self.base_offset + rel

    def lookup(self, timestamp: int) -> tuple[int, int]:
        """(timestamp, offset) of the last entry with timestamp ≤ target, else (-1, base)."""
        i = self._bsearch(timestamp, 0)
        if i < 0:
            return -1, self.base_offset
        ts, rel = self.entry(i)
        return ts, self.base_offset + rel

    def truncate_to_offset(self, offset: int) -> None:
        """Drop entries pointing at ``offset`` or later."""
        n = len(self)
        while n and self.entry(n - 1)[1] + self.base_offset >= offset:
            n -= 1
        self._truncate_entries(n)

    def sane(self, next_offset: int) -> bool:
        if len(self._buf) % TIME_ENTRY.size:
            return False
        prev_ts, prev_rel = -(2**63), -1
        for ts, rel in TIME_ENTRY.iter_unpack(self._buf):
            if ts <= prev_ts or rel < prev_rel or rel < 0 or self.base_offset + rel >= next_offset:
                return False
            prev_ts, prev_rel = ts, rel
        return True
