"""The aborted-transaction index of one partition log: which producer's records in which offset range a
``read_committed`` consumer must skip (Kafka's ``TransactionIndex``).

One file per partition, ``aborted-transactions.index`` (Kafka keeps one ``.txnindex`` per segment; one file is
simpler here and the entries are few, one per aborted transaction): Kafka's 34-byte entries, in the order of their
abort markers — ``int16 version (0), int64 producer id, int64 first offset, int64 last offset (the marker's),
int64 last stable offset (when the marker was written)``. Entries are appended as abort markers are appended
(leader and follower alike), dropped when a truncation removes their marker or retention removes their range,
and re-derived by the producer state's replay of the log tail after a crash (an entry repeated by the replay is
ignored: markers come in offset order). A torn last entry is dropped at load.

Owned by the log's :class:`~dataplane.storage.producer_state.ProducerStateManager`, under the log's lock;
``fsync`` is for the log's flush, outside it.
"""

from __future__ import annotations

import bisect
import contextlib
import os
import struct
from pathlib import Path
from typing import NamedTuple

INDEX_NAME = "aborted-transactions.index"
_ENTRY = struct.Struct(">hqqqq")


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int  # the abort marker's offset
    last_stable_offset: int


class AbortedTxnIndex:
    """The aborted transactions of one log, by marker offset (see the module docstring)."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / INDEX_NAME
        self.entries: list[AbortedTxn] = []
        self._lasts: list[int] = []  # entries' last offsets, for bisect
        self.dirty = False

    def load(self, log_start: int, log_end: int) -> None:
        """Read the file, keeping whole entries whose marker is in ``[log_start, log_end)``."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            data = b""
        kept: list[AbortedTxn] = []
        for at in range(0, len(data) - _ENTRY.size + 1, _ENTRY.size):
            version, pid, first, last, lso = _ENTRY.unpack_from(data, at)
            if version != 0 or (kept and last <= kept[-1].last_offset):
                break  # not an entry this code wrote: what follows is not trusted either
            if log_start <= last < log_end:
                kept.append(AbortedTxn(pid, first, last, lso))
        self._set(kept)
        if len(kept) * _ENTRY.size != len(data):
            self._rewrite()

    def append(self, entry: AbortedTxn) -> None:
        if self._lasts and entry.last_offset <= self._lasts[-1]:
            return  # a replay of a marker already indexed
        self.entries.append(entry)
        self._lasts.append(entry.last_offset)
        with open(self.path, "ab") as out:
            out.write(_ENTRY.pack(0, *entry))
        self.dirty = True

    def truncate_from(self, offset: int) -> None:
        """Forget entries whose marker is at or above ``offset`` (the log was truncated there)."""
        cut = bisect.bisect_left(self._lasts, offset)
        if cut < len(self.entries):
            self._set(self.entries[:cut])
            self._rewrite()

    def prune_below(self, offset: int) -> None:
        """Forget entries whose whole range is below ``offset`` (retention moved the log start)."""
        kept = [e for e in self.entries if e.last_offset >= offset]
        if len(kept) != len(self.entries):
            self._set(kept)
            self._rewrite()

    def clear(self) -> None:
        self._set([])
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()

    def collect(self, start: int, upper: int) -> list[AbortedTxn]:
        """Entries overlapping ``[start, upper)``: their marker at or after ``start``, their first offset below
        ``upper`` (Kafka's ``collectAbortedTxns``)."""
        at = bisect.bisect_left(self._lasts, start)
        return [e for e in self.entries[at:] if e.first_offset < upper]

    def holds(self, last_offset: int) -> bool:
        at = bisect.bisect_left(self._lasts, last_offset)
        return at < len(self._lasts) and self._lasts[at] == last_offset

    def last_marker(self) -> int:
        return self._lasts[-1] if self._lasts else -1

    def fsync(self) -> None:
        if not self.dirty:
            return
        self.dirty = False
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def _set(self, entries: list[AbortedTxn]) -> None:
        self.entries = entries
        self._lasts = [e.last_offset for e in entries]

    def _rewrite(self) -> None:
        tmp = self.path.with_name(self.path.name + ".tmp")
        with open(tmp, "wb") as out:
            out.write(b"".join(_ENTRY.pack(0, *e) for e in self.entries))
        os.replace(tmp, self.path)  # fsynced by the next flush (a crash before it: load drops what is past the log)
        self.dirty = True
