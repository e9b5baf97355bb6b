"""Flow control for one viewer: a byte-bounded buffer of items to send, and a bytes/s limit.

Both belong to one viewer's session and are used only on the event loop. The buffer is bounded by
construction: a live item that would take it past ``limit`` bytes is refused (the viewer is then too
slow and is disconnected), and the viewer's own backlog reader waits for room instead of adding. The
only way past the limit is a single item larger than the limit arriving at an empty buffer, so one
huge record can still be shown.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass

from controlplane.kafkarest.tail.records import OVERHEAD_BYTES, Record


@dataclass(frozen=True, slots=True)
class Item:
    """Records for one viewer (in offset order per partition) and every position they advance to."""

    records: tuple[Record, ...]
    # partition -> next offset, after these records (and any gap after them): every partition with a record here
    # is in it, so the sender moves its cursor from these alone
    positions: Mapping[int, int]
    size: int
    # The records' JSON, joined by commas, when they were rendered together (records.render): a frame takes it
    # whole when no filter picks among them. None: each record's own JSON.
    chunk: bytes | None = None


def item(records: tuple[Record, ...], positions: Mapping[int, int], chunk: bytes | None = None) -> Item:
    """An item whose size counts the JSON bytes it will send (the chunk's, else each record's) plus a fixed
    overhead per record and position."""
    json_bytes = len(chunk) if chunk is not None else sum(len(r.json) for r in records)
    return Item(records, positions, json_bytes + OVERHEAD_BYTES * len(records) + 16 * len(positions), chunk)


class ViewerBuffer:
    """Items waiting for the sender; see the module docstring for the bound."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.bytes = 0
        self.high_water = 0
        self._items: deque[Item] = deque()
        self._changed = asyncio.Event()

    def _add(self, entry: Item) -> None:
        self._items.append(entry)
        self.bytes += entry.size
        self.high_water = max(self.high_water, self.bytes)
        self._changed.set()

    def offer(self, entry: Item) -> bool:
        """Add a live item now, or refuse it (False) when it does not fit."""
        if self._items and self.bytes + entry.size > self.limit:
            return False
        self._add(entry)
        return True

    async def put(self, entry: Item) -> None:
        """Add an item once it fits (the backlog reader: it is pulled, so it can wait)."""
        while self._items and self.bytes + entry.size > self.limit:
            self._changed.clear()
            await self._changed.wait()
        self._add(entry)

    async def take(self, max_bytes: int) -> list[Item]:
        """At least one item (waiting for it), and more while they fit in ``max_bytes``."""
        while not self._items:
            self._changed.clear()
            await self._changed.wait()
        taken = [self._items.popleft()]
        size = taken[0].size
        while self._items and size + self._items[0].size <= max_bytes:
            size += self._items[0].size
            taken.append(self._items.popleft())
        self.bytes -= size
        self._changed.set()
        return taken

    def clear(self) -> None:
        self._items.clear()
        self.bytes = 0
        self._changed.set()


class TokenBucket:
    """A bytes/s limit with a burst of one second's worth (at least one frame)."""

    def __init__(self, rate: int, burst: int) -> None:
        self.rate = rate
        self.capacity = max(rate, burst)
        self._tokens = float(self.capacity)
        self._loop = asyncio.get_running_loop()
        self._stamp = self._loop.time()

    async def take(self, size: int) -> None:
        now = self._loop.time()
        self._tokens = min(self.capacity, self._tokens + (now - self._stamp) * self.rate)
        self._stamp = now
        self._tokens -= size
        if self._tokens < 0:
            await asyncio.sleep(-self._tokens / self.rate)  # pacing, not synchronisation
