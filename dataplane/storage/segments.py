"""The ordered segment list of one partition log (Kafka's ``LogSegments``).

Owned by a :class:`~dataplane.storage.local_log.LocalLog`; changed only under the owning
Log's lock. Thread-safety: none. Changes replace the lists rather than edit them, so a
sequence handed out (``all``, ``sealed``, ``from_offset``) stays a consistent snapshot
after the lock is released.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator, Sequence

from dataplane.storage.segment import LogSegment


class LogSegments:
    """Segments in offset order plus their base offsets, for bisect lookups."""

    __slots__ = ("_bases", "_segments", "active")

    def __init__(self, segments: Sequence[LogSegment]) -> None:
        self._segments: list[LogSegment] = []
        self._bases: list[int] = []
        # The last segment, the only one appended to. A plain attribute, not a property: the
        # produce path reads it twice per batch. The list is emptied only when the log closes,
        # and then ``active`` keeps naming the segment that was last.
        self.active: LogSegment
        self._set(list(segments), [s.base_offset for s in segments])

    def _set(self, segments: list[LogSegment], bases: list[int]) -> None:
        self._segments = segments
        self._bases = bases
        if segments:
            self.active = segments[-1]

    def __len__(self) -> int:
        return len(self._segments)

    def __iter__(self) -> Iterator[LogSegment]:
        return iter(self._segments)

    @property
    def all(self) -> Sequence[LogSegment]:
        return self._segments

    @property
    def sealed(self) -> Sequence[LogSegment]:
        """Every segment but the active one (what compaction may rewrite)."""
        return self._segments[:-1]

    @property
    def bases(self) -> tuple[int, ...]:
        return tuple(self._bases)

    @property
    def size_in_bytes(self) -> int:
        return sum(s.size for s in self._segments)

    def floor_index(self, offset: int) -> int:
        """Index of the segment that holds ``offset`` (the last one with base ≤ offset; 0 if none).

        Also the number of segments wholly below ``offset``, and never the active one.
        """
        return max(0, bisect.bisect_right(self._bases, offset) - 1)

    def from_offset(self, offset: int) -> Sequence[LogSegment]:
        """The segment holding ``offset`` and every later one."""
        return self._segments[self.floor_index(offset) :]

    # ------------------------------------------------------------------ changes

    def add(self, segment: LogSegment) -> None:
        """A new active segment (its base is above every other)."""
        self._set([*self._segments, segment], [*self._bases, segment.base_offset])

    def take_prefix(self, n: int) -> list[LogSegment]:
        """Remove and return the first ``n`` segments."""
        taken = self._segments[:n]
        self._set(self._segments[n:], self._bases[n:])
        return taken

    def take_above(self, offset: int) -> list[LogSegment]:
        """Remove and return the segments whose base is above ``offset``."""
        n = bisect.bisect_right(self._bases, offset)
        taken = self._segments[n:]
        self._set(self._segments[:n], self._bases[:n])
        return taken

    def take_all(self) -> list[LogSegment]:
        return self.take_prefix(len(self._segments))

    def replace(self, old: LogSegment, new: LogSegment) -> None:
        """Put ``new`` (same base offset) where ``old`` is."""
        i = self._segments.index(old)
        self._set([*self._segments[:i], new, *self._segments[i + 1 :]], self._bases)
