"""One hosted partition's rules: leader and follower appends, reads, the high watermark, acks=all, long polls.

Kafka keeps these in ``Partition``: request handlers only translate requests
into calls here and results into responses. A partition is a leader (it
tracks its followers in a ``LeaderState`` and moves the high watermark), a
follower (its leader's fetcher appends to it), or neither.

The idempotent producer's state belongs to the log (``storage.producer_state``),
which checks and records every batch inside its own append, so a leader append
is a single call and whichever replica becomes leader already holds the state of
what it replicated.

``_lock`` (an asyncio lock) serialises what changes the log's history or the
partition's role across awaits: role changes, truncation, and appends that hop
to a worker thread. A follower append therefore can never land after this
partition became leader (it checks role and epoch under the lock), and an
append on the event loop itself needs no lock because nothing else runs
meanwhile. Small appends run on the event loop (a thread hop costs more than a
page-cache write) but never block it: they ask the log not to
(``blocking=False``) and go to a worker thread when it would fsync, roll a
segment, or wait for the log's lock (a flush or the cleaner holds it).
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import time
from collections.abc import Callable
from typing import NamedTuple

from dataplane.cluster.store import PartitionState
from dataplane.protocol.control import build_marker
from dataplane.protocol.errors import (
    ErrorCode,
    KafkaError,
    KafkaStorageError,
    OffsetMovedToTieredStorageError,
    OffsetOutOfRangeError,
)
from dataplane.replication.leader import LeaderState
from dataplane.storage import AppendInfo, FileRegion, Log, TimestampAndOffset, WouldBlock
from dataplane.storage.epoch_cache import EpochEndOffset
from dataplane.storage.remote.manager import RemoteLogManager, RestoredState
from dataplane.storage.remote.store import RemoteStorageError

INLINE_APPEND_BYTES = 64 * 1024  # below this an append runs on the event loop: a thread hop costs more


def now_ms() -> float:
    return time.monotonic() * 1000


class Role(enum.Enum):
    LEADER = "leader"
    FOLLOWER = "follower"
    NONE = "none"  # not a replica (any more), or leaderless


class ReadResult(NamedTuple):
    """What a fetch of one partition sees: the region (maybe empty) and the offsets to report."""

    region: FileRegion | None
    high_watermark: int
    log_start_offset: int
    visible_end: int  # the high watermark (consumers), LSO (read_committed) or log end (followers) it stopped at
    last_stable_offset: int = -1
    aborted: tuple[tuple[int, int], ...] | None = None  # read_committed: (producer id, first offset) to skip
    data: bytes | None = None  # batches read from the remote tier (then ``region`` is None)


class Partition:
    """One partition this broker hosts.

    Owned by the ``ReplicaManager``; every method runs on the broker's event loop
    (log calls that may block hop to worker threads from here).
    """

    def __init__(self, topic: str, index: int, log: Log, *, node_id: int, high_watermark: int = 0,
                 min_insync_replicas: int = 1) -> None:
        self.topic = topic
        self.index = index
        self.log = log
        self.node_id = node_id
        self.role = Role.NONE
        self.leader = -1
        self.leader_epoch = -1
        self.leader_state: LeaderState | None = None
        self.high_watermark = min(high_watermark, log.log_end_offset)
        self.min_insync_replicas = min_insync_replicas
        self._lock = asyncio.Lock()
        self._waiters: list[tuple[int, asyncio.Future[None]]] = []  # acks=all: (offset wanted, future)
        self._consumer_watchers: set[asyncio.Event] = set()  # long polls below the high watermark
        self._replica_watchers: set[asyncio.Event] = set()  # followers' long polls, to the log end
        self.remote: RemoteLogManager | None = None  # reads below the local log start (tiered topics)

    def __repr__(self) -> str:
        return f"Partition({self.topic}-{self.index}, {self.role.value}, epoch {self.leader_epoch})"

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.index}"

    # ------------------------------------------------------------------ role changes (the replica manager's)

    async def make_leader(self, state: PartitionState, now: float) -> None:
        """Lead at ``state.leader_epoch``: it starts at the log end (KIP-101); followers get a full lag window."""
        async with self._lock:
            await asyncio.to_thread(self.log.begin_leader_epoch, state.leader_epoch)
            self.role, self.leader, self.leader_epoch = Role.LEADER, self.node_id, state.leader_epoch
            self.leader_state = LeaderState(
                self.node_id, state.replicas, state.isr, leader_epoch=state.leader_epoch,
                partition_epoch=state.partition_epoch, epoch_start_offset=self.log.log_end_offset,
                high_watermark=self.high_watermark, now=now)
        self.maybe_advance_high_watermark()

    def update_membership(self, state: PartitionState, now: float) -> None:
        """Same leader epoch, a newer replica list or ISR (an ISR change or a reassignment step)."""
        if self.leader_state is not None and state.partition_epoch > self.leader_state.partition_epoch:
            self.leader_state.update_membership(state.replicas, state.isr, state.partition_epoch, now)
            self.maybe_advance_high_watermark()

    async def make_follower(self, leader: int, leader_epoch: int) -> None:
        async with self._lock:
            self.role, self.leader, self.leader_epoch = Role.FOLLOWER, leader, leader_epoch
            self.leader_state = None
            self.fail_waiters(KafkaError(f"{self.name} is now led by broker {leader}",
                                         code=ErrorCode.NOT_LEADER_OR_FOLLOWER))
        self._wake(self._consumer_watchers | self._replica_watchers)

    async def make_offline(self, leader_epoch: int) -> None:
        """No leader here (leaderless, reassigned away, or the topic deleted)."""
        async with self._lock:
            self.role, self.leader, self.leader_state = Role.NONE, -1, None
            self.leader_epoch = leader_epoch
            self.fail_waiters(KafkaError(f"{self.name} has no leader on this broker",
                                         code=ErrorCode.NOT_LEADER_OR_FOLLOWER))
        self._wake(self._consumer_watchers | self._replica_watchers)

    # ------------------------------------------------------------------ leader side

    def require_leader(self, current_leader_epoch: int = -1, *, lease_ok: bool = True) -> None:
        """NOT_LEADER_OR_FOLLOWER unless this broker leads; the client's leader epoch checked as in KIP-320.

        FENCED_LEADER_EPOCH when the client's epoch is older than ours,
        UNKNOWN_LEADER_EPOCH when it is newer (our metadata lags).
        """
        if current_leader_epoch >= 0:
            if current_leader_epoch < self.leader_epoch:
                raise KafkaError(f"leader epoch {current_leader_epoch} of {self.name} is fenced by epoch "
                                 f"{self.leader_epoch}", code=ErrorCode.FENCED_LEADER_EPOCH)
            if current_leader_epoch > self.leader_epoch:
                raise KafkaError(f"leader epoch {current_leader_epoch} of {self.name} is newer than this "
                                 f"broker's {self.leader_epoch}", code=ErrorCode.UNKNOWN_LEADER_EPOCH)
        if self.role is not Role.LEADER or not lease_ok:
            raise KafkaError(f"broker {self.node_id} is not the leader of {self.name}",
                             code=ErrorCode.NOT_LEADER_OR_FOLLOWER)

    def require_enough_replicas(self, *, after_append: bool = False) -> None:
        state = self.leader_state
        isr = len(state.isr) if state is not None else 0
        if isr < self.min_insync_replicas:
            code = ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND if after_append else ErrorCode.NOT_ENOUGH_REPLICAS
            raise KafkaError(f"the in-sync replicas of {self.topic} ({isr}) are fewer than min.insync.replicas "
                             f"({self.min_insync_replicas})", code=code)

    async def append_as_leader(self, records: bytes, *, acks_all: bool) -> AppendInfo:
        """Append a client's batches at the current leader epoch (the log checks the producer's sequences).

        acks=all writes are refused up front (NOT_ENOUGH_REPLICAS) while the ISR is
        smaller than ``min.insync.replicas``. A retried idempotent batch comes back
        as a duplicate with its original offsets and nothing is written.
        """
        self.require_leader()
        if acks_all:
            self.require_enough_replicas()
        info: AppendInfo | None = None
        if len(records) <= INLINE_APPEND_BYTES and not self._lock.locked():
            with contextlib.suppress(WouldBlock):  # it would fsync, roll or wait for the log's lock
                info = self.log.append_as_leader(records, self.leader_epoch, blocking=False)
        if info is None:
            async with self._lock:
                self.require_leader()  # leadership may have moved while we waited
                info = await asyncio.to_thread(self.log.append_as_leader, records, self.leader_epoch)
        if not info.duplicate:
            self._wake(self._replica_watchers)
            self.maybe_advance_high_watermark()
        return info

    async def write_txn_marker(self, producer_id: int, producer_epoch: int, *, commit: bool,
                               coordinator_epoch: int) -> int:
        """Append the marker ending ``producer_id``'s transaction here; its offset (the caller waits for
        ``wait_for_replication(offset + 1)``: markers are written with acks=all)."""
        self.require_leader()
        marker = build_marker(producer_id, producer_epoch, commit=commit, coordinator_epoch=coordinator_epoch,
                              timestamp=int(now_ms()))
        info: AppendInfo | None = None
        if not self._lock.locked():  # a marker is tiny: on the event loop unless it would block, as appends do
            with contextlib.suppress(WouldBlock):
                info = self.log.append_as_leader(marker, self.leader_epoch, control=True, blocking=False)
        if info is None:
            async with self._lock:
                self.require_leader()
                info = await asyncio.to_thread(self.log.append_as_leader, marker, self.leader_epoch, control=True)
        self._wake(self._replica_watchers)
        self.maybe_advance_high_watermark()
        return info.last_offset

    @property
    def last_stable_offset(self) -> int:
        """Offsets below it are decided (KIP-98): no open transaction starts below it; never above the HW."""
        return self.log.first_unstable_offset(self.high_watermark)

    async def wait_for_replication(self, end: int, timeout: float) -> None:
        """acks=all: until the high watermark reaches ``end``, then the ISR must still be large enough.

        REQUEST_TIMED_OUT if it does not in time; NOT_LEADER_OR_FOLLOWER if leadership moves meanwhile.
        """
        if self.high_watermark < end:
            future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiters.append((end, future))
            try:
                await asyncio.wait_for(future, timeout)
            except TimeoutError:
                raise KafkaError(f"the write was not replicated to the whole ISR within {timeout:.3f} s",
                                 code=ErrorCode.REQUEST_TIMED_OUT) from None
            finally:
                self._waiters = [(w, f) for w, f in self._waiters if f is not future]
        self.require_enough_replicas(after_append=True)

    def fail_waiters(self, error: KafkaError) -> None:
        for _, future in self._waiters:
            if not future.done():
                future.set_exception(error)
        self._waiters = []

    def on_follower_fetch(self, replica: int, fetch_offset: int, now: float) -> tuple[int, ...] | None:
        """A follower's progress; the ISR it should join, if its fetch put it in sync."""
        state = self.leader_state
        if state is None:
            return None
        state.on_follower_fetch(replica, fetch_offset, self.log.log_end_offset, now)
        self.maybe_advance_high_watermark()
        return state.expanded_isr() if replica not in state.isr else None

    def maybe_advance_high_watermark(self) -> None:
        """Recompute a leader's high watermark from the ISR's log ends; wake who waits on it."""
        state = self.leader_state
        if state is not None and state.advance_high_watermark(self.log.log_end_offset):
            self._set_high_watermark(state.high_watermark)

    def _set_high_watermark(self, offset: int) -> None:
        offset = min(offset, self.log.log_end_offset)
        if offset == self.high_watermark:
            return
        self.high_watermark = offset
        self.log.high_watermark_moved(offset)
        still: list[tuple[int, asyncio.Future[None]]] = []
        for wanted, future in self._waiters:
            if offset >= wanted:
                if not future.done():
                    future.set_result(None)
            else:
                still.append((wanted, future))
        self._waiters = still
        self._wake(self._consumer_watchers)

    # ------------------------------------------------------------------ reads (leader)

    async def read(self, fetch_offset: int, max_bytes: int, *, to_log_end: bool,
                   committed: bool = False) -> ReadResult:
        """Whole batches from ``fetch_offset``: to the log end for followers, below the high watermark for
        read_uncommitted consumers, below the last stable offset for read_committed ones (with the aborted
        transactions overlapping what is returned).

        Raises OFFSET_OUT_OF_RANGE outside the log. Skips the read when nothing
        is visible yet (a long poll comes back here often).
        """
        log = self.log
        high_watermark = self.high_watermark
        stable = self.last_stable_offset
        up_to = stable if committed and not to_log_end else self.visible_end(to_log_end=to_log_end)
        if log.log_start_offset <= fetch_offset and up_to <= fetch_offset <= log.log_end_offset:
            return ReadResult(None, high_watermark, log.log_start_offset, up_to, stable, () if committed else None)
        region: FileRegion | None = None
        if fetch_offset >= log.active_segment_base:
            # The tail was written moments ago and sits in the page cache: a few header preads, cheaper
            # than a thread hop. Older data may need the disk, which must not stall the event loop.
            with contextlib.suppress(WouldBlock):
                region = log.read(fetch_offset, max(max_bytes, 1), up_to, blocking=False)
        if region is None:
            try:
                region = await asyncio.to_thread(log.read, fetch_offset, max(max_bytes, 1), up_to)
            except OffsetMovedToTieredStorageError:
                if to_log_end or self.remote is None:
                    raise  # a follower rebuilds its state from the remote tier (KIP-405)
                return await self._read_remote(fetch_offset, max_bytes, up_to, committed=committed,
                                               high_watermark=high_watermark, stable=stable)
        aborted = None
        if committed:
            aborted = tuple((a.producer_id, a.first_offset) for a in log.collect_aborted(fetch_offset, up_to)) \
                if region.length else ()
        return ReadResult(region if region.length else None, high_watermark, log.log_start_offset, up_to, stable,
                          aborted)

    async def _read_remote(self, fetch_offset: int, max_bytes: int, up_to: int, *, committed: bool,
                           high_watermark: int, stable: int) -> ReadResult:
        """A consumer's read below the local log start: the remote tier's bytes, read on the fetch executor."""
        remote = self.remote
        assert remote is not None
        try:
            data, aborted = await asyncio.get_running_loop().run_in_executor(
                remote.fetch_executor, remote.read, self.topic, self.index, fetch_offset, max(max_bytes, 1),
                up_to, committed)
        except RemoteStorageError as exc:
            raise KafkaStorageError(f"reading {self.name} at {fetch_offset} from the remote tier: {exc}") from exc
        return ReadResult(None, high_watermark, self.log.log_start_offset, up_to, stable,
                          tuple((a.producer_id, a.first_offset) for a in aborted) if committed else None,
                          data or None)

    def visible_end(self, *, to_log_end: bool, committed: bool = False) -> int:
        if to_log_end:
            return self.log.log_end_offset
        return self.last_stable_offset if committed else self.high_watermark

    async def offset_for_timestamp(self, timestamp: int) -> TimestampAndOffset | None:
        """ListOffsets by time, among offsets consumers may see (below the high watermark).

        A tiered log is searched in the remote tier first (its records are the older ones), then locally."""
        found = None
        log, remote = self.log, self.remote
        if timestamp >= 0 and remote is not None and log.log_start_offset < log.local_log_start_offset:
            try:
                hit = await asyncio.get_running_loop().run_in_executor(
                    remote.fetch_executor, remote.offset_for_timestamp, self.topic, self.index, timestamp,
                    log.log_start_offset)
            except RemoteStorageError as exc:
                raise KafkaStorageError(f"looking up {self.name} by time in the remote tier: {exc}") from exc
            if hit is not None:
                found = TimestampAndOffset(hit[0], hit[1], log.epoch_for(hit[1]))
        if found is None:
            found = await asyncio.to_thread(log.offset_for_timestamp, timestamp)
        return found if found is not None and found.offset < self.high_watermark else None

    def end_offset_for_epoch(self, epoch: int) -> EpochEndOffset:
        return self.log.end_offset_for_epoch(epoch)

    async def delete_records(self, offset: int) -> int:
        """DeleteRecords up to ``offset`` (at most the high watermark); the new log start offset.

        Followers move their log start to it when they next fetch (it travels in Fetch).
        """
        if not 0 <= offset <= self.high_watermark:
            raise OffsetOutOfRangeError(f"Cannot delete records before offset {offset}: "
                                        f"the high watermark is {self.high_watermark}.")
        return await asyncio.to_thread(self.log.delete_records_before, offset)

    # ------------------------------------------------------------------ follower side (the fetcher's)

    def follows(self, leader_epoch: int) -> bool:
        return self.role is Role.FOLLOWER and self.leader_epoch == leader_epoch and not self.log.closed

    async def append_as_follower(self, records: bytes, leader_epoch: int) -> bool:
        """Append replicated batches if this broker still follows at ``leader_epoch``; False if it does not."""
        if len(records) <= INLINE_APPEND_BYTES and not self._lock.locked():
            if not self.follows(leader_epoch):
                return False
            with contextlib.suppress(WouldBlock):  # it would fsync, roll or wait for the log's lock
                self.log.append_as_follower(records, blocking=False)
                return True
        async with self._lock:
            if not self.follows(leader_epoch):
                return False
            await asyncio.to_thread(self.log.append_as_follower, records)
            return True

    async def truncate(self, offset: int, leader_epoch: int, *, fully: bool = False) -> bool:
        """Truncate to ``offset`` (or empty the log and restart it there) while following at ``leader_epoch``."""
        async with self._lock:
            if not self.follows(leader_epoch):
                return False
            if fully:
                await asyncio.to_thread(self.log.truncate_fully_and_start_at, offset)
            else:
                await asyncio.to_thread(self.log.truncate_to, offset)
            self.high_watermark = min(self.high_watermark, self.log.log_end_offset)
            return True

    async def restore_from_remote(self, state: RestoredState, leader_log_start: int, leader_epoch: int) -> bool:
        """Below the leader's local log start: restart the log where the remote tier's state says (KIP-405)."""
        async with self._lock:
            if not self.follows(leader_epoch):
                return False
            await asyncio.to_thread(self.log.restore_from_remote, state.next_offset,
                                    min(leader_log_start, state.next_offset), state.epochs, state.producer_snapshot,
                                    state.highest_remote)
            self.high_watermark = min(self.high_watermark, self.log.log_end_offset)
            return True

    async def follower_update(self, leader_high_watermark: int, leader_log_start: int) -> None:
        """After a fetch: the leader's high watermark (capped at our log end), and its log start (DeleteRecords)."""
        if self.role is not Role.FOLLOWER:
            return
        self._set_high_watermark(min(leader_high_watermark, self.log.log_end_offset))
        if self.log.log_start_offset < leader_log_start <= self.high_watermark:
            await asyncio.to_thread(self.log.delete_records_before, leader_log_start)

    # ------------------------------------------------------------------ long polls

    def watch(self, event: asyncio.Event, *, replica: bool) -> Callable[[], None]:
        """Set ``event`` when there may be new data for this reader; returns the call that stops watching."""
        watchers = self._replica_watchers if replica else self._consumer_watchers
        watchers.add(event)
        return lambda: watchers.discard(event)

    def wake_all(self) -> None:
        """End every long poll on this partition early (shutdown)."""
        self._wake(self._consumer_watchers | self._replica_watchers)

    @staticmethod
    def _wake(watchers: set[asyncio.Event]) -> None:
        for event in watchers:
            event.set()
