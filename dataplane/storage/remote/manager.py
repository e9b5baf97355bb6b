"""The remote log manager: uploads closed segments, enforces total retention, serves remote reads.

One per broker, owned by the broker (built only when remote storage is configured), with its own thread
(``remote-log-manager``) that every ``interval_ms`` goes over the partitions the broker hosts with
``remote.storage.enable=true``:

* **leaders** list their partition directory in the store (the source of truth, :mod:`metadata`), upload each
  closed segment whose offsets all lie below the high watermark and the last stable offset, in order (data
  objects first, the metadata object last: the commit point), then record the highest uploaded offset in the log
  (which lets local retention delete the local copy); then total retention (``retention.ms``/``.bytes`` over
  remote plus local) deletes the oldest remote segments, the log start offset moving past them first (persisted),
  their metadata objects next and their data last; losers of an overlap and old orphans are cleaned up too;
* **followers** re-list now and then, so their own local retention knows what is uploaded;
* the **controller** deletes the objects of topics that no longer exist (a topic directory carries the topic
  id, which is never reused, so a directory whose id the metadata store does not know is garbage; a fresh read of
  the store's topic ids after the listing makes a just-created topic safe).

Any store failure is retried with backoff per partition; nothing local is deleted that is not uploaded, so
produce goes on while the store is away. Remote reads (fetches below the local log start) run on the fetch
executor (``remote-fetch`` threads) through the :class:`RemoteLogReader`.

Threads: the manager's loop (``remote-log-manager``), which hands each due partition to one of the
``remote-partition`` workers; their data objects upload on ``remote-upload`` threads; remote reads run on
``remote-fetch`` threads. The public methods are safe from any thread. A partition is served by one worker at a
time (a pass waits for all of them); its state is also guarded by its own lock against readers; the logs are
thread-safe themselves.
"""

from __future__ import annotations

import contextlib
import logging
import os
import struct
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import CancelledError, Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from dataplane.storage.log import Log, SegmentCopy
from dataplane.storage.remote.layout import (
    METADATA_KIND,
    PartitionPath,
    RemoteSegment,
    new_upload_id,
    parse_topic_dir,
    topic_root,
)
from dataplane.storage.remote.metadata import (
    ORPHAN_GRACE_MS,
    ChainEntry,
    RemoteChain,
    orphans,
    retention_victims,
    select_chain,
    split_listing,
)
from dataplane.storage.remote.reader import ReaderSettings, RemoteLogReader, SegmentObjects
from dataplane.storage.remote.store import ObjectStore, RemoteStorageError
from dataplane.storage.txn_index import AbortedTxn

log = logging.getLogger(__name__)
_TXN_ENTRY = struct.Struct(">hqqqq")
LOSER_GRACE_MS = 60_000  # a reader may still be reading a segment that just lost an overlap
MAX_BACKOFF_MS = 30_000
FOLLOWER_REFRESH_PASSES = 5  # followers re-list every this many passes
LEADER_RELIST_SECONDS = 60.0  # a leader re-lists this often (it tracks its own changes in between)
SWEEP_PASSES = 10  # the controller looks for deleted topics' objects every this many passes
HOOK_ENV = "SLUICE_TIER_TEST_HOOKS"  # tests: a directory; see _hook
UPLOADS_IN_FLIGHT = 4  # segments of one partition whose data objects upload together (commits stay in order)
UPLOAD_THREADS = 16
PARTITION_WORKERS = 4  # partitions served at once in a pass


def _now_ms() -> int:
    return int(time.time() * 1000)


@dataclass(frozen=True, slots=True)
class TieredPartition:
    """A hosted partition of a tiered topic, as the broker sees it when the manager's pass starts."""

    topic: str
    partition: int
    topic_id: str  # hex
    log: Log
    leader: bool
    follower: bool
    leader_epoch: int
    high_watermark: int


@dataclass(frozen=True, slots=True)
class RestoredState:
    """What a follower below its leader's local log start takes from the remote tier (KIP-405)."""

    next_offset: int
    epochs: tuple[tuple[int, int], ...]
    producer_snapshot: bytes | None
    highest_remote: int
    remote_start: int


@dataclass
class _PartitionState:
    path: PartitionPath
    lock: threading.Lock = field(default_factory=threading.Lock)
    segments: dict[str, RemoteSegment] = field(default_factory=dict)  # upload id -> metadata read
    chain: RemoteChain = field(default_factory=lambda: RemoteChain(()))
    losers: list[RemoteSegment] = field(default_factory=list)
    orphans: list[str] = field(default_factory=list)
    listed: bool = False
    failures: int = 0
    retry_at: float = 0.0
    passes: int = 0
    leader_epoch: int = -1  # the epoch this broker led at when it last listed
    listed_at: float = 0.0  # monotonic


class RemoteLogManager:
    """Every tiered partition of one broker (see the module docstring). Owned by the broker."""

    def __init__(self, store: ObjectStore, *, prefix: str, cluster_id: str, interval_ms: int,
                 partitions: Callable[[], Sequence[TieredPartition]],
                 topic_id: Callable[[str], str | None],
                 live_topic_ids: Callable[[], set[str]] | None = None,
                 is_controller: Callable[[], bool] = lambda: False,
                 reader: ReaderSettings | None = None, fetch_threads: int = 4,
                 time_ms: Callable[[], int] = _now_ms) -> None:
        self.store = store
        self.prefix = prefix
        self.cluster_id = cluster_id
        self.interval_ms = interval_ms
        self._partitions = partitions
        self._topic_id = topic_id
        self._live_topic_ids = live_topic_ids
        self._is_controller = is_controller
        self._time = time_ms
        self.reader = RemoteLogReader(store, reader)
        self.fetch_executor = ThreadPoolExecutor(max(1, fetch_threads), "remote-fetch")
        self._uploads = ThreadPoolExecutor(UPLOAD_THREADS, "remote-upload")
        self._workers = ThreadPoolExecutor(PARTITION_WORKERS, "remote-partition")
        self._lock = threading.Lock()
        self._states: dict[tuple[str, str, int], _PartitionState] = {}
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._passes = 0
        hooks = os.environ.get(HOOK_ENV)
        self._hooks = Path(hooks) if hooks else None

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        log.info("remote tier: bucket %s at %s, prefix %r, every %d ms", getattr(self.store, "bucket", "?"),
                 getattr(getattr(self.store, "settings", None), "endpoint", "?"), self.prefix, self.interval_ms)
        self._thread = threading.Thread(target=self._run, name="remote-log-manager", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(5)  # a daemon: an upload cut short is only an orphan, retried after a restart
            self._thread = None
        self.fetch_executor.shutdown(wait=False, cancel_futures=True)
        self._uploads.shutdown(wait=False, cancel_futures=True)
        self._workers.shutdown(wait=False, cancel_futures=True)
        self.reader.close()

    def wakeup(self) -> None:
        self._wake.set()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.run_once()
            except Exception:
                log.exception("remote log manager pass failed")
            self._wake.wait(self.interval_ms / 1000)
            self._wake.clear()

    # ------------------------------------------------------------------ one pass

    def run_once(self) -> None:
        """One pass over every tiered partition (the thread's loop; tests call it directly). Partitions are
        served by PARTITION_WORKERS threads, so one partition's uploads do not hold up the others'."""
        self._passes += 1
        now = time.monotonic()
        due: list[tuple[TieredPartition, _PartitionState]] = []
        for p in self._partitions():
            if not (p.leader or p.follower) or p.log.closed or not p.log.config.remote_storage:
                continue
            state = self._state(p.topic, p.topic_id, p.partition)
            if now >= state.retry_at:
                due.append((p, state))
        if self._stop.is_set():
            return
        for done in [self._workers.submit(self._serve, p, state) for p, state in due]:
            with contextlib.suppress(CancelledError):  # stopping
                done.result()
        if self._live_topic_ids is not None and self._passes % SWEEP_PASSES == 1 and self._is_controller():
            try:
                self.sweep_deleted_topics()
            except RemoteStorageError as exc:
                log.warning("remote tier: deleting the objects of deleted topics failed: %s (will retry)", exc)

    def _serve(self, p: TieredPartition, state: _PartitionState) -> None:
        """One partition's share of a pass (a worker thread; a partition is served by one worker at a time)."""
        if self._stop.is_set():
            return
        state.passes += 1
        try:
            if p.leader:
                self._lead(p, state)
            elif state.passes % FOLLOWER_REFRESH_PASSES == 1 or not state.listed:
                self._refresh(state)
                p.log.set_highest_remote_offset(state.chain.highest_offset)
                p.log.remote_size_bytes = state.chain.size_in_bytes
                p.log.delete_old_segments()
            state.failures = 0
            state.retry_at = 0.0
        except RemoteStorageError as exc:
            state.failures += 1
            delay = min(MAX_BACKOFF_MS, self.interval_ms * 2 ** min(state.failures, 10)) / 1000
            state.retry_at = time.monotonic() + delay
            log.warning("remote tier of %s-%d: %s (retrying in %.1f s)", p.topic, p.partition, exc, delay)
        except Exception:
            log.exception("remote tier of %s-%d failed a pass", p.topic, p.partition)

    def _state(self, topic: str, topic_id: str, partition: int) -> _PartitionState:
        key = (topic, topic_id, partition)
        with self._lock:
            found = self._states.get(key)
            if found is None:
                found = self._states[key] = _PartitionState(
                    PartitionPath(self.prefix, self.cluster_id, topic, topic_id, partition))
            return found

    def _refresh(self, state: _PartitionState) -> RemoteChain:
        """List the partition directory and read the metadata objects not read before: the chain."""
        with state.lock:
            listing = split_listing(self.store.list_objects(state.path.key_prefix), state.path.key_prefix)
            for upload_id, info in listing.metadata.items():
                if upload_id not in state.segments:
                    try:
                        state.segments[upload_id] = RemoteSegment.from_json(self.store.get(info.key))
                    except ValueError as exc:
                        log.warning("ignoring %s: %s", info.key, exc)
                    except RemoteStorageError as exc:
                        if not exc.missing:  # deleted since the listing: forget it
                            raise
            for gone in set(state.segments) - set(listing.metadata):
                del state.segments[gone]
            state.chain, state.losers = select_chain(state.segments.values())
            state.orphans = orphans(listing, self._time(), ORPHAN_GRACE_MS)
            state.listed = True
            state.listed_at = time.monotonic()
            return state.chain

    def _lead(self, p: TieredPartition, state: _PartitionState) -> None:
        # What this leader uploads and deletes it records itself, so a LIST (its cost grows with the objects) is
        # needed when it starts leading and now and then for changes made elsewhere (another leader's uploads).
        if not state.listed or state.leader_epoch != p.leader_epoch \
                or time.monotonic() - state.listed_at >= LEADER_RELIST_SECONDS:
            self._refresh(state)
            state.leader_epoch = p.leader_epoch
        p.log.set_highest_remote_offset(state.chain.highest_offset)
        upper = min(p.high_watermark, p.log.first_unstable_offset(p.high_watermark))
        self._upload(p, state, upper)
        self._retention(p, state)
        p.log.delete_old_segments()  # local retention, now that more is uploaded
        self._cleanup(state)
        p.log.remote_size_bytes = state.chain.size_in_bytes

    def _upload(self, p: TieredPartition, state: _PartitionState, upper: int) -> None:
        """Upload every closed segment below ``upper``, oldest first, through a window of UPLOADS_IN_FLIGHT
        segments whose data objects upload together (the store's per-request latency overlaps). Each segment's
        metadata object is written strictly in offset order, once its own data is stored, and only then does the
        log learn the new highest remote offset: committing out of order could let local retention delete a
        segment whose predecessor is not remote yet. A failure stops at that segment; data objects already
        uploaded for later ones become orphans.
        """
        path = state.path
        window: deque[tuple[RemoteSegment, SegmentCopy, list[Future[None]]]] = deque()
        queued = p.log.highest_remote_offset
        try:
            while not self._stop.is_set():
                if len(window) < UPLOADS_IN_FLIGHT:
                    for c in p.log.next_uploads(upper, UPLOADS_IN_FLIGHT - len(window), after=queued):
                        segment = RemoteSegment(c.base_offset, c.end_offset, new_upload_id(), c.max_timestamp,
                                                c.offset_of_max_timestamp, c.size, p.leader_epoch, c.epochs,
                                                self._time(), has_snapshot=c.producer_snapshot is not None)
                        window.append((segment, c, self._put_data(path, segment, c)))
                        queued = c.end_offset
                if not window:
                    return
                segment, copy, futures = window[0]
                for future in futures:
                    future.result()
                self._hook("upload", segment.base_offset)
                self.store.put_bytes(segment.metadata_key(path), segment.to_json())
                window.popleft()
                with contextlib.suppress(OSError):
                    os.close(copy.log_fd)
                with state.lock:
                    state.segments[segment.upload_id] = segment
                    state.chain, state.losers = select_chain(state.segments.values())
                p.log.set_highest_remote_offset(segment.end_offset)
                log.info("uploaded %s-%d [%d, %d] (%d bytes) as %s", p.topic, p.partition, segment.base_offset,
                         segment.end_offset, segment.size, segment.upload_id)
        finally:
            for _, copy, futures in window:  # after a failure: let the rest finish before their fds close
                for future in futures:
                    with contextlib.suppress(Exception):
                        future.result()
                with contextlib.suppress(OSError):
                    os.close(copy.log_fd)

    def _put_data(self, path: PartitionPath, segment: RemoteSegment, copy: SegmentCopy) -> list[Future[None]]:
        def put_log() -> None:
            try:
                with os.fdopen(os.dup(copy.log_fd), "rb", closefd=True) as source:
                    self.store.put_file(segment.key(path, "log"), source, copy.size)  # sealed: a fixed size
            except OSError as exc:
                raise RemoteStorageError(f"reading segment {copy.base_offset} for upload: {exc}") from exc

        small = {"index": copy.offset_index, "timeindex": copy.time_index, "snapshot": copy.producer_snapshot or b"",
                 "epochs": _epochs_bytes(copy.epochs), "txnindex": _txn_bytes(copy.aborted)}
        return [self._uploads.submit(put_log), *(self._uploads.submit(self.store.put_bytes, segment.key(path, kind),
                                                                      data) for kind, data in small.items())]

    def _retention(self, p: TieredPartition, state: _PartitionState) -> None:
        config = p.log.config
        victims = retention_victims(state.chain, log_start=p.log.log_start_offset, now_ms=self._time(),
                                    retention_ms=config.retention_ms, retention_bytes=config.retention_bytes,
                                    local_only_bytes=p.log.local_only_bytes())
        if not victims:
            return
        new_start = victims[-1].end + 1
        if new_start > p.log.log_start_offset:
            # The start moves (persisted) before any object goes: a crash leaves objects below the start,
            # which the next pass deletes, never a start pointing at deleted data.
            p.log.delete_records_before(min(new_start, p.log.log_end_offset))
        self._delete_segments(state, [v.segment for v in victims])
        log.info("remote retention of %s-%d: deleted %d segments, log start now %d", p.topic, p.partition,
                 len(victims), p.log.log_start_offset)

    def _cleanup(self, state: _PartitionState) -> None:
        now = self._time()
        losers = [s for s in state.losers if now - s.uploaded_at_ms >= LOSER_GRACE_MS]
        if losers:
            self._delete_segments(state, losers)
        if state.orphans:
            self.store.delete_many(state.orphans)
            state.orphans = []

    def _delete_segments(self, state: _PartitionState, segments: Sequence[RemoteSegment]) -> None:
        """Metadata objects first (the segment stops existing), data objects after (then only garbage)."""
        path = state.path
        self.store.delete_many([s.metadata_key(path) for s in segments])
        with state.lock:
            for s in segments:
                state.segments.pop(s.upload_id, None)
            state.chain, state.losers = select_chain(state.segments.values())
        self._hook("delete", segments[0].base_offset)
        self.store.delete_many([key for s in segments for key in s.data_keys(path)])

    def sweep_deleted_topics(self) -> int:
        """Delete every object of topics the metadata store no longer has; the number of topics swept.

        One flat listing of the cluster's objects, grouped by topic directory (delimiter listings are not
        supported alike by every S3-compatible server: s3rver answers none).
        """
        assert self._live_topic_ids is not None
        root = topic_root(self.prefix, self.cluster_id)
        by_dir: dict[str, list[str]] = {}
        for info in self.store.list_objects(root):
            by_dir.setdefault(info.key[len(root):].split("/", 1)[0], []).append(info.key)
        if not by_dir:
            return 0
        live = self._live_topic_ids()  # read after the listing: a topic created meanwhile is in it
        swept = 0
        for name, keys in by_dir.items():
            parsed = parse_topic_dir(name)
            if parsed is None or parsed[1] in live:
                continue
            self.store.delete_many([k for k in keys if k.endswith("." + METADATA_KIND)])
            self.store.delete_many([k for k in keys if not k.endswith("." + METADATA_KIND)])
            with self._lock:
                for key in [k for k in self._states if k[1] == parsed[1]]:
                    del self._states[key]
            log.info("deleted the %d remote objects of deleted topic %s (id %s)", len(keys), *parsed)
            swept += 1
        return swept

    # ------------------------------------------------------------------ reads (fetch executor threads)

    def read(self, topic: str, partition: int, offset: int, max_bytes: int, upper: int,
             committed: bool = False) -> tuple[bytes, tuple[AbortedTxn, ...]]:
        """Whole batches from the remote segment holding ``offset`` (blocking: call on the fetch executor).

        Returns the bytes (empty when nothing lies below ``upper`` there) and, if ``committed``, the aborted
        transactions overlapping them. Raises RemoteStorageError.
        """
        topic_id = self._topic_id(topic)
        if topic_id is None:
            raise RemoteStorageError(f"topic {topic} is not known")
        state = self._state(topic, topic_id, partition)
        entry = state.chain.covering(offset)
        if entry is None:
            entry = self._refresh(state).find(offset)
        if entry is None:
            return b"", ()
        seg = self._objects(state.path, entry)
        with self._refreshed_when_missing(state):
            data, next_offset = self.reader.read(seg, max(offset, entry.start), max_bytes, upper)
        aborted: tuple[AbortedTxn, ...] = ()
        if committed and data:
            aborted = tuple(self.reader.aborted(seg, offset, next_offset))
        return data, aborted

    def offset_for_timestamp(self, topic: str, partition: int, timestamp: int,
                             min_offset: int) -> tuple[int, int] | None:
        """ListOffsets by time in the remote tier (blocking: call on the fetch executor): (timestamp, offset) of
        the first record at or above ``min_offset`` whose timestamp is at least ``timestamp``, None when the
        remote tier holds none. Segments whose maximum timestamp is below it are skipped unread (their metadata
        says so). Raises RemoteStorageError."""
        topic_id = self._topic_id(topic)
        if topic_id is None:
            return None
        state = self._state(topic, topic_id, partition)
        chain = state.chain if state.listed else self._refresh(state)
        for entry in chain.entries:
            if entry.end < min_offset or entry.segment.max_timestamp < timestamp:
                continue
            with self._refreshed_when_missing(state):
                found = self.reader.offset_for_timestamp(self._objects(state.path, entry), timestamp,
                                                         max(min_offset, entry.start))
            if found is not None:
                return found
        return None

    @contextlib.contextmanager
    def _refreshed_when_missing(self, state: _PartitionState) -> Iterator[None]:
        """Re-raises a read's RemoteStorageError; one for an object deleted meanwhile (retention, cleanup) also
        refreshes the partition's chain first, so the caller's next read or lookup sees the new one."""
        try:
            yield
        except RemoteStorageError as exc:
            if exc.missing:
                self._refresh(state)
            raise

    @staticmethod
    def _objects(path: PartitionPath, entry: ChainEntry) -> SegmentObjects:
        s = entry.segment
        return SegmentObjects(s.key(path, "log"), s.key(path, "index"), s.key(path, "txnindex"),
                              s.key(path, "timeindex"), s.base_offset, s.end_offset, s.size)

    def restore_state(self, topic: str, partition: int, leader_local_start: int) -> RestoredState:
        """For a follower below its leader's local log start: the remote segment holding the offset just below
        it, with its leader epochs and producer snapshot (blocking). Raises RemoteStorageError when the remote
        tier does not hold that offset (yet)."""
        topic_id = self._topic_id(topic)
        if topic_id is None:
            raise RemoteStorageError(f"topic {topic} is not known")
        state = self._state(topic, topic_id, partition)
        chain = self._refresh(state)
        entry = chain.covering(leader_local_start - 1)
        if entry is None:
            raise RemoteStorageError(f"the remote tier of {topic}-{partition} holds no segment with offset "
                                     f"{leader_local_start - 1}")
        seg = entry.segment
        epochs = _parse_epochs(self.store.get(seg.key(state.path, "epochs")))
        snapshot = self.store.get(seg.key(state.path, "snapshot")) if seg.has_snapshot else None
        # Every epoch up to the segment's end: those of earlier segments come from the chain's metadata.
        lineage: dict[int, int] = {}
        for e in chain.entries:
            if e.end > seg.end_offset:
                break
            for epoch, start in e.segment.epochs:
                lineage.setdefault(epoch, start)
        for epoch, start in epochs:
            lineage.setdefault(epoch, start)
        return RestoredState(seg.end_offset + 1, tuple(sorted(lineage.items(), key=lambda x: x[1])),
                             snapshot or None, chain.highest_offset, chain.start_offset)

    def remote_size(self, topic: str, partition: int) -> int:
        with self._lock:
            states = [s for (t, _, p), s in self._states.items() if t == topic and p == partition]
        return sum(s.chain.size_in_bytes for s in states)

    def _hook(self, what: str, base: int) -> None:
        """Tests only (``SLUICE_TIER_TEST_HOOKS``): announce the step and wait while ``<dir>/hold-<what>`` is
        there, so a test can kill the broker between the data and metadata objects, or between deletions."""
        if self._hooks is None:
            return
        (self._hooks / f"{what}-{base}").touch()
        while (self._hooks / f"hold-{what}").exists() and not self._stop.is_set():
            time.sleep(0.05)


def _epochs_bytes(epochs: Sequence[tuple[int, int]]) -> bytes:
    """Kafka's leader-epoch-checkpoint text format (version 0, count, ``epoch startOffset`` lines)."""
    return ("\n".join(["0", str(len(epochs)), *(f"{e} {s}" for e, s in epochs)]) + "\n").encode()


def _parse_epochs(data: bytes) -> tuple[tuple[int, int], ...]:
    lines = data.decode().split("\n")
    with contextlib.suppress(ValueError, IndexError):
        n = int(lines[1])
        return tuple((int(line.split()[0]), int(line.split()[1])) for line in lines[2 : 2 + n])
    raise RemoteStorageError("a remote leader-epoch checkpoint that cannot be read")


def _txn_bytes(aborted: Sequence[AbortedTxn]) -> bytes:
    return b"".join(_TXN_ENTRY.pack(0, *t) for t in aborted)
