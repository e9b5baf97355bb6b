"""Reads whole batches from uploaded segments, with read-ahead so a sequential consumer is not bound by latency.

A segment's ``.log`` object is read in fixed chunks (``chunk_bytes``) through ranged GETs; a chunk read for a
fetch also queues the next ``read_ahead_chunks`` on a small thread pool, so the following fetches of a consumer
reading in order find their bytes already fetched. Chunks are kept in an LRU bounded by ``cache_bytes`` (objects
are immutable: a key is written once, so nothing is ever stale). Offset indexes and aborted-transaction indexes
are fetched once per segment and cached the same way.

The bytes returned are the segment's bytes, the same as a local read of that segment would give: whole batches
from the one holding the offset asked for, at most ``max_bytes`` (at least one batch), below ``upper``.

Thread-safety: every method may be called from any thread (the fetch executor's); one lock guards the caches.
Owned by the :class:`~dataplane.storage.remote.manager.RemoteLogManager`.
"""

from __future__ import annotations

import bisect
import struct
import threading
from collections import OrderedDict
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

from dataplane.protocol.records import HEADER_SIZE, MIN_BATCH_LENGTH, BatchHeader, decode_batch
from dataplane.storage.index import OFFSET_ENTRY, TIME_ENTRY
from dataplane.storage.remote.store import ObjectStore, RemoteStorageError
from dataplane.storage.txn_index import AbortedTxn

_TXN_ENTRY = struct.Struct(">hqqqq")  # the aborted-transaction index's entry (txn_index)


@dataclass(frozen=True, slots=True)
class ReaderSettings:
    chunk_bytes: int = 1 << 20
    read_ahead_chunks: int = 4
    cache_bytes: int = 64 << 20
    threads: int = 4


@dataclass(frozen=True, slots=True)
class SegmentObjects:
    """The keys and facts about one uploaded segment a read needs."""

    log_key: str
    index_key: str
    txn_key: str
    timeindex_key: str
    base_offset: int
    end_offset: int
    size: int


class RemoteLogReader:
    """Chunked, cached, read-ahead access to uploaded segments (see the module docstring)."""

    def __init__(self, store: ObjectStore, settings: ReaderSettings | None = None) -> None:
        self.store = store
        self.settings = settings or ReaderSettings()
        self._pool = ThreadPoolExecutor(max(1, self.settings.threads), "remote-read-ahead")
        self._lock = threading.Lock()
        self._chunks: OrderedDict[tuple[str, int], Future[bytes]] = OrderedDict()
        self._small: OrderedDict[str, bytes] = OrderedDict()  # indexes
        self._max_chunks = max(2, self.settings.cache_bytes // self.settings.chunk_bytes)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    # ------------------------------------------------------------------ batches

    def read(self, seg: SegmentObjects, offset: int, max_bytes: int, upper: int,
             min_one_batch: bool = True) -> tuple[bytes, int]:
        """Whole batches from the one holding ``offset`` (below ``upper``): (bytes, offset after the last).

        Empty bytes when no batch at or after ``offset`` lies below ``upper``. Raises RemoteStorageError.
        """
        pos = self._index_floor(seg, offset)
        first: tuple[int, BatchHeader] | None = None
        while pos + HEADER_SIZE <= seg.size:
            h = self._header(seg, pos)
            if h.last_offset >= offset:
                first = (pos, h)
                break
            pos += h.size
        if first is None:
            return b"", offset
        start, h = first
        if h.last_offset >= upper or (h.size > max_bytes and not min_one_batch):
            return b"", offset
        length = h.size
        next_offset = h.next_offset
        while start + length + HEADER_SIZE <= seg.size:
            nxt = self._header(seg, start + length)
            if nxt.last_offset >= upper or length + nxt.size > max_bytes:
                break
            length += nxt.size
            next_offset = nxt.next_offset
        return self._range(seg, start, start + length), next_offset

    def aborted(self, seg: SegmentObjects, start: int, upper: int) -> list[AbortedTxn]:
        """The segment's aborted transactions overlapping ``[start, upper)`` (read_committed reads)."""
        data = self._small_object(seg.txn_key)
        found = []
        for at in range(0, len(data) - _TXN_ENTRY.size + 1, _TXN_ENTRY.size):
            _, pid, first, last, lso = _TXN_ENTRY.unpack_from(data, at)
            if last >= start and first < upper:
                found.append(AbortedTxn(pid, first, last, lso))
        return found

    def offset_for_timestamp(self, seg: SegmentObjects, timestamp: int, min_offset: int) -> tuple[int, int] | None:
        """(timestamp, offset) of the segment's first record at or above ``min_offset`` whose timestamp is at
        least ``timestamp``; None when it has none. Raises RemoteStorageError.

        The time index's entries are (the segment's maximum timestamp so far, the offset where it became so):
        below the last entry under ``timestamp`` no record qualifies, so the scan starts there.
        """
        start = max(min_offset, seg.base_offset)
        times = self._small_object(seg.timeindex_key)
        count = len(times) // TIME_ENTRY.size
        # Entries' timestamps never decrease (each is the maximum so far): bisect for the first at or above it.
        below = bisect.bisect_left(range(count), timestamp,
                                   key=lambda i: TIME_ENTRY.unpack_from(times, i * TIME_ENTRY.size)[0])
        if below:
            start = max(start, seg.base_offset + TIME_ENTRY.unpack_from(times, (below - 1) * TIME_ENTRY.size)[1])
        pos = self._index_floor(seg, start)
        while pos + HEADER_SIZE <= seg.size:
            h = self._header(seg, pos)
            if h.last_offset >= start and h.max_timestamp >= timestamp:
                for r in decode_batch(self._range(seg, pos, pos + h.size)).records:
                    if r.timestamp >= timestamp and r.offset >= min_offset:
                        return r.timestamp, r.offset
            pos += h.size
        return None

    def _header(self, seg: SegmentObjects, pos: int) -> BatchHeader:
        h = BatchHeader.parse(self._range(seg, pos, pos + HEADER_SIZE))
        if h.batch_length < MIN_BATCH_LENGTH or pos + h.size > seg.size:
            raise RemoteStorageError(f"{seg.log_key}: no whole batch at position {pos}")
        return h

    def _index_floor(self, seg: SegmentObjects, offset: int) -> int:
        """The position of the last indexed batch ending before ``offset`` (0 if none): a scan from there finds
        the batch holding it. Index entries are (last offset of a batch - base, its position)."""
        index = self._small_object(seg.index_key)
        lo, hi, found = 0, len(index) // OFFSET_ENTRY.size - 1, 0
        target = offset - seg.base_offset
        while lo <= hi:
            mid = (lo + hi) // 2
            rel, position = OFFSET_ENTRY.unpack_from(index, mid * OFFSET_ENTRY.size)
            if rel < target:
                found, lo = position, mid + 1
            else:
                hi = mid - 1
        return int(found)

    # ------------------------------------------------------------------ bytes

    def _small_object(self, key: str) -> bytes:
        with self._lock:
            data = self._small.get(key)
            if data is not None:
                self._small.move_to_end(key)
                return data
        data = self.store.get(key)
        with self._lock:
            self._small[key] = data
            while len(self._small) > 512:
                self._small.popitem(last=False)
        return data

    def _range(self, seg: SegmentObjects, start: int, end: int) -> bytes:
        size = self.settings.chunk_bytes
        first, last = start // size, (end - 1) // size
        futures = [self._chunk(seg, i) for i in range(first, last + 1)]
        self._read_ahead(seg, last + 1)
        parts = []
        for i, future in zip(range(first, last + 1), futures, strict=True):
            try:
                data = future.result()
            except RemoteStorageError:
                with self._lock:  # a failed read is not cached: the next fetch tries again
                    if self._chunks.get((seg.log_key, i)) is future:
                        del self._chunks[(seg.log_key, i)]
                raise
            lo = start - i * size if i == first else 0
            hi = end - i * size if i == last else size
            parts.append(memoryview(data)[lo:hi])
        return b"".join(parts)

    def _chunk(self, seg: SegmentObjects, i: int, *, ahead: bool = False) -> Future[bytes]:
        key = (seg.log_key, i)
        with self._lock:
            found = self._chunks.get(key)
            if found is not None:
                self._chunks.move_to_end(key)
                return found
            future: Future[bytes]
            future = self._pool.submit(self._fetch, seg, i) if ahead else Future()
            self._chunks[key] = future
            while len(self._chunks) > self._max_chunks:
                self._chunks.popitem(last=False)
        if not ahead:  # the caller needs it now: fetched on its own thread, not queued behind read-ahead
            try:
                future.set_result(self._fetch(seg, i))
            except RemoteStorageError as exc:
                future.set_exception(exc)
        return future

    def _read_ahead(self, seg: SegmentObjects, first: int) -> None:
        size = self.settings.chunk_bytes
        for i in range(first, first + self.settings.read_ahead_chunks):
            if i * size >= seg.size:
                return
            self._chunk(seg, i, ahead=True)

    def _fetch(self, seg: SegmentObjects, i: int) -> bytes:
        size = self.settings.chunk_bytes
        return self.store.get_range(seg.log_key, i * size, min(seg.size, (i + 1) * size))


