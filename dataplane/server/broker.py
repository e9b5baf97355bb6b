"""The broker's state: its logs, its view of cluster metadata, its producer state.

Handlers (``dataplane.server.handlers``) describe responses once as
version-agnostic values and let ``protocol.build`` shape them for the version
the client asked for. Storage calls that touch files run in worker threads;
metadata calls run on one dedicated thread that owns the Postgres connection.

Cluster metadata reaches the broker three ways: a LISTEN thread wakes the
metadata loop on every NOTIFY, the loop also checks the metadata version on a
timer (so a missed notification only delays), and Metadata requests re-read it.
Each refresh hands partition states to the ``ReplicaManager``, which makes this
broker lead, follow or stop each partition it hosts. Every broker also runs for
the controller lease; the holder elects leaders when brokers' leases lapse.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import logging
import time
import uuid
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import psycopg
from kio.schema.errors import ErrorCode as WireError

from dataplane.cluster.controller import elect_leaders_for_liveness
from dataplane.cluster.listener import ChangeListener
from dataplane.cluster.migrations import migrate
from dataplane.cluster.store import BrokerRegistration, MetadataStore, PartitionState, TopicState
from dataplane.coordinator.manager import OFFSETS_TOPIC, OFFSETS_TOPIC_CONFIGS, GroupCoordinator
from dataplane.protocol.errors import ErrorCode, KafkaError
from dataplane.protocol.messages import Request
from dataplane.replication.fetcher import FetcherSettings
from dataplane.replication.manager import ReplicaManager, replace_partition
from dataplane.replication.partition import PartitionRuntime, Role
from dataplane.server.apis import REGISTRY
from dataplane.server.config import BrokerConfig
from dataplane.server.identity import claim_data_dir
from dataplane.server.metrics import BrokerMetrics
from dataplane.storage import Log, LogConfig, LogManager
from dataplane.storage.log import AppendInfo

log = logging.getLogger(__name__)
T = TypeVar("T")

ZERO = datetime.timedelta(0)
NO_AUTHORIZED_OPERATIONS = -(2**31)
INLINE_APPEND_BYTES = 64 * 1024
_CONFIG_NAMES = {
    "segment.bytes", "segment.ms", "index.interval.bytes", "segment.index.bytes", "max.message.bytes",
    "flush.messages", "flush.ms", "retention.ms", "retention.bytes", "cleanup.policy", "delete.retention.ms",
    "min.cleanable.dirty.ratio", "message.timestamp.type",
}


def wire(code: ErrorCode | int) -> WireError:
    return WireError(int(code))


def _call_soon(loop: asyncio.AbstractEventLoop, callback: Callable[[], None]) -> None:
    with contextlib.suppress(RuntimeError):  # the loop closed while the listener thread was still waking
        loop.call_soon_threadsafe(callback)


def log_config(configs: dict[str, str] | Any) -> LogConfig:
    overrides = {k: v for k, v in dict(configs).items() if k in _CONFIG_NAMES}
    return LogConfig().with_overrides(overrides)


class Broker:
    def __init__(self, config: BrokerConfig) -> None:
        from dataplane.server import handlers  # noqa: F401  (registers every API)

        self.config = config
        self.manager = LogManager(config.data_dir)
        self.incarnation = uuid.uuid4()
        self.directory_id: uuid.UUID | None = None
        self._db = ThreadPoolExecutor(1, "metadata")
        self._store: MetadataStore | None = None
        self.topics: dict[str, TopicState] = {}
        self.cluster_defaults: dict[str, str] = {}  # cluster-wide topic config defaults (cluster_configs)
        self.appended = asyncio.Condition()
        self.append_count = 0  # bumped by every append, so a long poll notices one it raced with
        self.runtimes: dict[tuple[str, int], PartitionRuntime] = {}
        self._producer_ids: range = range(0)
        self._producer_id_lock = asyncio.Lock()
        self.stopping = False
        self.live_brokers: list[BrokerRegistration] = []
        self.controller_id = -1
        self.controller_epoch = 0
        self._lease_deadline = 0.0  # monotonic time our lease surely still holds until
        self._refresh_lock = asyncio.Lock()
        self._metadata_version = -1
        self._metadata_changed: asyncio.Event | None = None
        self._listener: ChangeListener | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self.metrics = BrokerMetrics(self.manager)
        self.coordinator = GroupCoordinator(config.coordinator_settings(), self)
        self.replicas = ReplicaManager(
            self, config.data_dir, lag_time_max_ms=config.replica_lag_time_max_ms,
            fetcher=FetcherSettings(max_wait_ms=config.replica_fetch_wait_max_ms,
                                    throttle_bytes_per_s=lambda: self.replicas.throttle()),
            on_leadership=self._leadership_changed)

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._metadata_changed = asyncio.Event()
        self.directory_id = claim_data_dir(self.config.data_dir, self.config.cluster_id, self.config.node_id)
        await self.on_db(self._open_store)
        renewed_at = time.monotonic()
        await self.on_db(self.store.register_broker, self.registration, self.config.lease_seconds)
        self._lease_deadline = renewed_at + self.config.lease_seconds
        await asyncio.to_thread(self.manager.startup)
        self.replicas.load_checkpoint()
        self.live_brokers = await self.on_db(self.store.live_brokers)
        self.coordinator.start()
        await self.refresh_topics()
        self.replicas.start()
        self._listener = ChangeListener(self.config.metadata_url, self.config.cluster_id,
                                        lambda: _call_soon(loop, self.request_metadata_refresh))
        self._listener.start()
        self._tasks = [loop.create_task(self._heartbeat_loop(), name="heartbeat"),
                       loop.create_task(self._metadata_loop(), name="metadata"),
                       loop.create_task(self._controller_loop(), name="controller")]

    @property
    def registration(self) -> BrokerRegistration:
        host, port = self.config.advertised
        return BrokerRegistration(self.config.node_id, host, port, self.config.rack, self.incarnation,
                                  self.directory_id)

    def lease_ok(self) -> bool:
        """Whether our registration lease surely holds; a broker that cannot tell must not act as leader.

        A broker paused past its lease (SIGSTOP, a long GC-like stall) wakes with
        stale metadata; until it has renewed and re-read the metadata it refuses
        leader work, so it cannot acknowledge writes for partitions moved away.
        """
        return time.monotonic() < self._lease_deadline

    async def _heartbeat_loop(self) -> None:
        """Renew the lease at a third of its length, and re-read who else is alive."""
        while True:
            await asyncio.sleep(self.config.lease_seconds / 3)
            try:
                lapsed = not self.lease_ok()
                sent = time.monotonic()
                if not await self.on_db(self.store.renew_lease, self.config.node_id, self.incarnation,
                                        self.config.lease_seconds):
                    log.error("broker %d lost its registration to another process; re-registering",
                              self.config.node_id)
                    await self.on_db(self.store.register_broker, self.registration, self.config.lease_seconds)
                self.live_brokers = await self.on_db(self.store.live_brokers)
                if lapsed:
                    log.warning("broker %d's lease had lapsed; re-reading metadata before leading again",
                                self.config.node_id)
                    await self.refresh_topics()
                self._lease_deadline = sent + self.config.lease_seconds
            except (psycopg.Error, KafkaError) as exc:
                log.warning("lease renewal failed (will retry): %s", exc)

    async def _metadata_loop(self) -> None:
        """Re-read metadata when notified, and check its version on a timer in case a notification was missed."""
        assert self._metadata_changed is not None
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._metadata_changed.wait(), self.config.metadata_refresh_seconds)
            self._metadata_changed.clear()
            try:
                version = await self.on_db(self.store.metadata_version)
                if version != self._metadata_version:
                    self.live_brokers = await self.on_db(self.store.live_brokers)
                    await self.refresh_topics()
            except (psycopg.Error, KafkaError) as exc:
                log.warning("metadata refresh failed (will retry): %s", exc)

    async def _controller_loop(self) -> None:
        """Hold or contend for the controller lease; while holding it, re-elect leaders of dead brokers."""
        interval = min(0.5, self.config.lease_seconds / 4)
        while True:
            try:
                if self.lease_ok():
                    holder, epoch = await self.on_db(self.store.acquire_controller, self.config.node_id,
                                                     self.config.lease_seconds)
                    if holder == self.config.node_id and epoch != self.controller_epoch:
                        log.info("broker %d is the controller at epoch %d", holder, epoch)
                    self.controller_id, self.controller_epoch = holder, epoch
                    if holder == self.config.node_id:
                        changed = await self.on_db(elect_leaders_for_liveness, self.store, holder, epoch)
                        if changed:
                            log.info("controller moved leadership of %d partitions", changed)
                            self.request_metadata_refresh()
            except (psycopg.Error, KafkaError) as exc:
                log.warning("controller pass failed (will retry): %s", exc)
            await asyncio.sleep(interval)

    def request_metadata_refresh(self) -> None:
        if self._metadata_changed is not None:
            self._metadata_version = -1
            self._metadata_changed.set()

    def _open_store(self) -> None:
        migrate(self.config.metadata_url, self.config.metadata_schema)
        self._store = MetadataStore(self._connect(), self.config.cluster_id, self.config.metadata_schema,
                                    reconnect=self._connect)
        self._store.ensure_cluster()

    def _connect(self) -> psycopg.Connection[tuple[object, ...]]:
        return psycopg.connect(self.config.metadata_url, connect_timeout=max(2, round(self.config.lease_seconds)))

    async def begin_shutdown(self) -> None:
        """Refuse new requests, end long polls early, and hand leadership over (a controlled shutdown).

        The lease is given up first, so the controller moves this broker's
        partitions to replicas still in their ISR while this one stops; and no ISR
        change is made from here on, or followers refused by a stopping broker
        would be dropped from the ISR and leave nobody to take over.
        """
        self.stopping = True
        self.replicas.freeze()
        for task in self._tasks:  # no lease renewal and no controller pass from here on
            task.cancel()
        if self._store is not None:
            try:
                if self.controller_id == self.config.node_id:
                    await self.on_db(self.store.resign_controller, self.config.node_id, self.controller_epoch)
                await self.on_db(self.store.unregister_broker, self.config.node_id, self.incarnation)
            except (psycopg.Error, KafkaError) as exc:
                log.warning("could not give up the lease at shutdown (it will lapse): %s", exc)
        self._lease_deadline = 0.0
        await self.notify_appended()

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._listener is not None:
            await asyncio.to_thread(self._listener.stop)
        await self.replicas.stop()
        await self.coordinator.stop()
        await asyncio.to_thread(self._snapshot_producer_state)
        await asyncio.to_thread(self.manager.shutdown)
        if self._store is not None:
            with contextlib.suppress(psycopg.Error):
                await self.on_db(self._store.unregister_broker, self.config.node_id, self.incarnation)
            with contextlib.suppress(psycopg.Error):
                await self.on_db(self._store.conn.close)
        self._db.shutdown(wait=True)

    async def on_db(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run a metadata-store call on the thread that owns the connection (reconnecting first if it broke)."""
        loop = asyncio.get_running_loop()

        def call() -> T:
            if self._store is not None:
                self._store.ensure_connected()
            return fn(*args, **kwargs)
        return await loop.run_in_executor(self._db, call)

    @property
    def store(self) -> MetadataStore:
        assert self._store is not None, "broker not started"
        return self._store

    # ------------------------------------------------------------------ topics and logs

    async def refresh_topics(self) -> None:
        """Re-read topics and cluster defaults, push changed configs to the live logs, and apply leadership.

        Changes made through any broker (or while this one was down) reach the logs
        here, so AlterConfigs needs no path of its own to the storage layer.
        """
        async with self._refresh_lock:
            version, topics, defaults = await self.on_db(
                lambda: (self.store.metadata_version(), self.store.topics(), self.store.cluster_configs()))
            previous, previous_defaults = self.topics, self.cluster_defaults
            self.topics = {t.name: t for t in topics}
            self.cluster_defaults = defaults
            for topic in topics:
                old = previous.get(topic.name)
                if old is None or old.configs != topic.configs or defaults != previous_defaults:
                    self.manager.update_topic_config(topic.name, self.topic_log_config(topic.configs))
            await self.replicas.apply(self.topics)
            for key in [k for k in self.runtimes if k[0] not in self.topics]:
                del self.runtimes[key]  # deleted topics: their logs are closed or about to be
            self._metadata_version = version

    def patch_partition(self, topic_name: str, state: PartitionState) -> None:
        """Take a partition state this broker just wrote (an ISR change) without waiting for the refresh."""
        topic = self.topics.get(topic_name)
        if topic is not None and state.partition < len(topic.partitions) \
                and topic.partitions[state.partition].partition_epoch < state.partition_epoch:
            self.topics[topic_name] = replace_partition(topic, state)

    def topic_log_config(self, overrides: Mapping[str, str]) -> LogConfig:
        """The log config for a topic's overrides on top of the cluster defaults."""
        return log_config({**self.cluster_defaults, **overrides})

    def topic_setting(self, topic: TopicState, name: str, default: str) -> str:
        """A topic config as in force: the topic's override, else the cluster default, else Kafka's default."""
        return topic.configs.get(name) or self.cluster_defaults.get(name) or default

    def live_node_ids(self) -> list[int]:
        return sorted({b.node_id for b in self.live_brokers} | {self.config.node_id})

    def live_racks(self) -> dict[int, str | None]:
        racks: dict[int, str | None] = {b.node_id: b.rack for b in self.live_brokers}
        racks[self.config.node_id] = self.config.rack
        return racks

    async def create_topic(self, name: str, partitions: int, replication_factor: int,
                           configs: dict[str, Any] | None = None, *, validate_only: bool = False) -> TopicState:
        topic = await self.on_db(self.store.create_topic, name, partitions, replication_factor,
                                 self.live_node_ids(), racks=self.live_racks(), configs=configs,
                                 dry_run=validate_only)
        if not validate_only:
            await self.refresh_topics()
        return topic

    async def topic_or_autocreate(self, name: str) -> TopicState | None:
        """The topic, auto-created when ``auto.create.topics.enable`` (None when absent or invalid)."""
        topic = self.topics.get(name)
        if topic is not None or not self.config.auto_create_topics:
            return topic
        try:
            return await self.create_topic(name, self.config.num_partitions, self.config.default_replication_factor)
        except KafkaError as exc:
            if exc.code != ErrorCode.TOPIC_ALREADY_EXISTS:
                raise
            await self.refresh_topics()
            return self.topics.get(name)

    def partition_state(self, topic_name: str, partition: int) -> tuple[TopicState, PartitionState]:
        """Raises UNKNOWN_TOPIC_OR_PARTITION for a topic or partition this broker does not know."""
        topic = self.topics.get(topic_name)
        if topic is None or not 0 <= partition < len(topic.partitions):
            raise KafkaError(f"This server does not host this topic-partition: {topic_name}-{partition}",
                             code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        return topic, topic.partitions[partition]

    def leader_runtime(self, topic_name: str, partition: int,
                       current_leader_epoch: int = -1) -> tuple[TopicState, PartitionRuntime]:
        """The partition as led by this broker, checking the client's leader epoch (KIP-320).

        NOT_LEADER_OR_FOLLOWER when another broker leads it (or none does, or our
        lease may have lapsed); FENCED_LEADER_EPOCH when the client's epoch is older
        than ours, UNKNOWN_LEADER_EPOCH when it is newer (our metadata lags).
        """
        topic, state = self.partition_state(topic_name, partition)
        runtime = self.runtimes.get((topic_name, partition))
        if runtime is not None and current_leader_epoch >= 0:
            if current_leader_epoch < runtime.leader_epoch:
                raise KafkaError(f"leader epoch {current_leader_epoch} of {topic_name}-{partition} is fenced by "
                                 f"epoch {runtime.leader_epoch}", code=ErrorCode.FENCED_LEADER_EPOCH)
            if current_leader_epoch > runtime.leader_epoch:
                raise KafkaError(f"leader epoch {current_leader_epoch} of {topic_name}-{partition} is newer than "
                                 f"this broker's {runtime.leader_epoch}", code=ErrorCode.UNKNOWN_LEADER_EPOCH)
        if runtime is None or runtime.role is not Role.LEADER or not self.lease_ok():
            raise KafkaError(f"broker {self.config.node_id} is not the leader of {topic_name}-{partition} "
                             f"(leader: {state.leader})", code=ErrorCode.NOT_LEADER_OR_FOLLOWER)
        return topic, runtime

    def _snapshot_producer_state(self) -> None:
        """At clean shutdown, so the next start need not rescan the logs for producer state."""
        for runtime in self.runtimes.values():
            if runtime.producers is not None and not runtime.log.closed:
                runtime.producers.write_snapshot(runtime.log.dir, runtime.log.log_end_offset)

    def wake_fetches(self) -> None:
        """A high watermark moved: long-polling consumer fetches may now have data."""
        asyncio.get_running_loop().create_task(self.notify_appended())

    async def next_producer_id(self) -> int:
        """A cluster-unique producer id, from blocks the metadata store hands out."""
        async with self._producer_id_lock:
            if not self._producer_ids:
                self._producer_ids = await self.on_db(self.store.allocate_producer_ids)
            producer_id = self._producer_ids[0]
            self._producer_ids = self._producer_ids[1:]
            return producer_id

    # ------------------------------------------------------------------ the offsets topic (coordinator's host)

    async def ensure_offsets_topic(self) -> TopicState:
        """``__consumer_offsets``, created on first need as Kafka does (replication capped at live brokers)."""
        topic = self.topics.get(OFFSETS_TOPIC)
        if topic is not None:
            return topic
        brokers = self.live_node_ids()
        replication = min(self.config.offsets_topic_replication_factor, len(brokers))
        try:
            await self.on_db(self.store.create_topic, OFFSETS_TOPIC, self.config.offsets_topic_partitions,
                             replication, brokers, racks=self.live_racks(), configs=OFFSETS_TOPIC_CONFIGS,
                             internal=True)
        except KafkaError as exc:
            if exc.code != ErrorCode.TOPIC_ALREADY_EXISTS:
                raise
        await self.refresh_topics()
        return self.topics[OFFSETS_TOPIC]

    def offsets_partition_count(self) -> int | None:
        topic = self.topics.get(OFFSETS_TOPIC)
        return None if topic is None else len(topic.partitions)

    def leads_offsets_partition(self, partition: int) -> bool:
        runtime = self.runtimes.get((OFFSETS_TOPIC, partition))
        return runtime is not None and runtime.role is Role.LEADER and self.lease_ok()

    def offsets_log(self, partition: int) -> Log:
        return self.leader_runtime(OFFSETS_TOPIC, partition)[1].log

    async def append_offsets(self, partition: int, batch: bytes) -> None:
        """Coordinator writes: appended as leader and acknowledged once the whole ISR has them (acks=all)."""
        topic, runtime = self.leader_runtime(OFFSETS_TOPIC, partition)
        info = await self.append_as_leader(topic, runtime, batch, acks_all=True)
        await self.await_replication(topic, runtime, info.last_offset + 1, self.config.offsets_commit_timeout_ms / 1000)

    async def append_as_leader(self, topic: TopicState, runtime: PartitionRuntime, batches: bytes, *,
                               acks_all: bool) -> AppendInfo:
        """Append at the current leader epoch and move the high watermark if the ISR allows.

        acks=all writes are refused up front (NOT_ENOUGH_REPLICAS) while the ISR is
        smaller than ``min.insync.replicas``.
        """
        if acks_all:
            self.require_enough_replicas(topic, runtime)
        if len(batches) <= INLINE_APPEND_BYTES:  # a thread hop costs more than a small page-cache write
            info = runtime.log.append_as_leader(batches, runtime.leader_epoch)
        else:
            info = await asyncio.to_thread(runtime.log.append_as_leader, batches, runtime.leader_epoch)
        self.replicas.advance(runtime)
        await self.notify_appended()
        return info

    def min_insync_replicas(self, topic: TopicState) -> int:
        try:
            return max(1, int(self.topic_setting(topic, "min.insync.replicas", "1")))
        except ValueError:
            return 1

    def require_enough_replicas(self, topic: TopicState, runtime: PartitionRuntime, *,
                                after_append: bool = False) -> None:
        state = runtime.leader_state
        isr = len(state.isr) if state is not None else 0
        wanted = self.min_insync_replicas(topic)
        if isr < wanted:
            code = ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND if after_append else ErrorCode.NOT_ENOUGH_REPLICAS
            raise KafkaError(f"the in-sync replicas of {topic.name} ({isr}) are fewer than min.insync.replicas "
                             f"({wanted})", code=code)

    async def await_replication(self, topic: TopicState, runtime: PartitionRuntime, end: int,
                                timeout: float) -> None:
        """acks=all: until the high watermark passes ``end``, then the ISR must still be large enough."""
        await runtime.wait_for_high_watermark(end, timeout)
        self.require_enough_replicas(topic, runtime, after_append=True)

    def _leadership_changed(self, topic: str, partition: int, leads: bool) -> None:
        if topic == OFFSETS_TOPIC:
            self.coordinator.leadership_changed(partition, leads)

    async def notify_appended(self) -> None:
        """Wake long-polling fetches."""
        self.append_count += 1
        async with self.appended:
            self.appended.notify_all()

    # ------------------------------------------------------------------ dispatch

    async def handle(self, request: Request) -> Any:
        if self.stopping:
            # A ConnectionError is what the connection loop treats as "this connection is over".
            raise ConnectionAbortedError("broker is shutting down")
        self.metrics.request_started(request.api_key)
        try:
            return await REGISTRY[request.api_key].handler(self, request)
        finally:
            self.metrics.request_finished(request.api_key)
