"""One viewer's subscription: resolve its start, read its backlog, join the live stream, send frames.

The cursor contract: every ``records``/``progress``/``done`` frame carries ``cursor``, the next offset
per subscribed partition; every record below it has been sent or filtered out, and none at or above
it has. A client that reconnects with ``{"from": {"offsets": cursor}}`` continues with no gap and no
duplicate.

How the exact hand-over works: ``_read`` is the next offset this viewer has queued per partition. A
partition is served by the shared :class:`~controlplane.kafkarest.tail.fetcher.LiveFetcher` once
``_read[p]`` has reached the fetcher's position there (checked and switched on the event loop with no
``await`` in between, while the fetcher's positions only change on the loop); from then on the viewer
keeps the fetcher's records of ``p`` from ``_read[p]`` on. Until then its own consumer reads ``p``.

Ownership: a :class:`TailSession` is created and run by its connection (``app.py``) on the event loop.
Its own consumer, when it has one, is only called through :meth:`_call`, on the tail's thread pool,
one call at a time (a lock), so closing it never races a read.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import operator
import threading
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from confluent_kafka import Consumer, KafkaError

from controlplane.kafkarest.access import ClusterAccess
from controlplane.kafkarest.consuming import take
from controlplane.kafkarest.tail import kafka
from controlplane.kafkarest.tail.fetcher import Batch, FetcherRegistry, LiveFetcher, fatal_error
from controlplane.kafkarest.tail.filters import RecordFilter
from controlplane.kafkarest.tail.flow import TokenBucket, ViewerBuffer, item
from controlplane.kafkarest.tail.protocol import (
    Close,
    ProtocolError,
    Subscription,
    done_frame,
    progress_frame,
    records_frame,
    subscribed_frame,
)
from controlplane.kafkarest.tail.records import Record, render
from controlplane.kafkarest.tail.schemas import SchemaDecoder

T = TypeVar("T")

# Blocking Kafka calls of backlog readers; a consume waits at most POLL_SECONDS, so threads turn over.
EXECUTOR = concurrent.futures.ThreadPoolExecutor(max_workers=32, thread_name_prefix="tail-backlog")
BACKLOG_MESSAGES = 2000  # per thread hop; what librdkafka has prefetched, no wait beyond the first
POLL_SECONDS = 0.5
READY_SECONDS = 30.0
FRAME_BYTES = 512 * 1024  # of record sizes (flow.Item), about half of it on the wire: under 1 MiB, clients' usual
_JSON = operator.attrgetter("json")


@dataclass(frozen=True, slots=True)
class Limits:
    buffer_bytes: int
    bytes_per_second: int


@dataclass(frozen=True, slots=True)
class Read:
    """What a backlog consume returned other than a record: a partition's end (offset = the high watermark)
    or an error."""

    partition: int
    offset: int
    error: KafkaError | None = None


def _pieces(records: list[Record], limit: int) -> list[tuple[int, int]]:
    """``records`` cut into runs of about ``limit`` bytes of record sizes, as (start, end) indexes: one item, and so
    one frame, each (a frame of a whole 2,000-record consume of 1 KiB values would pass the 1 MiB message size
    many WebSocket clients accept). At least one run, empty when there are no records."""
    bounds, start, size = [], 0, 0
    for index, record in enumerate(records):
        size += record.size
        if size >= limit:
            bounds.append((start, index + 1))
            start, size = index + 1, 0
    if start < len(records) or not bounds:
        bounds.append((start, len(records)))
    return bounds


def _digest(consumer: Consumer, count: int,
            decode: SchemaDecoder) -> tuple[list[Record], list[tuple[int, int, bytes]], list[Read]]:
    """The records of a backlog consume, in order, in frame-sized runs whose JSON is rendered together (on this
    thread, not the loop); and partition ends and errors apart (no wrapper per record: this runs for every record
    of a backlog)."""
    records: list[Record] = []
    reads: list[Read] = []
    try:
        for message in take(consumer, count, POLL_SECONDS):
            error = message.error()
            if error is None:
                records.append(Record.from_message(message, decode))
            elif error.code() == KafkaError._PARTITION_EOF:
                reads.append(Read(message.partition() or 0, message.offset() or 0))
            else:
                reads.append(Read(message.partition() or 0, message.offset() or 0, error))
    finally:
        decode.release()
    return records, [(a, b, render(records[a:b])) for a, b in _pieces(records, FRAME_BYTES)], reads


class TailSession:
    """See the module docstring."""

    def __init__(self, *, access: ClusterAccess, topic: str, subscription: Subscription,
                 record_filter: RecordFilter | None, send: Callable[[str], Awaitable[None]], limits: Limits,
                 registry: FetcherRegistry) -> None:
        self.access, self.cluster_id, self.topic = access, access.kafka_cluster_id, topic
        self.subscription = subscription
        self.filter = record_filter
        self._send = send
        self.limits = limits
        self.registry = registry
        self.stats = registry.stats(self.cluster_id, topic, limits.buffer_bytes)
        self.cursor: dict[int, int] = {}  # next offset per subscribed partition, as sent to the client
        self._read: dict[int, int] = {}  # next offset per subscribed partition, as queued in the buffer
        self._end: dict[int, int] | None = None
        self._joined: set[int] = set()
        self._own: set[int] = set()
        self._buffer = ViewerBuffer(limits.buffer_bytes)
        self._fetcher: LiveFetcher | None = None
        self._consumer: Consumer | None = None
        self._consumer_lock = threading.Lock()
        self._decode = SchemaDecoder(access.cluster_pk)  # called by _digest on the thread pool, one call at a time
        self._failure: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    # ------------------------------------------------------------------ lifecycle

    async def run(self) -> None:
        """Serve until a bounded read is done (returns) or the tail fails (raises ProtocolError)."""
        self.stats.viewers += 1
        tasks: list[asyncio.Task[None]] = []
        try:
            await self._start()
            tasks.append(asyncio.create_task(self._sender()))
            if self._own:
                tasks.append(asyncio.create_task(self._backlog()))
            waiting: set[asyncio.Future[Any]] = {self._failure, *tasks}
            while True:
                done, _ = await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
                if self._failure in done:
                    self._failure.result()
                for task in done:
                    task.result()  # a failed task raises here
                    waiting.discard(task)
                if tasks[0] in done:  # the sender finished: a bounded read is done
                    return
        finally:
            for task in tasks:
                task.cancel()
            for task in tasks:
                with contextlib.suppress(BaseException):
                    await task
            self._buffer.clear()
            if self._fetcher is not None:
                self.registry.detach(self._fetcher, self)
            self._close_consumer()
            self.stats.viewers -= 1

    def _fail(self, error: ProtocolError) -> None:
        if not self._failure.done():
            self._failure.set_exception(error)
            self._failure.exception()  # retrieved: no "never retrieved" warning if nobody awaits it

    async def _call(self, fn: Callable[..., T], *args: Any) -> T:
        def locked() -> T:
            with self._consumer_lock:
                return fn(*args)
        return await asyncio.get_running_loop().run_in_executor(EXECUTOR, locked)

    def _close_consumer(self) -> None:
        consumer, self._consumer = self._consumer, None
        if consumer is not None:
            def close() -> None:
                with self._consumer_lock:
                    consumer.close()
                self.stats.retire("backlog", id(self))
            EXECUTOR.submit(close)

    async def _start(self) -> None:
        sub = self.subscription
        fetcher: LiveFetcher | None = None
        if not sub.bounded:
            fetcher = self._fetcher = self.registry.attach(self.access, self.topic, self,
                                                           self.stats)
            try:
                await asyncio.wait_for(asyncio.shield(fetcher.ready), READY_SECONDS)
            except TimeoutError:
                raise ProtocolError("kafka_unavailable", "The cluster did not answer.", Close.KAFKA_UNAVAILABLE) \
                    from None
            if fetcher.failed is not None:
                raise fetcher.failed
        needs_consumer = sub.bounded or sub.start.mode != "latest"
        if needs_consumer:
            on_stats = self.stats.on_stats("backlog", id(self))
            config = self.access.client_config()
            self._consumer = await self._call(lambda: kafka.make_consumer(config, on_stats=on_stats, live=False))
        all_partitions = fetcher.partitions if fetcher is not None else \
            tuple(await self._call(kafka.partitions_of, self._consumer, self.topic))
        partitions = sub.partitions or all_partitions
        missing = sorted(set(partitions) - set(all_partitions))
        if missing:
            raise ProtocolError("partition_not_found", f"Partition(s) {missing} of {self.topic} do not exist.",
                                Close.NOT_FOUND)
        if sub.start.mode == "latest" and fetcher is not None:
            start = {p: fetcher.positions[p] for p in partitions}
        else:
            start = await self._call(kafka.resolve_start, self._consumer, self.topic, sub.start, partitions)
        if sub.bounded:
            marks = await self._call(kafka.watermarks, self._consumer, self.topic, partitions)
            self._end = {p: high for p, (_, high) in marks.items()}
        self.cursor, self._read = dict(start), dict(start)
        # From here to the end of the method there is no await: the hand-over check is atomic.
        for p in partitions:
            if self._end is not None:
                if self._read[p] < self._end[p]:
                    self._own.add(p)
            elif fetcher is not None and self._read[p] >= fetcher.positions[p]:
                self._joined.add(p)
            else:
                self._own.add(p)
        if self._own and self._consumer is not None:
            kafka.assign(self._consumer, self.topic, {p: self._read[p] for p in self._own})
        else:
            self._close_consumer()
        await self._send(subscribed_frame(self.topic, self.cursor, self._end))

    # ------------------------------------------------------------------ live records (loop, from the fetcher)

    def on_live(self, batch: Batch) -> None:
        if self._failure.done() or not self._joined:
            return
        joined, read = self._joined, self._read
        records = tuple(r for r in batch.records if r.partition in joined and r.offset >= read[r.partition])
        chunk = batch.chunk if len(records) == len(batch.records) else None  # all kept: the batch's JSON serves
        positions: dict[int, int] = {}
        for p in joined:
            position = batch.positions.get(p)
            if position is not None and position > read[p]:
                read[p] = positions[p] = position
        if not records and not positions:
            return
        if not self._buffer.offer(item(records, positions, chunk)):
            self._buffer.clear()
            self.stats.slow_disconnects += 1
            self._fail(ProtocolError("too_slow", "The viewer fell more than the buffer "
                                     f"({self.limits.buffer_bytes} bytes) behind the topic; reconnect with the "
                                     "cursor, a narrower filter or fewer partitions.", Close.TOO_SLOW))
            return
        self.stats.buffered(self._buffer.bytes)

    def on_live_failed(self, error: ProtocolError) -> None:
        self._fail(error)

    # ------------------------------------------------------------------ the backlog reader (own consumer)

    async def _backlog(self) -> None:
        consumer = self._consumer
        assert consumer is not None
        while self._own:
            fetched, rendered, reads = await self._call(_digest, consumer, BACKLOG_MESSAGES, self._decode)
            own, read, end = self._own, self._read, self._end
            for failed in reads:
                if failed.error is not None and failed.partition in own \
                        and (fatal := fatal_error(failed.error)) is not None:
                    raise fatal
            # A partition's records come in offset order, so each one's next offset is its last record's + 1
            # (bounded: at most its end, and a record past the end means everything before it is read).
            if end is None:
                records = [r for r in fetched if r.partition in own and r.offset >= read[r.partition]]
            else:
                records = [r for r in fetched
                           if r.partition in own and read[r.partition] <= r.offset < end[r.partition]]
            advanced = {r.partition: r.offset + 1 for r in fetched}
            for ended in reads:  # a partition's end: the high watermark
                if ended.error is None and ended.offset > advanced.get(ended.partition, -1):
                    advanced[ended.partition] = ended.offset
            positions: dict[int, int] = {}
            for p, position in advanced.items():
                if p not in own:
                    continue
                if end is not None:
                    position = min(position, end[p])
                if position > read[p]:
                    read[p] = positions[p] = position
            if records or positions:
                # All kept: the consume's runs and their JSON serve; else runs of the kept records, each
                # rendered by the sender. Each run's positions cover its records; the last run's are the read's.
                runs: Sequence[tuple[int, int, bytes | None]] = rendered if len(records) == len(fetched) else [
                    (a, b, None) for a, b in _pieces(records, FRAME_BYTES)]
                for n, (a, b, chunk) in enumerate(runs):
                    run = records[a:b]
                    where = positions if n == len(runs) - 1 else {r.partition: r.offset + 1 for r in run}
                    await self._buffer.put(item(tuple(run), where, chunk))
                self.stats.buffered(self._buffer.bytes)
            # No await from here to the unassign call: the hand-over check is atomic.
            handed = [p for p in self._own if self._caught_up(p)]
            for p in handed:
                self._own.discard(p)
                if self._end is None:
                    self._joined.add(p)
            if handed and self._own:
                await self._call(kafka.unassign, consumer, self.topic, handed)
        self._close_consumer()

    def _caught_up(self, p: int) -> bool:
        if self._end is not None:
            return self._read[p] >= self._end[p]
        fetcher = self._fetcher
        return fetcher is not None and p in fetcher.positions and self._read[p] >= fetcher.positions[p]

    # ------------------------------------------------------------------ the sender

    def _finished(self) -> bool:
        return self._end is not None and all(self.cursor[p] >= self._end[p] for p in self.cursor)

    async def _sender(self) -> None:
        bucket = TokenBucket(self.limits.bytes_per_second, FRAME_BYTES)
        skipped = 0
        while not self._finished():
            texts: list[bytes] = []
            moved = False
            for entry in await self._buffer.take(FRAME_BYTES):
                # The cursor moves by the entry's positions, which cover its records (see flow.Item): no work
                # per record beyond its filter.
                if self.filter is None:
                    if entry.chunk is not None:
                        if entry.chunk:
                            texts.append(entry.chunk)
                    else:
                        texts.extend(map(_JSON, entry.records))
                else:
                    for record in entry.records:
                        if self.filter.matches(record):
                            texts.append(record.json)
                        else:
                            skipped += 1
                for p, position in entry.positions.items():
                    if position > self.cursor[p]:
                        self.cursor[p] = position
                        moved = True
            if texts:
                frame = records_frame(texts, self.cursor)
                skipped = 0
            elif moved:
                frame = progress_frame(self.cursor, skipped)
                skipped = 0
            else:
                continue
            await bucket.take(len(frame))
            await self._send(frame)
        await self._send(done_frame(self.cursor))

