"""Request handlers of a single broker: it is its own controller and sole replica.

Handlers describe responses once as version-agnostic values and let
``protocol.build`` shape them for the version the client asked for. Storage
calls run in worker threads (they touch files); metadata calls run on one
dedicated thread that owns the Postgres connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import psycopg
from kio.index import load_response_schema
from kio.schema.errors import ErrorCode as WireError

from dataplane.cluster.migrations import migrate
from dataplane.cluster.store import MetadataStore, TopicState
from dataplane.protocol.build import build
from dataplane.protocol.errors import ErrorCode, KafkaError
from dataplane.protocol.messages import Request
from dataplane.server.config import BrokerConfig
from dataplane.storage import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, Log, LogConfig, LogManager

log = logging.getLogger(__name__)
T = TypeVar("T")

ZERO = datetime.timedelta(0)
NO_AUTHORIZED_OPERATIONS = -(2**31)
# (min, max) versions we serve: the intersection of what kio decodes and what is implemented.
SUPPORTED_APIS: dict[int, tuple[int, int]] = {
    0: (3, 9),    # Produce
    1: (4, 12),   # Fetch (v13+ names topics by id)
    2: (1, 7),    # ListOffsets
    3: (0, 12),   # Metadata
    18: (0, 4),   # ApiVersions
    19: (2, 7),   # CreateTopics
}
_CONFIG_NAMES = {
    "segment.bytes": "segment_bytes", "segment.ms": "segment_ms", "index.interval.bytes": "index_interval_bytes",
    "segment.index.bytes": "segment_index_bytes", "max.message.bytes": "max_message_bytes",
    "flush.messages": "flush_messages", "flush.ms": "flush_ms", "retention.ms": "retention_ms",
    "retention.bytes": "retention_bytes", "cleanup.policy": "cleanup_policy",
    "delete.retention.ms": "delete_retention_ms", "min.cleanable.dirty.ratio": "min_cleanable_dirty_ratio",
    "message.timestamp.type": "message_timestamp_type",
}


def wire(code: ErrorCode | int) -> WireError:
    return WireError(int(code))


def log_config(configs: dict[str, str] | Any) -> LogConfig:
    overrides = {k: v for k, v in dict(configs).items() if k in _CONFIG_NAMES}
    return LogConfig().with_overrides(overrides)


class Broker:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.manager = LogManager(config.data_dir)
        self._db = ThreadPoolExecutor(1, "metadata")
        self._store: MetadataStore | None = None
        self.topics: dict[str, TopicState] = {}
        self._appended = asyncio.Condition()
        self.handlers: dict[int, Callable[[Request], Any]] = {
            0: self.produce, 1: self.fetch, 2: self.list_offsets, 3: self.metadata, 18: self.api_versions,
            19: self.create_topics,
        }

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        await self._on_db(self._open_store)
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
            await self._on_db(self._store.conn.close)
        self._db.shutdown(wait=True)

    async def _on_db(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._db, lambda: fn(*args, **kwargs))

    @property
    def store(self) -> MetadataStore:
        assert self._store is not None, "broker not started"
        return self._store

    async def refresh_topics(self) -> None:
        topics = await self._on_db(self.store.topics)
        self.topics = {t.name: t for t in topics}

    async def create_topic(self, name: str, partitions: int, replication_factor: int,
                           configs: dict[str, Any] | None = None, *, validate_only: bool = False) -> TopicState:
        topic = await self._on_db(self.store.create_topic, name, partitions, replication_factor,
                                  [self.config.node_id], configs=configs, dry_run=validate_only)
        if not validate_only:
            await self.refresh_topics()
        return topic

    def partition_log(self, topic: TopicState, partition: int) -> Log:
        found = self.manager.get_log(topic.name, partition)
        if found is not None:
            return found
        return self.manager.get_or_create_log(topic.name, partition, log_config(topic.configs))

    # ------------------------------------------------------------------ handlers

    async def handle(self, request: Request) -> Any:
        handler = self.handlers[request.api_key]
        return await handler(request)

    async def api_versions(self, request: Request) -> Any:
        return build(load_response_schema(18, request.api_version), {
            "error_code": WireError.none, "throttle_time": ZERO, "api_keys": api_version_entries()})

    async def metadata(self, request: Request) -> Any:
        body, version = request.body, request.api_version
        await self.refresh_topics()
        if body.topics is None or (version == 0 and not body.topics):
            wanted = sorted(self.topics)
        else:
            wanted = [t.name for t in body.topics if t.name is not None]
        allow_create = self.config.auto_create_topics and (version < 4 or body.allow_auto_topic_creation)
        entries = []
        for name in wanted:
            topic = self.topics.get(name)
            if topic is None and allow_create:
                try:
                    topic = await self.create_topic(name, self.config.num_partitions,
                                                    self.config.default_replication_factor)
                except KafkaError as exc:
                    if exc.code != ErrorCode.TOPIC_ALREADY_EXISTS:
                        entries.append(self._topic_error(name, exc.code))
                        continue
                    await self.refresh_topics()
                    topic = self.topics.get(name)
            if topic is None:
                entries.append(self._topic_error(name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
                continue
            entries.append({
                "error_code": WireError.none, "name": topic.name, "topic_id": topic.topic_id,
                "is_internal": topic.internal, "topic_authorized_operations": NO_AUTHORIZED_OPERATIONS,
                "partitions": [{
                    "error_code": WireError.none, "partition_index": p.partition, "leader_id": p.leader,
                    "leader_epoch": p.leader_epoch, "replica_nodes": p.replicas, "isr_nodes": p.isr,
                    "offline_replicas": ()} for p in topic.partitions],
            })
        host, port = self.config.advertised
        return build(load_response_schema(3, version), {
            "throttle_time": ZERO, "cluster_id": self.config.cluster_id, "controller_id": self.config.node_id,
            "brokers": [{"node_id": self.config.node_id, "host": host, "port": port, "rack": None}],
            "cluster_authorized_operations": NO_AUTHORIZED_OPERATIONS, "topics": entries,
        })

    @staticmethod
    def _topic_error(name: str, code: ErrorCode) -> dict[str, Any]:
        return {"error_code": wire(code), "name": name, "topic_id": None, "is_internal": False,
                "topic_authorized_operations": NO_AUTHORIZED_OPERATIONS, "partitions": ()}

    async def create_topics(self, request: Request) -> Any:
        body = request.body
        results = []
        for item in body.topics:
            partitions = self.config.num_partitions if item.num_partitions == -1 else item.num_partitions
            replication = (self.config.default_replication_factor if item.replication_factor == -1
                           else item.replication_factor)
            entry: dict[str, Any] = {"name": item.name, "topic_id": None, "error_code": WireError.none,
                                     "error_message": None, "topic_config_error_code": 0,
                                     "num_partitions": -1, "replication_factor": -1, "configs": ()}
            try:
                if item.assignments:
                    raise KafkaError("manual replica assignment is not supported yet",
                                     code=ErrorCode.INVALID_REQUEST)
                topic = await self.create_topic(item.name, partitions, replication,
                                                {c.name: c.value for c in item.configs if c.value is not None},
                                                validate_only=body.validate_only)
                entry.update(topic_id=topic.topic_id, num_partitions=len(topic.partitions),
                             replication_factor=len(topic.partitions[0].replicas) if topic.partitions else -1)
            except KafkaError as exc:
                entry.update(error_code=wire(exc.code), error_message=str(exc))
            results.append(entry)
        return build(load_response_schema(19, request.api_version), {"throttle_time": ZERO, "topics": results})

    async def produce(self, request: Request) -> Any:
        body = request.body
        results = []
        appended = False
        for topic_data in body.topic_data:
            topic = self.topics.get(topic_data.name)
            if topic is None and self.config.auto_create_topics:
                try:
                    topic = await self.create_topic(topic_data.name, self.config.num_partitions,
                                                    self.config.default_replication_factor)
                except KafkaError:
                    await self.refresh_topics()
                    topic = self.topics.get(topic_data.name)
            partitions = []
            for part in topic_data.partition_data:
                entry: dict[str, Any] = {"index": part.index, "error_code": WireError.none, "base_offset": -1,
                                         "log_append_time": None, "log_start_offset": -1, "record_errors": (),
                                         "error_message": None}
                try:
                    if topic is None or not 0 <= part.index < len(topic.partitions):
                        raise KafkaError(f"unknown partition {topic_data.name}-{part.index}",
                                         code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                    if not part.records:
                        raise KafkaError("no records", code=ErrorCode.INVALID_RECORD)
                    state = topic.partitions[part.index]
                    partition_log = self.partition_log(topic, part.index)
                    info = await asyncio.to_thread(partition_log.append_as_leader, part.records, state.leader_epoch)
                    appended = True
                    entry.update(base_offset=info.first_offset, log_start_offset=info.log_start_offset)
                    if info.log_append_time >= 0:
                        entry["log_append_time"] = datetime.datetime.fromtimestamp(
                            info.log_append_time / 1000, tz=datetime.UTC)
                except KafkaError as exc:
                    entry.update(error_code=wire(exc.code), error_message=str(exc))
                partitions.append(entry)
            results.append({"name": topic_data.name, "partition_responses": partitions})
        if appended:
            async with self._appended:
                self._appended.notify_all()
        if body.acks == 0:
            return None
        return build(load_response_schema(0, request.api_version), {"responses": results, "throttle_time": ZERO})

    async def fetch(self, request: Request) -> Any:
        body = request.body
        deadline = time.monotonic() + body.max_wait.total_seconds()
        while True:
            responses, total = await self._fetch_once(body)
            remaining = deadline - time.monotonic()
            if total >= body.min_bytes or remaining <= 0:
                break
            async with self._appended:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._appended.wait(), remaining)
        return build(load_response_schema(1, request.api_version), {
            "throttle_time": ZERO, "error_code": WireError.none, "session_id": 0, "responses": responses})

    async def _fetch_once(self, body: Any) -> tuple[list[dict[str, Any]], int]:
        total = 0
        budget = body.max_bytes if body.max_bytes > 0 else 2**31 - 1
        responses = []
        for topic_req in body.topics:
            topic = self.topics.get(topic_req.topic)
            partitions = []
            for part in topic_req.partitions:
                entry: dict[str, Any] = {"partition_index": part.partition, "error_code": WireError.none,
                                         "high_watermark": -1, "last_stable_offset": -1, "log_start_offset": -1,
                                         "aborted_transactions": None, "preferred_read_replica": -1,
                                         "records": None}
                try:
                    if topic is None or not 0 <= part.partition < len(topic.partitions):
                        raise KafkaError("unknown partition", code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                    partition_log = self.partition_log(topic, part.partition)
                    high_watermark = partition_log.log_end_offset
                    # At least one whole batch for the first partition with data, as Kafka does.
                    limit = min(part.partition_max_bytes, budget) if total else part.partition_max_bytes
                    region = await asyncio.to_thread(partition_log.read, part.fetch_offset, max(limit, 1),
                                                     high_watermark)
                    data = await asyncio.to_thread(region.read_bytes)
                    total += len(data)
                    budget -= len(data)
                    entry.update(high_watermark=high_watermark, last_stable_offset=high_watermark,
                                 log_start_offset=partition_log.log_start_offset, records=data)
                except KafkaError as exc:
                    entry["error_code"] = wire(exc.code)
                partitions.append(entry)
            responses.append({"topic": topic_req.topic, "partitions": partitions})
        return responses, total

    async def list_offsets(self, request: Request) -> Any:
        topics = []
        for topic_req in request.body.topics:
            topic = self.topics.get(topic_req.name)
            partitions = []
            for part in topic_req.partitions:
                entry: dict[str, Any] = {"partition_index": part.partition_index, "error_code": WireError.none,
                                         "timestamp": -1, "offset": -1, "leader_epoch": -1,
                                         "old_style_offsets": ()}
                try:
                    if topic is None or not 0 <= part.partition_index < len(topic.partitions):
                        raise KafkaError("unknown partition", code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                    partition_log = self.partition_log(topic, part.partition_index)
                    epoch = topic.partitions[part.partition_index].leader_epoch
                    if part.timestamp == LATEST_TIMESTAMP:
                        entry.update(offset=partition_log.log_end_offset, leader_epoch=epoch)
                    elif part.timestamp == EARLIEST_TIMESTAMP:
                        entry.update(offset=partition_log.log_start_offset, leader_epoch=epoch)
                    else:
                        found = await asyncio.to_thread(partition_log.offset_for_timestamp, part.timestamp)
                        if found is not None:
                            entry.update(timestamp=found.timestamp, offset=found.offset,
                                         leader_epoch=found.leader_epoch)
                except KafkaError as exc:
                    entry["error_code"] = wire(exc.code)
                partitions.append(entry)
            topics.append({"name": topic_req.name, "partitions": partitions})
        return build(load_response_schema(2, request.api_version), {"throttle_time": ZERO, "topics": topics})


def api_version_entries() -> list[dict[str, int]]:
    return [{"api_key": key, "min_version": low, "max_version": high}
            for key, (low, high) in sorted(SUPPORTED_APIS.items())]
