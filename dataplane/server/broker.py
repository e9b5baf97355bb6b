"""The broker's state: its logs, its view of cluster metadata, its producer state.

Handlers (``dataplane.server.handlers``) describe responses once as
version-agnostic values and let ``protocol.build`` shape them for the version
the client asked for. Storage calls that touch files run in worker threads;
metadata calls run on one dedicated thread that owns the Postgres connection.
A single broker is its own controller and sole replica for now.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import logging
import uuid
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import psycopg
from kio.schema.errors import ErrorCode as WireError

from dataplane.cluster.migrations import migrate
from dataplane.cluster.store import BrokerRegistration, MetadataStore, PartitionState, TopicState
from dataplane.coordinator.manager import OFFSETS_TOPIC, OFFSETS_TOPIC_CONFIGS, GroupCoordinator
from dataplane.protocol.errors import ErrorCode, KafkaError
from dataplane.protocol.messages import Request
from dataplane.server.apis import REGISTRY
from dataplane.server.config import BrokerConfig
from dataplane.server.identity import claim_data_dir
from dataplane.server.metrics import BrokerMetrics
from dataplane.storage import Log, LogConfig, LogManager
from dataplane.storage.producer_state import ProducerStateManager, rebuild_producer_state

log = logging.getLogger(__name__)
T = TypeVar("T")

ZERO = datetime.timedelta(0)
NO_AUTHORIZED_OPERATIONS = -(2**31)
_CONFIG_NAMES = {
    "segment.bytes", "segment.ms", "index.interval.bytes", "segment.index.bytes", "max.message.bytes",
    "flush.messages", "flush.ms", "retention.ms", "retention.bytes", "cleanup.policy", "delete.retention.ms",
    "min.cleanable.dirty.ratio", "message.timestamp.type",
}


def wire(code: ErrorCode | int) -> WireError:
    return WireError(int(code))


def log_config(configs: dict[str, str] | Any) -> LogConfig:
    overrides = {k: v for k, v in dict(configs).items() if k in _CONFIG_NAMES}
    return LogConfig().with_overrides(overrides)


class PartitionRuntime:
    """What the broker keeps per hosted partition beside its log.

    ``lock`` serialises idempotent appends (check sequence, append, record)
    so two connections cannot interleave them; ``producers`` is loaded from the
    log on first use.
    """

    __slots__ = ("lock", "log", "producers")

    def __init__(self, log: Log) -> None:
        self.log = log
        self.lock = asyncio.Lock()
        self.producers: ProducerStateManager | None = None

    async def producer_state(self) -> ProducerStateManager:
        if self.producers is None:
            self.producers = await asyncio.to_thread(rebuild_producer_state, self.log)
        return self.producers


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
        self._heartbeat: asyncio.Task[None] | None = None
        self.metrics = BrokerMetrics(self.manager)
        self.coordinator = GroupCoordinator(config.coordinator_settings(), self)

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        self.directory_id = claim_data_dir(self.config.data_dir, self.config.cluster_id, self.config.node_id)
        await self.on_db(self._open_store)
        await self.on_db(self.store.register_broker, self.registration, self.config.lease_seconds)
        await asyncio.to_thread(self.manager.startup)
        await self.refresh_topics()
        self.live_brokers = await self.on_db(self.store.live_brokers)
        self._heartbeat = asyncio.get_running_loop().create_task(self._heartbeat_loop(), name="heartbeat")
        self.coordinator.start()
        await self.coordinator.load_all_led()

    @property
    def registration(self) -> BrokerRegistration:
        host, port = self.config.advertised
        return BrokerRegistration(self.config.node_id, host, port, self.config.rack, self.incarnation,
                                  self.directory_id)

    async def _heartbeat_loop(self) -> None:
        """Renew the lease at a third of its length, and re-read who else is alive."""
        while True:
            await asyncio.sleep(self.config.lease_seconds / 3)
            try:
                if not await self.on_db(self.store.renew_lease, self.config.node_id, self.incarnation,
                                        self.config.lease_seconds):
                    log.error("broker %d lost its registration to another process; re-registering",
                              self.config.node_id)
                    await self.on_db(self.store.register_broker, self.registration, self.config.lease_seconds)
                self.live_brokers = await self.on_db(self.store.live_brokers)
            except (psycopg.Error, KafkaError) as exc:
                log.warning("lease renewal failed (will retry): %s", exc)

    def _open_store(self) -> None:
        migrate(self.config.metadata_url, self.config.metadata_schema)
        conn = psycopg.connect(self.config.metadata_url)
        self._store = MetadataStore(conn, self.config.cluster_id, self.config.metadata_schema)
        self._store.ensure_cluster()

    async def begin_shutdown(self) -> None:
        """Refuse new requests and end long polls early (connections stop reading once this is set)."""
        self.stopping = True
        await self.notify_appended()

    async def stop(self) -> None:
        if self._heartbeat is not None:
            self._heartbeat.cancel()
        await self.coordinator.stop()
        await asyncio.to_thread(self._snapshot_producer_state)
        await asyncio.to_thread(self.manager.shutdown)
        if self._store is not None:
            with contextlib.suppress(psycopg.Error):
                await self.on_db(self._store.unregister_broker, self.config.node_id, self.incarnation)
            await self.on_db(self._store.conn.close)
        self._db.shutdown(wait=True)

    async def on_db(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run a metadata-store call on the thread that owns the connection."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._db, lambda: fn(*args, **kwargs))

    @property
    def store(self) -> MetadataStore:
        assert self._store is not None, "broker not started"
        return self._store

    # ------------------------------------------------------------------ topics and logs

    async def refresh_topics(self) -> None:
        """Re-read topics and cluster defaults, and push changed configs to the live logs.

        Changes made through any broker (or while this one was down) reach the logs
        here, so AlterConfigs needs no path of its own to the storage layer.
        """
        topics, defaults = await self.on_db(lambda: (self.store.topics(), self.store.cluster_configs()))
        previous, previous_defaults = self.topics, self.cluster_defaults
        self.topics = {t.name: t for t in topics}
        self.cluster_defaults = defaults
        for key in [k for k in self.runtimes if k[0] not in self.topics]:
            del self.runtimes[key]  # deleted topics: their logs are closed or about to be
        for topic in topics:
            old = previous.get(topic.name)
            if old is None or old.configs != topic.configs or defaults != previous_defaults:
                self.manager.update_topic_config(topic.name, self.topic_log_config(topic.configs))

    def topic_log_config(self, overrides: Mapping[str, str]) -> LogConfig:
        """The log config for a topic's overrides on top of the cluster defaults."""
        return log_config({**self.cluster_defaults, **overrides})

    async def create_topic(self, name: str, partitions: int, replication_factor: int,
                           configs: dict[str, Any] | None = None, *, validate_only: bool = False) -> TopicState:
        topic = await self.on_db(self.store.create_topic, name, partitions, replication_factor,
                                 [self.config.node_id], configs=configs, dry_run=validate_only)
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

    def partition_log(self, topic: TopicState, partition: int) -> Log:
        return self.runtime(topic, partition).log

    def runtime(self, topic: TopicState, partition: int) -> PartitionRuntime:
        key = (topic.name, partition)
        found = self.runtimes.get(key)
        if found is None or found.log.closed:
            log_ = self.manager.get_log(topic.name, partition)
            if log_ is None:
                log_ = self.manager.get_or_create_log(topic.name, partition, self.topic_log_config(topic.configs))
            found = self.runtimes[key] = PartitionRuntime(log_)
        return found

    def _snapshot_producer_state(self) -> None:
        """At clean shutdown, so the next start need not rescan the logs for producer state."""
        for runtime in self.runtimes.values():
            if runtime.producers is not None and not runtime.log.closed:
                runtime.producers.write_snapshot(runtime.log.dir, runtime.log.log_end_offset)

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
        brokers = sorted({b.node_id for b in self.live_brokers} | {self.config.node_id})
        replication = min(self.config.offsets_topic_replication_factor, len(brokers))
        try:
            await self.on_db(self.store.create_topic, OFFSETS_TOPIC, self.config.offsets_topic_partitions,
                             replication, brokers, configs=OFFSETS_TOPIC_CONFIGS, internal=True)
        except KafkaError as exc:
            if exc.code != ErrorCode.TOPIC_ALREADY_EXISTS:
                raise
        await self.refresh_topics()
        return self.topics[OFFSETS_TOPIC]

    def offsets_partition_count(self) -> int | None:
        topic = self.topics.get(OFFSETS_TOPIC)
        return None if topic is None else len(topic.partitions)

    def leads_offsets_partition(self, partition: int) -> bool:
        topic = self.topics.get(OFFSETS_TOPIC)
        return topic is not None and 0 <= partition < len(topic.partitions) \
            and topic.partitions[partition].leader == self.config.node_id

    def offsets_log(self, partition: int) -> tuple[Log, int]:
        topic, state = self.partition_state(OFFSETS_TOPIC, partition)
        return self.partition_log(topic, partition), state.leader_epoch

    def offsets_appended(self) -> None:
        asyncio.get_running_loop().create_task(self.notify_appended())

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
