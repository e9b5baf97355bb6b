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
from collections.abc import Callable
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
from dataplane.server.metrics import BrokerMetrics
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
        self.appended = asyncio.Condition()
        self.metrics = BrokerMetrics(self.manager)
        self.stopping = False
        self._busy: set[asyncio.Task[Any]] = set()

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

    async def begin_shutdown(self) -> list[asyncio.Task[Any]]:
        """Refuse new requests and end long polls early; returns the tasks still inside a request.

        Each of those tasks is cancelled as soon as its handler returns (its response is
        already handed to the transport by then, and closing a transport flushes it), so
        a connection ends after the request it is serving instead of reading another one.
        """
        self.stopping = True
        await self.notify_appended()
        return list(self._busy)

    async def stop(self) -> None:
        """Flush every log and write the clean-shutdown markers; call after connections are gone."""
        self.stopping = True
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
        topics = await self.on_db(self.store.topics)
        self.topics = {t.name: t for t in topics}

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
        return self.manager.get_or_create_log(topic.name, partition, log_config(topic.configs))

    async def notify_appended(self) -> None:
        """Wake long-polling fetches."""
        async with self.appended:
            self.appended.notify_all()

    # ------------------------------------------------------------------ dispatch

    async def handle(self, request: Request) -> Any:
        if self.stopping:
            # A ConnectionError is what the connection loop treats as "this connection is over".
            raise ConnectionAbortedError("broker is shutting down")
        task = asyncio.current_task()
        if task is not None:
            self._busy.add(task)
        self.metrics.request_started(request.api_key)
        try:
            return await REGISTRY[request.api_key].handler(self, request)
        finally:
            self.metrics.request_finished(request.api_key)
            if task is not None:
                self._busy.discard(task)
                if self.stopping:
                    task.cancel()  # lands on the connection's next await: after this response is written
