"""Partition leadership applied to this broker's logs.

Every metadata refresh hands the cluster's partition states to ``apply``, which
makes each hosted ``Partition`` a leader (tracking its followers; the log's
epoch cache starts the new epoch at the log end), a follower (its leader's
fetcher pulls it, after truncating), or neither. A leader asks the metadata
store to shrink or grow the ISR through an ``IsrWriter`` with a compare-and-set
that fails for a leader that has been replaced. High watermarks are
checkpointed per data directory (Kafka's ``replication-offset-checkpoint``) so
consumers' view survives a restart.

It is also Kafka's purgatory for the two waits a request can make on replication:
``delayed_fetch`` (a Fetch long poll, until enough bytes are visible or its wait is
over) and ``wait_for_acks`` (a Produce with acks=all, until the ISR has the writes),
so request handlers describe what to read or write and never run a wait themselves.

The replica manager depends downward only: on the log manager, the metadata
cache, and the small interfaces below, which the broker (the composition root)
implements.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import threading
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Generic, Protocol, TypeVar

import psycopg

from dataplane.cluster.metadata_cache import MetadataCache
from dataplane.cluster.store import PartitionState, TopicState
from dataplane.protocol.errors import ErrorCode, KafkaError
from dataplane.replication.fetcher import FetcherSettings, ReplicaFetcher
from dataplane.replication.partition import Partition, Role, now_ms
from dataplane.storage import LogConfig, LogManager
from dataplane.storage.checkpoints import read_checkpoint, write_checkpoint
from dataplane.storage.remote.manager import RemoteLogManager
from dataplane.storage.remote.store import RemoteStorageError

log = logging.getLogger(__name__)
HW_CHECKPOINT_FILE = "replication-offset-checkpoint"
Key = tuple[str, int]
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class FetchPass(Generic[T]):
    """One pass of a fetch over its partitions: the answer it would send now, the bytes it found, and each
    partition it read with the end of what was visible there when it read (so a write landing during the
    pass is noticed, not slept through)."""

    answer: T
    found_bytes: int
    read: Sequence[tuple[Partition, int]]


class IsrWriter(Protocol):
    """Writes a leader's ISR change to the metadata store (a compare-and-set on leader, epochs)."""

    async def alter_isr(self, topic: TopicState, partition: int, *, leader_epoch: int, partition_epoch: int,
                        isr: tuple[int, ...]) -> PartitionState | None:
        """The partition's new state, or None when the partition moved on (the change is refused)."""


class ReplicaListener(Protocol):
    """What the broker wants to hear from the replica manager."""

    def leadership_changed(self, topic: str, partition: int, leads: bool) -> None:
        """This broker started or stopped leading the partition (the group coordinator follows this)."""

    def request_metadata_refresh(self) -> None:
        """Our metadata may be stale (a refused ISR change, a leader that disagrees)."""


class TopicConfigs(Protocol):
    """The topic configs in force (topic override, then cluster default, then Kafka's default)."""

    def log_config(self, topic: TopicState, cluster_defaults: Mapping[str, str] | None = None) -> LogConfig: ...

    def min_insync_replicas(self, topic: TopicState, cluster_defaults: Mapping[str, str] | None = None) -> int: ...


class ReplicationPacer:
    """The follower replication throttle's clock: one budget per broker, shared by all its fetchers.

    Kafka's follower quota bounds a broker's replication bytes, not each leader connection's: the bytes
    every fetch brought advance one clock by ``bytes / rate``, and a fetcher waits until the clock has
    caught up with it. Idle time is not saved up (the clock never starts behind a fetch's own start).
    Owned by the replica manager; used on the broker's event loop only.
    """

    def __init__(self) -> None:
        self.paced_until = 0.0  # monotonic seconds: when the bytes fetched so far are paid for

    def delay(self, received: int, started: float, now: float, rate: float) -> float:
        """Seconds a fetch of ``received`` bytes that began at ``started`` must wait, at ``now``."""
        self.paced_until = max(self.paced_until, started) + received / rate
        return max(0.0, self.paced_until - now)


@dataclass(frozen=True, slots=True)
class ReplicaSettings:
    lag_time_max_ms: int = 30_000
    fetcher: FetcherSettings = field(default_factory=FetcherSettings)
    throttled_rate: int = 0  # follower.replication.throttled.rate while catching up as a new replica; 0: none


class ReplicaManager:
    """Every partition this broker hosts, and the fetchers that pull the ones it follows.

    Owned by the broker; runs on its event loop (the high-watermark checkpoint is
    written from worker threads under its own lock).
    """

    def __init__(self, node_id: int, logs: LogManager, metadata: MetadataCache, configs: TopicConfigs,
                 isr_writer: IsrWriter, listener: ReplicaListener, *, lease_ok: Callable[[], bool],
                 data_dir: Path, settings: ReplicaSettings) -> None:
        self.node_id = node_id
        self.logs = logs
        self.metadata = metadata
        self.configs = configs
        self.isr_writer = isr_writer
        self.listener = listener
        self.lease_ok = lease_ok
        self.settings = settings
        self.partitions: dict[Key, Partition] = {}
        self.fetchers: dict[int, ReplicaFetcher] = {}
        self._following: dict[Key, int] = {}  # partition -> the leader whose fetcher pulls it
        self._checkpoint_path = data_dir / HW_CHECKPOINT_FILE
        self._checkpointed: dict[Key, int] = {}
        self._checkpoint_lock = threading.Lock()
        self._isr_changes: set[Key] = set()
        self._tasks: list[asyncio.Task[None]] = []
        self._frozen = False
        self._fetcher_settings = dataclasses.replace(settings.fetcher, throttle=self.pace_replication)
        self._pacer = ReplicationPacer()
        self.remote: RemoteLogManager | None = None  # the broker's remote tier, when it has one

    def freeze(self) -> None:
        """No more ISR changes: this broker is shutting down."""
        self._frozen = True

    # ------------------------------------------------------------------ lifecycle

    def load_checkpoint(self) -> None:
        for entry in read_checkpoint(self._checkpoint_path) or []:
            with contextlib.suppress(ValueError, IndexError):
                self._checkpointed[(entry[0], int(entry[1]))] = int(entry[2])

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._isr_loop(), name="isr-shrink"),
                       loop.create_task(self._checkpoint_loop(), name="hw-checkpoint")]

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        for fetcher in self.fetchers.values():
            await fetcher.stop()
        self.fetchers.clear()
        self.write_checkpoint()

    def write_checkpoint(self) -> None:
        """Runs in worker threads (the timer's, and the one at shutdown): one writer at a time."""
        with self._checkpoint_lock:
            entries = {key: p.high_watermark for key, p in list(self.partitions.items()) if not p.log.closed}
            if entries != self._checkpointed:
                write_checkpoint(self._checkpoint_path, [[t, p, hw] for (t, p), hw in sorted(entries.items())])
                self._checkpointed = entries

    async def _checkpoint_loop(self) -> None:
        while True:
            await asyncio.sleep(1.0)
            try:
                await asyncio.to_thread(self.write_checkpoint)
            except OSError as exc:
                log.warning("cannot write the high-watermark checkpoint: %s", exc)

    def wake_all(self) -> None:
        """End every long poll early (shutdown)."""
        for partition in self.partitions.values():
            partition.wake_all()

    @property
    def stopping(self) -> bool:
        return self._frozen

    # ------------------------------------------------------------------ the purgatory (request handlers)

    async def delayed_fetch(self, read_once: Callable[[], Awaitable[FetchPass[T]]], *, min_bytes: int,
                            max_wait: float, to_log_end: bool, committed: bool) -> T:
        """Kafka's delayed fetch: run ``read_once`` until it finds ``min_bytes``, ``max_wait`` seconds pass,
        it reads nothing, or the broker stops; the last pass's answer.

        After the first pass the fetch watches each partition it read (consumers: their
        high watermark or, ``committed``, last stable offset; followers, ``to_log_end``:
        their log end), so only those partitions wake it, and data that arrived while the
        first pass read, before it watched, wakes it at once.
        """
        deadline = time.monotonic() + max_wait
        woken = asyncio.Event()
        stop_watching: list[Callable[[], None]] = []
        try:
            while True:
                woken.clear()
                found = await read_once()
                if not stop_watching:
                    stop_watching = [p.watch(woken, replica=to_log_end) for p, _ in found.read]
                    if any(p.visible_end(to_log_end=to_log_end, committed=committed) != seen
                           for p, seen in found.read):
                        woken.set()
                remaining = deadline - time.monotonic()
                if found.found_bytes >= min_bytes or remaining <= 0 or self._frozen or not found.read:
                    return found.answer
                if not woken.is_set():
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(woken.wait(), remaining)
        finally:
            for stop in stop_watching:
                stop()

    async def wait_for_acks(self, writes: Sequence[tuple[Partition, int]],
                            timeout: float) -> list[KafkaError | None]:
        """acks=all for one request's writes together: per (partition, end offset), None once the ISR has it,
        or the error (REQUEST_TIMED_OUT, NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS_AFTER_APPEND)."""
        outcomes = await asyncio.gather(*(p.wait_for_replication(end, timeout) for p, end in writes),
                                        return_exceptions=True)
        results: list[KafkaError | None] = []
        for outcome in outcomes:
            if isinstance(outcome, KafkaError):
                results.append(outcome)
            elif isinstance(outcome, BaseException):
                raise outcome
            else:
                results.append(None)
        return results

    async def delete_logs(self, topics: Sequence[TopicState]) -> None:
        """Remove the partition directories of deleted topics (after the metadata went and this broker
        re-read it, so no request can re-open a log half-way; a crash in between leaves orphan
        directories rather than a topic without its data)."""
        for topic in topics:
            for partition in topic.partitions:
                await asyncio.to_thread(self.logs.delete_log, topic.name, partition.partition)

    # ------------------------------------------------------------------ lookups (request handlers)

    def partition(self, topic: str, index: int) -> Partition | None:
        return self.partitions.get((topic, index))

    def leader_partition(self, topic: str, index: int, current_leader_epoch: int = -1) -> Partition:
        """The partition as led by this broker, checking the client's leader epoch (KIP-320).

        UNKNOWN_TOPIC_OR_PARTITION when the cluster has no such partition;
        NOT_LEADER_OR_FOLLOWER when another broker leads it (or none does, or our
        lease may have lapsed); FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH for a
        client epoch older / newer than ours.
        """
        _, state = self.metadata.partition(topic, index)
        found = self.partitions.get((topic, index))
        if found is None:
            raise KafkaError(f"broker {self.node_id} is not the leader of {topic}-{index} (leader: {state.leader})",
                             code=ErrorCode.NOT_LEADER_OR_FOLLOWER)
        found.require_leader(current_leader_epoch, lease_ok=self.lease_ok())
        return found

    # ------------------------------------------------------------------ applying metadata

    async def apply(self, topics: Mapping[str, TopicState], cluster_defaults: Mapping[str, str]) -> None:
        """Bring every hosted partition's role in line with the metadata (called under the refresh lock)."""
        for topic in topics.values():
            min_isr = self.configs.min_insync_replicas(topic, cluster_defaults)
            for state in topic.partitions:
                key = (topic.name, state.partition)
                found = self.partitions.get(key)
                if self.node_id not in state.replicas:
                    if found is not None:  # reassigned away: this copy is no longer wanted
                        await self._stop_replica(found, state.leader_epoch)
                        del self.partitions[key]
                        await asyncio.to_thread(self.logs.delete_log, *key)
                        log.info("removed replica %s-%d (reassigned to %s)", *key, list(state.replicas))
                    continue
                if found is None or found.log.closed:
                    found = await self._open(topic, state.partition, cluster_defaults)
                found.min_insync_replicas = min_isr
                if state.leader == self.node_id:
                    if found.role is not Role.LEADER or found.leader_epoch != state.leader_epoch:
                        await self._become_leader(found, state)
                    else:
                        found.update_membership(state, now_ms())
                elif state.leader < 0:
                    if found.role is not Role.NONE or found.leader_epoch != state.leader_epoch:
                        await self._stop_replica(found, state.leader_epoch)
                elif found.role is not Role.FOLLOWER or found.leader_epoch != state.leader_epoch \
                        or found.leader != state.leader:
                    await self._become_follower(found, state)
        for key in [k for k in self.partitions if k[0] not in topics]:
            # The topic was deleted (through any broker): its data goes, or a topic created again under
            # the same name would find the old records in this replica.
            await self._stop_replica(self.partitions.pop(key), -1)
            await asyncio.to_thread(self.logs.delete_log, *key)
            log.info("removed replica %s-%d (topic deleted)", *key)

    async def _open(self, topic: TopicState, index: int, cluster_defaults: Mapping[str, str]) -> Partition:
        key = (topic.name, index)
        config = self.configs.log_config(topic, cluster_defaults)
        opened = await asyncio.to_thread(self.logs.get_or_create_log, topic.name, index, config)
        found = Partition(topic.name, index, opened, node_id=self.node_id,
                          high_watermark=self._checkpointed.get(key, 0))
        found.remote = self.remote
        self.partitions[key] = found
        return found

    async def _become_leader(self, partition: Partition, state: PartitionState) -> None:
        self._unfollow(partition)
        await partition.make_leader(state, now_ms())
        log.info("leading %s at epoch %d (replicas %s, isr %s, log end %d, high watermark %d)", partition.name,
                 state.leader_epoch, list(state.replicas), list(state.isr), partition.log.log_end_offset,
                 partition.high_watermark)
        self.listener.leadership_changed(partition.topic, partition.index, True)

    async def _become_follower(self, partition: Partition, state: PartitionState) -> None:
        was_leader = partition.role is Role.LEADER
        self._unfollow(partition)
        await partition.make_follower(state.leader, state.leader_epoch)
        fetcher = self.fetchers.get(state.leader)
        if fetcher is None:
            fetcher = self.fetchers[state.leader] = ReplicaFetcher(self, state.leader, self._fetcher_settings)
            fetcher.start()
        fetcher.follow(partition.topic, partition.index, state.leader_epoch)
        self._following[(partition.topic, partition.index)] = state.leader
        log.info("following broker %d for %s at epoch %d", state.leader, partition.name, state.leader_epoch)
        if was_leader:
            self.listener.leadership_changed(partition.topic, partition.index, False)

    async def _stop_replica(self, partition: Partition, leader_epoch: int) -> None:
        was_leader = partition.role is Role.LEADER
        self._unfollow(partition)
        await partition.make_offline(leader_epoch)
        if was_leader:
            self.listener.leadership_changed(partition.topic, partition.index, False)

    def _unfollow(self, partition: Partition) -> None:
        key = (partition.topic, partition.index)
        leader = self._following.pop(key, None)
        if leader is not None and leader in self.fetchers:
            self.fetchers[leader].unfollow(*key)

    # ------------------------------------------------------------------ leader side

    def on_follower_fetch(self, partition: Partition, replica: int, fetch_offset: int) -> None:
        """A follower fetched from a partition we lead: its progress, the high watermark, maybe an ISR expansion."""
        expanded = partition.on_follower_fetch(replica, fetch_offset, now_ms())
        if expanded is not None:
            self._schedule_isr_change(partition, expanded)

    def _schedule_isr_change(self, partition: Partition, isr: tuple[int, ...]) -> None:
        key = (partition.topic, partition.index)
        if key in self._isr_changes or self._frozen:
            return
        self._isr_changes.add(key)
        task = asyncio.get_running_loop().create_task(self._alter_isr(partition, isr))
        self._tasks.append(task)
        task.add_done_callback(self._tasks.remove)

    async def _alter_isr(self, partition: Partition, isr: tuple[int, ...]) -> None:
        key = (partition.topic, partition.index)
        state = partition.leader_state
        topic = self.metadata.topic(partition.topic)
        try:
            if state is None or topic is None:
                return
            log.info("%s %s ISR %s -> %s", "expanding" if len(isr) > len(state.isr) else "shrinking",
                     partition.name, list(state.isr), list(isr))
            result = await self.isr_writer.alter_isr(topic, partition.index, leader_epoch=state.leader_epoch,
                                                     partition_epoch=state.partition_epoch, isr=isr)
            if result is None:
                log.info("ISR change of %s refused: the partition moved on; re-reading metadata", partition.name)
                self.listener.request_metadata_refresh()
                return
            self.metadata.patch_partition(partition.topic, result)
            if partition.leader_state is state:
                partition.update_membership(result, now_ms())
        except (psycopg.Error, KafkaError) as exc:
            log.warning("ISR change of %s failed (will retry): %s", partition.name, exc)
        finally:
            self._isr_changes.discard(key)

    async def _isr_loop(self) -> None:
        interval = min(self.settings.lag_time_max_ms / 2000, 1.0)
        while True:
            await asyncio.sleep(interval)
            now = now_ms()
            for partition in list(self.partitions.values()):
                state = partition.leader_state
                if partition.role is Role.LEADER and state is not None and self.lease_ok():
                    shrunk = state.shrunk_isr(now, self.settings.lag_time_max_ms)
                    if shrunk is not None:
                        self._schedule_isr_change(partition, shrunk)

    # ------------------------------------------------------------------ follower side (the fetchers' host)

    def leader_address(self, leader: int) -> tuple[str, int] | None:
        return self.metadata.broker_address(leader)

    def follower_partition(self, topic: str, index: int, leader_epoch: int) -> Partition | None:
        """The partition while this broker still follows it at ``leader_epoch``; None once that changed."""
        found = self.partitions.get((topic, index))
        return found if found is not None and found.follows(leader_epoch) else None

    def request_metadata_refresh(self) -> None:
        self.listener.request_metadata_refresh()

    async def restore_from_remote(self, replica: Partition, leader_local_start: int, leader_log_start: int,
                                  leader_epoch: int) -> bool:
        """A follower below its leader's local log start (KIP-405): the remote tier's state, then the restart."""
        remote = self.remote
        if remote is None:
            log.warning("%s is below its leader's local log start %d but this broker has no remote storage "
                        "configured", replica.name, leader_local_start)
            return False
        try:
            state = await asyncio.get_running_loop().run_in_executor(
                remote.fetch_executor, remote.restore_state, replica.topic, replica.index, leader_local_start)
        except RemoteStorageError as exc:
            log.warning("cannot rebuild %s from the remote tier yet: %s", replica.name, exc)
            return False
        log.info("rebuilding %s from the remote tier: restarting at %d (remote tier up to %d)", replica.name,
                 state.next_offset, state.highest_remote)
        return await replica.restore_from_remote(state, leader_log_start, leader_epoch)

    async def pace_replication(self, received: int, started: float) -> None:
        """Hold a fetcher back so that all of this broker's fetchers together stay under the throttle."""
        rate = self.throttle()
        if rate:
            delay = self._pacer.delay(received, started, time.monotonic(), rate)
            if delay > 0:
                await asyncio.sleep(delay)

    def throttle(self) -> float | None:
        """The replication byte rate while this broker is catching up as a reassignment's new replica."""
        dynamic = self.metadata.dynamic_broker_config("follower.replication.throttled.rate")
        rate = int(dynamic) if dynamic is not None else self.settings.throttled_rate
        if not rate:
            return None
        for topic in self.metadata.topics.values():
            for state in topic.partitions:
                if self.node_id in state.adding:
                    return float(rate)
        return None
