"""Partition leadership applied to this broker's logs.

Every metadata refresh hands the cluster's partition states to ``apply``, which
turns each hosted partition into a leader (a ``LeaderState`` tracking its
followers; the log's epoch cache starts the new epoch at the log end) or a
follower (its leader's fetcher pulls it, after truncating), or stops it. A
leader moves its high watermark as followers fetch, and asks the metadata store
to shrink or grow the ISR with a compare-and-set that fails for a leader that
has been replaced. High watermarks are checkpointed per data directory
(Kafka's ``replication-offset-checkpoint``) so consumers' view survives a restart.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import psycopg

from dataplane.cluster.store import PartitionState, TopicState
from dataplane.protocol.errors import ErrorCode, KafkaError
from dataplane.replication.fetcher import FetcherSettings, ReplicaFetcher
from dataplane.replication.leader import LeaderState
from dataplane.replication.partition import PartitionRuntime, Role
from dataplane.storage import Log
from dataplane.storage.checkpoints import read_checkpoint, write_checkpoint

if TYPE_CHECKING:
    from dataplane.server.broker import Broker

log = logging.getLogger(__name__)
HW_CHECKPOINT_FILE = "replication-offset-checkpoint"
Key = tuple[str, int]


def now_ms() -> float:
    return time.monotonic() * 1000


class ReplicaManager:
    def __init__(self, broker: Broker, data_dir: Path, *, lag_time_max_ms: int, fetcher: FetcherSettings,
                 on_leadership: Callable[[str, int, bool], None]) -> None:
        self.broker = broker
        self.node_id = broker.config.node_id
        self.runtimes: dict[Key, PartitionRuntime] = broker.runtimes
        self.lag_time_max_ms = lag_time_max_ms
        self.fetcher_settings = fetcher
        self.fetchers: dict[int, ReplicaFetcher] = {}
        self._following: dict[Key, int] = {}  # partition -> the leader whose fetcher pulls it
        self._checkpoint_path = data_dir / HW_CHECKPOINT_FILE
        self._checkpointed: dict[Key, int] = {}
        self._checkpoint_lock = threading.Lock()
        self._isr_changes: set[Key] = set()
        self._tasks: list[asyncio.Task[None]] = []
        self._on_leadership = on_leadership  # (topic, partition, leads): the group coordinator follows this
        self._frozen = False

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

    def initial_high_watermark(self, key: Key) -> int:
        return self._checkpointed.get(key, 0)

    def write_checkpoint(self) -> None:
        """Runs in worker threads (the timer's, and the one at shutdown): one writer at a time."""
        with self._checkpoint_lock:
            entries = {key: rt.high_watermark for key, rt in list(self.runtimes.items()) if not rt.log.closed}
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

    # ------------------------------------------------------------------ applying metadata

    async def apply(self, topics: Mapping[str, TopicState]) -> None:
        """Bring every hosted partition's role in line with the metadata (called under the refresh lock)."""
        for topic in topics.values():
            for state in topic.partitions:
                key = (topic.name, state.partition)
                runtime = self.runtimes.get(key)
                if self.node_id not in state.replicas:
                    if runtime is not None:  # reassigned away: this copy is no longer wanted
                        self._stop_replica(key, runtime)
                        del self.runtimes[key]
                        await asyncio.to_thread(self.broker.manager.delete_log, *key)
                        log.info("removed replica %s-%d (reassigned to %s)", *key, list(state.replicas))
                    continue
                if runtime is None or runtime.log.closed:
                    runtime = await self._open(topic, state.partition)
                if state.leader == self.node_id:
                    if runtime.role is not Role.LEADER or runtime.leader_epoch != state.leader_epoch:
                        await self._become_leader(key, topic, state, runtime)
                    elif runtime.leader_state is not None and \
                            state.partition_epoch > runtime.leader_state.partition_epoch:
                        runtime.leader_state.update_membership(state.replicas, state.isr, state.partition_epoch,
                                                               now_ms())
                        self.advance(runtime)
                elif state.leader < 0:
                    if runtime.role is not Role.NONE or runtime.leader_epoch != state.leader_epoch:
                        self._stop_replica(key, runtime)
                        runtime.leader_epoch = state.leader_epoch
                elif runtime.role is not Role.FOLLOWER or runtime.leader_epoch != state.leader_epoch \
                        or runtime.leader != state.leader:
                    self._become_follower(key, state, runtime)
        for key in [k for k in self.runtimes if k[0] not in topics]:
            self._stop_replica(key, self.runtimes[key])

    async def _open(self, topic: TopicState, partition: int) -> PartitionRuntime:
        key = (topic.name, partition)

        def open_log() -> Log:
            found = self.broker.manager.get_log(topic.name, partition)
            if found is None:
                found = self.broker.manager.get_or_create_log(topic.name, partition,
                                                              self.broker.topic_log_config(topic.configs))
            return found
        runtime = PartitionRuntime(await asyncio.to_thread(open_log), self.initial_high_watermark(key))
        self.runtimes[key] = runtime
        return runtime

    async def _become_leader(self, key: Key, topic: TopicState, state: PartitionState,
                             runtime: PartitionRuntime) -> None:
        self._unfollow(key)
        await asyncio.to_thread(runtime.log.begin_leader_epoch, state.leader_epoch)
        if runtime.role is not Role.LEADER:
            runtime.producers = None  # replicated batches since it was built: rebuild from the log
        runtime.role, runtime.leader, runtime.leader_epoch = Role.LEADER, self.node_id, state.leader_epoch
        runtime.leader_state = LeaderState(
            self.node_id, state.replicas, state.isr, leader_epoch=state.leader_epoch,
            partition_epoch=state.partition_epoch, epoch_start_offset=runtime.log.log_end_offset,
            high_watermark=runtime.high_watermark, now=now_ms())
        log.info("leading %s-%d at epoch %d (replicas %s, isr %s, log end %d, high watermark %d)", *key,
                 state.leader_epoch, list(state.replicas), list(state.isr), runtime.log.log_end_offset,
                 runtime.high_watermark)
        self.advance(runtime)
        self._on_leadership(key[0], key[1], True)

    def _become_follower(self, key: Key, state: PartitionState, runtime: PartitionRuntime) -> None:
        was_leader = runtime.role is Role.LEADER
        runtime.role, runtime.leader, runtime.leader_epoch = Role.FOLLOWER, state.leader, state.leader_epoch
        runtime.leader_state = None
        runtime.fail_waiters(KafkaError(f"{key[0]}-{key[1]} is now led by broker {state.leader}",
                                        code=ErrorCode.NOT_LEADER_OR_FOLLOWER))
        self._unfollow(key)
        fetcher = self.fetchers.get(state.leader)
        if fetcher is None:
            fetcher = self.fetchers[state.leader] = ReplicaFetcher(self, state.leader, self.fetcher_settings)
            fetcher.start()
        fetcher.follow(key[0], key[1], state.leader_epoch)
        self._following[key] = state.leader
        log.info("following broker %d for %s-%d at epoch %d", state.leader, *key, state.leader_epoch)
        if was_leader:
            self._on_leadership(key[0], key[1], False)

    def _stop_replica(self, key: Key, runtime: PartitionRuntime) -> None:
        was_leader = runtime.role is Role.LEADER
        runtime.role, runtime.leader, runtime.leader_state = Role.NONE, -1, None
        runtime.fail_waiters(KafkaError(f"{key[0]}-{key[1]} has no leader on this broker",
                                        code=ErrorCode.NOT_LEADER_OR_FOLLOWER))
        self._unfollow(key)
        if was_leader:
            self._on_leadership(key[0], key[1], False)

    def _unfollow(self, key: Key) -> None:
        leader = self._following.pop(key, None)
        if leader is not None and leader in self.fetchers:
            self.fetchers[leader].unfollow(*key)

    # ------------------------------------------------------------------ leader side

    def advance(self, runtime: PartitionRuntime) -> None:
        """Recompute a leader's high watermark; wake fetches and acks=all produces when it moved."""
        state = runtime.leader_state
        if state is not None and state.advance_high_watermark(runtime.log.log_end_offset):
            runtime.set_high_watermark(state.high_watermark)
            self.broker.wake_fetches()

    def on_follower_fetch(self, key: Key, runtime: PartitionRuntime, replica: int, fetch_offset: int) -> None:
        state = runtime.leader_state
        if state is None:
            return
        state.on_follower_fetch(replica, fetch_offset, runtime.log.log_end_offset, now_ms())
        self.advance(runtime)
        if replica not in state.isr:
            expanded = state.expanded_isr()
            if expanded is not None:
                self._schedule_isr_change(key, runtime, expanded)

    def _schedule_isr_change(self, key: Key, runtime: PartitionRuntime, isr: tuple[int, ...]) -> None:
        if key in self._isr_changes or self._frozen:
            return
        self._isr_changes.add(key)
        task = asyncio.get_running_loop().create_task(self._alter_isr(key, runtime, isr))
        self._tasks.append(task)
        task.add_done_callback(self._tasks.remove)

    async def _alter_isr(self, key: Key, runtime: PartitionRuntime, isr: tuple[int, ...]) -> None:
        state = runtime.leader_state
        topic = self.broker.topics.get(key[0])
        try:
            if state is None or topic is None:
                return
            log.info("%s %s-%d ISR %s -> %s", "expanding" if len(isr) > len(state.isr) else "shrinking", *key,
                     list(state.isr), list(isr))
            result = await self.broker.on_db(
                self.broker.store.alter_isr, topic.topic_id, key[1], leader=self.node_id,
                leader_epoch=state.leader_epoch, partition_epoch=state.partition_epoch, isr=isr)
            if result is None:
                log.info("ISR change of %s-%d refused: the partition moved on; re-reading metadata", *key)
                self.broker.request_metadata_refresh()
                return
            self.broker.patch_partition(key[0], result)
            if runtime.leader_state is state and result.partition_epoch > state.partition_epoch:
                state.update_membership(result.replicas, result.isr, result.partition_epoch, now_ms())
                self.advance(runtime)
        except (psycopg.Error, KafkaError) as exc:
            log.warning("ISR change of %s-%d failed (will retry): %s", *key, exc)
        finally:
            self._isr_changes.discard(key)

    async def _isr_loop(self) -> None:
        interval = min(self.lag_time_max_ms / 2000, 1.0)
        while True:
            await asyncio.sleep(interval)
            now = now_ms()
            for key, runtime in list(self.runtimes.items()):
                state = runtime.leader_state
                if runtime.role is Role.LEADER and state is not None and self.broker.lease_ok():
                    shrunk = state.shrunk_isr(now, self.lag_time_max_ms)
                    if shrunk is not None:
                        self._schedule_isr_change(key, runtime, shrunk)

    # ------------------------------------------------------------------ follower side (the fetchers' host)

    def leader_address(self, leader: int) -> tuple[str, int] | None:
        for registration in self.broker.live_brokers:
            if registration.node_id == leader:
                return registration.host, registration.port
        return None

    def follower_log(self, topic: str, partition: int, leader_epoch: int) -> Log | None:
        runtime = self.runtimes.get((topic, partition))
        if runtime is None or runtime.role is not Role.FOLLOWER or runtime.leader_epoch != leader_epoch \
                or runtime.log.closed:
            return None
        return runtime.log

    async def follower_truncated(self, topic: str, partition: int) -> None:
        runtime = self.runtimes.get((topic, partition))
        if runtime is not None:
            runtime.producers = None
            runtime.set_high_watermark(min(runtime.high_watermark, runtime.log.log_end_offset))

    async def follower_appended(self, topic: str, partition: int, high_watermark: int,
                                leader_log_start: int) -> None:
        runtime = self.runtimes.get((topic, partition))
        if runtime is None:
            return
        runtime.set_high_watermark(min(high_watermark, runtime.log.log_end_offset))
        if runtime.log.log_start_offset < leader_log_start <= runtime.high_watermark:
            await asyncio.to_thread(runtime.log.delete_records_before, leader_log_start)

    def request_metadata_refresh(self) -> None:
        self.broker.request_metadata_refresh()

    def throttle(self) -> float | None:
        """The replication byte rate while this broker is catching up as a reassignment's new replica."""
        rate = self.broker.config.follower_replication_throttled_rate
        if not rate:
            return None
        for topic in self.broker.topics.values():
            for state in topic.partitions:
                if self.node_id in state.adding:
                    return float(rate)
        return None


def replace_partition(topic: TopicState, state: PartitionState) -> TopicState:
    parts = tuple(state if p.partition == state.partition else p for p in topic.partitions)
    return dataclasses.replace(topic, partitions=parts)
