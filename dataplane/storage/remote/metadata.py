"""The remote metadata of one partition: which uploaded segments readers use, and which objects are garbage.

The object store's listing is the source of truth (decision 0032): a segment exists remotely when its metadata
object (written last) is listed. Uploads may overlap: a retry after a crash between the data and the metadata
objects leaves data without metadata (an orphan); a leader change mid-upload, or a new leader whose local
segments are cut at other offsets, leaves two segments covering some of the same offsets. The data below the
high watermark is the same on every replica, so any covering segment gives the same bytes; :func:`select_chain`
picks one segment per offset so a reader never reads an offset twice, and names the losers (wholly covered by
the chain) for cleanup, which deletes the metadata object first and the data after, so a crash in between only
leaves orphans. Orphans (data with no metadata) older than :data:`ORPHAN_GRACE_MS` are deleted; younger ones
may be an upload in flight.

Pure functions over values; no I/O. Safe from any thread.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from dataclasses import dataclass

from dataplane.storage.remote.layout import METADATA_KIND, RemoteSegment, parse_name
from dataplane.storage.remote.store import ObjectInfo

ORPHAN_GRACE_MS = 3_600_000  # data objects without metadata younger than this may belong to an upload in flight


@dataclass(frozen=True, slots=True)
class ChainEntry:
    """A segment of the chain and the first offset read from it (above what earlier segments cover)."""

    segment: RemoteSegment
    start: int

    @property
    def end(self) -> int:
        return self.segment.end_offset


@dataclass(frozen=True, slots=True)
class RemoteChain:
    """The segments readers use, in offset order, each covering ``[start, end]`` with no offset twice."""

    entries: tuple[ChainEntry, ...]

    @property
    def highest_offset(self) -> int:
        """The last offset the remote tier holds; -1 when it holds none."""
        return self.entries[-1].end if self.entries else -1

    @property
    def start_offset(self) -> int:
        """The first offset the remote tier holds; -1 when it holds none."""
        return self.entries[0].start if self.entries else -1

    @property
    def size_in_bytes(self) -> int:
        return sum(e.segment.size for e in self.entries)

    def find(self, offset: int) -> ChainEntry | None:
        """The entry holding ``offset``, else the first one above it (a gap), else None."""
        ends = [e.end for e in self.entries]
        i = bisect.bisect_left(ends, offset)
        return self.entries[i] if i < len(self.entries) else None

    def covering(self, offset: int) -> ChainEntry | None:
        """The entry whose range holds ``offset`` exactly; None in a gap or outside."""
        found = self.find(offset)
        return found if found is not None and found.start <= offset else None


def select_chain(segments: Iterable[RemoteSegment]) -> tuple[RemoteChain, list[RemoteSegment]]:
    """The chain and the losers (segments every offset of which an earlier chain entry already covers).

    Deterministic, so every broker and every pass choose alike: by base offset, then the one reaching furthest,
    then the higher uploader epoch, the earlier upload and the upload id.
    """
    ordered = sorted(segments, key=lambda s: (s.base_offset, -s.end_offset, -s.leader_epoch, s.uploaded_at_ms,
                                              s.upload_id))
    chain: list[ChainEntry] = []
    losers: list[RemoteSegment] = []
    covered = -1
    for s in ordered:
        if chain and s.end_offset <= covered:
            losers.append(s)
            continue
        chain.append(ChainEntry(s, max(s.base_offset, covered + 1)))
        covered = s.end_offset
    return RemoteChain(tuple(chain)), losers


@dataclass(frozen=True, slots=True)
class Listing:
    """One listing of a partition directory, split into metadata objects and data objects by upload."""

    metadata: dict[str, ObjectInfo]  # upload id -> its metadata object
    data: dict[str, list[ObjectInfo]]  # upload id -> its data objects


def split_listing(objects: Iterable[ObjectInfo], key_prefix: str) -> Listing:
    metadata: dict[str, ObjectInfo] = {}
    data: dict[str, list[ObjectInfo]] = {}
    for info in objects:
        parsed = parse_name(info.key[len(key_prefix):]) if info.key.startswith(key_prefix) else None
        if parsed is None:
            continue
        if parsed.kind == METADATA_KIND:
            metadata[parsed.upload_id] = info
        else:
            data.setdefault(parsed.upload_id, []).append(info)
    return Listing(metadata, data)


def orphans(listing: Listing, now_ms: int, grace_ms: int = ORPHAN_GRACE_MS) -> list[str]:
    """Keys of data objects whose upload has no metadata object and is older than ``grace_ms``."""
    doomed: list[str] = []
    for upload_id, infos in listing.data.items():
        if upload_id in listing.metadata:
            continue
        if all(now_ms - info.last_modified_ms >= grace_ms for info in infos):
            doomed.extend(info.key for info in infos)
    return doomed


def retention_victims(chain: RemoteChain, *, log_start: int, now_ms: int, retention_ms: int,
                      retention_bytes: int, local_only_bytes: int) -> list[ChainEntry]:
    """The oldest chain entries total retention deletes (Kafka's remote retention rules).

    An entry goes when it lies wholly below the log start (DeleteRecords, or a start moved earlier), when its
    newest record is older than ``retention_ms`` (-1: never), or while the partition's size (the remote chain
    plus ``local_only_bytes``, what is only local) would stay at or above ``retention_bytes`` without it.
    Entries go oldest first and the first that stays stops the pass, so the chain keeps no hole.
    """
    total = chain.size_in_bytes + local_only_bytes
    doomed: list[ChainEntry] = []
    for entry in chain.entries:
        s = entry.segment
        below_start = entry.end < log_start
        too_old = retention_ms >= 0 and s.max_timestamp >= 0 and s.max_timestamp < now_ms - retention_ms
        too_big = retention_bytes >= 0 and total - s.size >= retention_bytes
        if not (below_start or too_old or too_big):
            break
        doomed.append(entry)
        total -= s.size
    return doomed
