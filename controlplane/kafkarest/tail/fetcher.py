"""Shared live fetching: one consumer per (cluster, topic) per web process, fanned out to its viewers.

Fifty people watching a topic cost the cluster what one does: a :class:`LiveFetcher` reads every
partition of the topic from the end, renders each record once, and hands each batch to every live
viewer, which keeps the records of its partitions from its own cursor on. A viewer that starts in the
past reads its backlog with its own consumer and joins a partition's live stream once its cursor
has reached the fetcher's position there (see :mod:`controlplane.kafkarest.tail.session`).

Ownership and threads: :data:`registry` belongs to the process and is used only on the ASGI server's
event loop. A fetcher's consumer lives on the fetcher's own daemon thread, which creates, polls and
closes it; the thread hands batches to the loop with ``call_soon_threadsafe`` and holds at most
``MAX_PENDING_BATCHES`` undelivered, so a busy loop slows the fetcher rather than growing memory.
``positions``, ``viewers`` and ``ready`` are loop-only. :class:`TopicStats` is shared by the loop and
the consumer threads (librdkafka's statistics callback) under its lock.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from confluent_kafka import KafkaError

from controlplane.kafkarest.access import ClusterAccess
from controlplane.kafkarest.consuming import take
from controlplane.kafkarest.tail import kafka
from controlplane.kafkarest.tail.protocol import Close, ProtocolError
from controlplane.kafkarest.tail.records import Record, render
from controlplane.kafkarest.tail.schemas import SchemaDecoder

log = logging.getLogger(__name__)

MAX_PENDING_BATCHES = 8
BATCH_BYTES = 256 * 1024
CONSUME_MESSAGES = 500
POLL_SECONDS = 0.5
FATAL = {KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_PARTITION, KafkaError._UNKNOWN_TOPIC,
         KafkaError.TOPIC_AUTHORIZATION_FAILED}


@dataclass(frozen=True, slots=True)
class Batch:
    """Records in fetch order, and the fetcher's position for every partition after them."""

    records: tuple[Record, ...]
    positions: dict[int, int]
    chunk: bytes  # the records' JSON, rendered together on the fetch thread (records.render)


class Viewer(Protocol):
    def on_live(self, batch: Batch) -> None: ...

    def on_live_failed(self, error: ProtocolError) -> None: ...


def fatal_error(error: KafkaError) -> ProtocolError | None:
    """A consume error that ends a tail (others, like a lost connection, librdkafka retries)."""
    if error.code() not in FATAL:
        return None
    if error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED:
        return ProtocolError("not_authorized", f"Not authorized to read the topic: {error.str()}", Close.FORBIDDEN)
    return ProtocolError("topic_not_found", "The topic or partition no longer exists.", Close.NOT_FOUND)


class TopicStats:
    """What this process's tail of one topic did; see the module docstring for who writes it."""

    def __init__(self, buffer_limit: int) -> None:
        self._lock = threading.Lock()
        self.viewers = 0
        self.live_fetchers = 0
        self.slow_disconnects = 0
        self.buffer_limit = buffer_limit
        self.buffer_high_water = 0
        self.stats_reports = 0
        self._fetches: dict[tuple[str, int], int] = {}  # (kind, consumer) -> Fetch requests so far
        self._retired = {"live": 0, "backlog": 0}

    def on_stats(self, kind: str, consumer: int) -> Callable[[str], None]:
        """A librdkafka ``stats_cb`` that records the consumer's Fetch requests."""
        def record(stats_json: str) -> None:
            count = kafka.fetch_requests(stats_json)
            with self._lock:
                self._fetches[(kind, consumer)] = count
                self.stats_reports += 1
        return record

    def retire(self, kind: str, consumer: int) -> None:
        with self._lock:
            self._retired[kind] += self._fetches.pop((kind, consumer), 0)

    def buffered(self, size: int) -> None:
        with self._lock:
            self.buffer_high_water = max(self.buffer_high_water, size)

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            fetches = dict(self._retired)
            for (kind, _), count in self._fetches.items():
                fetches[kind] += count
            return {"viewers": self.viewers, "live_fetchers": self.live_fetchers, "fetch_requests": fetches,
                    "stats_reports": self.stats_reports, "slow_disconnects": self.slow_disconnects,
                    "buffer_limit": self.buffer_limit, "buffer_high_water": self.buffer_high_water}


class LiveFetcher:
    """The shared reader of one topic; see the module docstring for its thread and its owner."""

    def __init__(self, key: tuple[Any, ...], access: ClusterAccess, topic: str, stats: TopicStats,
                 on_stopped: Callable[[LiveFetcher], None]) -> None:
        self.key = key
        self.access = access
        self.topic = topic
        self.stats = stats
        self.loop = asyncio.get_running_loop()
        self.viewers: set[Viewer] = set()
        self.partitions: tuple[int, ...] = ()
        self.positions: dict[int, int] = {}
        self.ready: asyncio.Future[None] = self.loop.create_future()
        self.failed: ProtocolError | None = None
        self.stopped = False
        self._on_stopped = on_stopped
        self._stop = threading.Event()
        self._pending = threading.Semaphore(MAX_PENDING_BATCHES)
        self._thread = threading.Thread(target=self._run, name=f"tail-fetch {topic}", daemon=True)
        self._decode = SchemaDecoder(access.cluster_pk)  # used on the fetch thread only

    def start(self) -> None:
        self.stats.live_fetchers += 1
        self._thread.start()

    def stop(self) -> None:
        """Stop fetching (loop side); the thread closes its consumer and exits on its own."""
        if not self.stopped:
            self.stopped = True
            self.stats.live_fetchers -= 1
            self._stop.set()
            self._on_stopped(self)

    # ------------------------------------------------------------------ the fetch thread

    def _post(self, callback: Callable[..., None], *args: Any) -> bool:
        while not self._pending.acquire(timeout=POLL_SECONDS):
            if self._stop.is_set():
                return False
        try:
            self.loop.call_soon_threadsafe(callback, *args)
        except RuntimeError:  # the loop is closed: the process is shutting down
            self._stop.set()
            return False
        return True

    def _run(self) -> None:
        consumer_id = id(self)
        consumer = kafka.make_consumer(self.access.client_config(), on_stats=self.stats.on_stats("live", consumer_id),
                                       live=True)
        try:
            partitions = kafka.partitions_of(consumer, self.topic)
            positions = {p: high for p, (_, high) in kafka.watermarks(consumer, self.topic, partitions).items()}
            kafka.assign(consumer, self.topic, positions)
            self._post(self._became_ready, tuple(partitions), dict(positions))
            posted = dict(positions)
            while not self._stop.is_set():
                records: list[Record] = []
                size = 0
                for message in take(consumer, CONSUME_MESSAGES, POLL_SECONDS):
                    error = message.error()
                    partition = message.partition() or 0
                    if error is not None:
                        if error.code() == KafkaError._PARTITION_EOF:
                            positions[partition] = max(positions.get(partition, 0), message.offset() or 0)
                        elif (fatal := fatal_error(error)) is not None:
                            raise fatal
                        else:
                            log.debug("tail fetch of %s: %s", self.topic, error)
                        continue
                    record = Record.from_message(message, self._decode)
                    records.append(record)
                    size += record.size
                    positions[partition] = record.offset + 1
                    if size >= BATCH_BYTES:
                        self._post(self._dispatch, Batch(tuple(records), dict(positions), render(records)))
                        posted, records, size = dict(positions), [], 0
                if records or positions != posted:
                    self._post(self._dispatch, Batch(tuple(records), dict(positions), render(records)))
                    posted = dict(positions)
        except ProtocolError as exc:
            self._post(self._fail, exc)
        except Exception:
            log.exception("tail fetch of %s failed", self.topic)
            self._post(self._fail, ProtocolError("internal_error", "The tail's reader failed.", Close.INTERNAL))
        finally:
            consumer.close()
            self._decode.close()
            self.stats.retire("live", consumer_id)

    # ------------------------------------------------------------------ on the loop

    def _became_ready(self, partitions: tuple[int, ...], positions: dict[int, int]) -> None:
        self._pending.release()
        self.partitions, self.positions = partitions, positions
        if not self.ready.done():
            self.ready.set_result(None)

    def _dispatch(self, batch: Batch) -> None:
        self._pending.release()
        self.positions.update(batch.positions)
        for viewer in list(self.viewers):
            viewer.on_live(batch)

    def _fail(self, error: ProtocolError) -> None:
        self._pending.release()
        self.failed = error
        if not self.ready.done():
            self.ready.set_result(None)
        for viewer in list(self.viewers):
            viewer.on_live_failed(error)
        self.stop()


class FetcherRegistry:
    """Live fetchers by (cluster id, topic, principal) and stats by (cluster id, topic) for this process;
    loop-only (see module docstring). A fetcher reads as its viewers' principal, so viewers with different
    principals never share one: each sees only what the cluster's ACLs let it read."""

    def __init__(self) -> None:
        self._fetchers: dict[tuple[Any, ...], LiveFetcher] = {}
        self._stats: dict[tuple[str, str], TopicStats] = {}

    def stats(self, cluster_id: str, topic: str, buffer_limit: int) -> TopicStats:
        stats = self._stats.get((cluster_id, topic))
        if stats is None:
            stats = self._stats[(cluster_id, topic)] = TopicStats(buffer_limit)
        return stats

    def attach(self, access: ClusterAccess, topic: str, viewer: Viewer, stats: TopicStats) -> LiveFetcher:
        key = (access.kafka_cluster_id, topic, access.client_key)
        fetcher = self._fetchers.get(key)
        if fetcher is None:
            fetcher = self._fetchers[key] = LiveFetcher(key, access, topic, stats, self._stopped)
            fetcher.start()
        fetcher.viewers.add(viewer)
        return fetcher

    def detach(self, fetcher: LiveFetcher, viewer: Viewer) -> None:
        fetcher.viewers.discard(viewer)
        if not fetcher.viewers:
            fetcher.stop()

    def _stopped(self, fetcher: LiveFetcher) -> None:
        if self._fetchers.get(fetcher.key) is fetcher:
            del self._fetchers[fetcher.key]


registry = FetcherRegistry()
