"""The broker's state: its logs, its view of cluster metadata, its producer state.

Handlers (``dataplane.server.handlers``) describe responses once as
version-agnostic values and let ``protocol.build`` shape them for the version
the client asked for. Storage calls that touch files run in worker threads;
metadata calls run on one dedicated thread that owns the Postgres connection.
A single broker is its own controller and sole replica for now.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import uuid
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import psycopg
from kio.schema.errors import ErrorCode as WireError

from dataplane.cluster.migrations import migrate
from dataplane.cluster.store import MetadataStore, PartitionState, TopicState
from dataplane.protocol.errors import ErrorCode, KafkaError
from dataplane.protocol.messages import Request
from dataplane.server.apis import REGISTRY
from dataplane.server.config import BrokerConfig
from dataplane.storage import Log, LogConfig, LogManager

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


class Broker:
    def __init__(self, config: BrokerConfig) -> None:
        from dataplane.server import handlers  # noqa: F401  (registers every API)

        self.config = config
        self.manager = LogManager(config.data_dir)
        self.incarnation = uuid.uuid4()
        self._db = ThreadPoolExecutor(1, "metadata")
        self._store: MetadataStore | None = None
        self.topics: dict[str, TopicState] = {}
        self.cluster_defaults: dict[str, str] = {}  # cluster-wide topic config defaults (cluster_configs)
        self.appended = asyncio.Condition()

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        await self.on_db(self._open_store)
        await asyncio.to_thread(self.manager.startup)
        await self.refresh_topics()

    def _open_store(self) -> None:
        migrate(self.config.metadata_url, self.config.metadata_schema)
        conn = psycopg.connect(self.config.metadata_url)
        self._store = MetadataStore(conn, self.config.cluster_id, self.config.metadata_schema)
        self._store.ensure_cluster()

    async def stop(self) -> None:
        await asyncio.to_thread(self.manager.shutdown)
        if self._store is not None:
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
        found = self.manager.get_log(topic.name, partition)
        if found is not None:
            return found
        return self.manager.get_or_create_log(topic.name, partition, self.topic_log_config(topic.configs))

    async def notify_appended(self) -> None:
        """Wake long-polling fetches."""
        async with self.appended:
            self.appended.notify_all()

    # ------------------------------------------------------------------ dispatch

    async def handle(self, request: Request) -> Any:
        return await REGISTRY[request.api_key].handler(self, request)
