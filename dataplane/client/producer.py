"""An idempotent Kafka producer on one asyncio event loop, for callers whose records arrive together.

Why not librdkafka: the REST proxy's produce requests bring their records together (a ``records:batch`` of 100,
a piece of a streamed body), and librdkafka takes them one ``produce()`` call and one delivery callback per
record, which was most of a web process's CPU. Here a caller's records are encoded into one RecordBatch by
compiled code (``dataplane.protocol._encode``) and acknowledged together: one Produce per partition, one
future per caller. It also runs on the caller's own event loop: no thread to hand records to and no GIL
hand-off per delivery.

Guarantees, as librdkafka's with ``acks=all`` and ``enable.idempotence``: a batch is acknowledged once the
in-sync replicas have it, and a batch sent again (a lost connection, a timeout, a leader change) is written
once, because it goes again byte for byte with its producer id and sequence, which the partition leader
dedupes (``dataplane.storage.producer_state``). A batch given up on (delivery timeout) leaves its fate
unknown, so the producer then takes a new producer id before its next batch, as the Java client bumps its
epoch: a later batch can never be mistaken for it. One batch is in flight per partition, which keeps records
in order; what arrives meanwhile waits and goes in the next batch (no ``linger.ms``: a lone request leaves at
once, a busy partition batches by itself). A batch the broker refuses outright (too large, a bad record) was
not written: when it held more than one record it is split into one batch per record, so one bad record fails
alone, as the Java client splits a batch that is too large.

Ownership: an ``AsyncProducer`` belongs to the event loop it is first used on, and every method must be called
there; it is not thread-safe. Its connections' reader tasks and its partitions' send tasks run on that loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import functools
import logging
import random
import time
from collections import deque
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from kio.index import load_request_schema
from kio.schema.errors import ErrorCode as WireError

from dataplane.client.wire import AdminError, BrokerInfo, WireSettings, negotiate, request, sasl_dialogue
from dataplane.protocol._encode import encode_batch
from dataplane.protocol.build import nested
from dataplane.protocol.client import ClientCodec
from dataplane.protocol.errors import ErrorCode
from dataplane.protocol.framing import DEFAULT_MAX_FRAME_BYTES, SIZE, RemoteProtocolError

log = logging.getLogger(__name__)

T = TypeVar("T")

PRODUCE, METADATA, API_VERSIONS, INIT_PRODUCER_ID = 0, 3, 18, 22
PRODUCE_VERSIONS = range(3, 10)  # v3+: RecordBatch v2 only, which is all this producer writes
METADATA_VERSIONS = range(1, 13)
INIT_PRODUCER_ID_VERSIONS = range(0, 5)
METADATA_SECONDS = 10.0  # how long a topic's partitions and leaders are trusted before they are read again
MAX_BATCH_BYTES = 1024 * 1024  # records of several callers merged into one batch up to this (a lone caller: any)
RETRY_BACKOFF_SECONDS = (0.02, 0.05, 0.1, 0.2, 0.5, 1.0)
MAX_SEQUENCE = 2**31 - 1

# Answers after which the same batch is sent again, once the leaders are read again (besides every error Kafka
# calls retriable; UNKNOWN_TOPIC_OR_PART too: the metadata read next says whether the topic is really gone).
RETRIABLE = frozenset({ErrorCode.UNKNOWN_TOPIC_OR_PARTITION})
# The partition's producer state does not match ours (it lost it, or a batch was given up): the batch was not
# written, so it goes again under a new producer id.
PRODUCER_STATE = frozenset({ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, ErrorCode.UNKNOWN_PRODUCER_ID,
                            ErrorCode.INVALID_PRODUCER_EPOCH})
# A refusal that may be one record's fault: a batch of several is split into one batch per record.
SPLITTABLE = frozenset({ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE, ErrorCode.INVALID_RECORD,
                        ErrorCode.CORRUPT_MESSAGE, ErrorCode.INVALID_TIMESTAMP})
ACKNOWLEDGED = frozenset({ErrorCode.NONE, ErrorCode.DUPLICATE_SEQUENCE_NUMBER})

Record = tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]] | None, int]
"""(key, value, headers, timestamp in epoch ms): what ``encode_batch`` takes."""


@dataclass(frozen=True, slots=True)
class Segment:
    """What became of records ``start`` to ``start + count - 1`` of one ``send``: their first offset (the others
    follow one by one) and the log-append time (-1: the topic keeps the records' own timestamps), or an error."""

    start: int
    count: int
    base_offset: int
    log_append_time: int
    error: AdminError | None = None


@dataclass(slots=True)
class _Send:
    """One caller's records for one partition, and the future that gets their segments."""

    records: list[Record]
    future: asyncio.Future[list[Segment]]
    segments: list[Segment] = field(default_factory=list)
    left: int = 0

    def settle(self, segment: Segment) -> None:
        self.segments.append(segment)
        self.left -= segment.count
        if self.left <= 0 and not self.future.done():
            self.segments.sort(key=lambda s: s.start)
            self.future.set_result(self.segments)


@dataclass(slots=True)
class _Piece:
    """Records ``start`` onwards of a ``_Send`` (all of them, or one after a split) waiting for a batch."""

    send: _Send
    start: int
    records: list[Record]
    alone: bool = False  # split off a refused batch: goes in a batch of its own


@dataclass(slots=True)
class _Partition:
    waiting: deque[_Piece] = field(default_factory=deque)
    sending: bool = False
    sequence: int = 0
    generation: int = -1  # the producer id generation ``sequence`` counts under


@dataclass(slots=True)
class _Topic:
    leaders: list[int]  # by partition: the leader's node id, -1 when there is none
    fresh_until: float


class _Connection:
    """One broker connection: requests pipelined, answered in order and matched by a reader task."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, client_id: str, where: str) -> None:
        self._reader = reader
        self._writer = writer
        self._codec = ClientCodec(client_id)
        self._waiting: deque[asyncio.Future[Any]] = deque()
        self.where = where
        self.served: dict[int, tuple[int, int]] = {}
        self.closed = False
        self.retiring = False
        # When a SASL session ends (KIP-368: the token's lifetime), the broker closes a connection that sends
        # more; it is replaced before then (at 80 %, as librdkafka re-authenticates), not after a failed request.
        self.renew_at: float | None = None
        self._task = asyncio.get_running_loop().create_task(self._read_all(), name=f"kafka reader {where}")

    @classmethod
    async def open(cls, settings: WireSettings, broker: BrokerInfo, timeout: float) -> _Connection:
        where = f"broker {broker.node_id} at {broker.host}:{broker.port}"
        tls, credentials = settings.security()
        try:
            async with asyncio.timeout(timeout):
                reader, writer = await asyncio.open_connection(
                    broker.host, broker.port, ssl=tls, server_hostname=broker.host if tls else None)
        except (OSError, TimeoutError) as exc:
            raise AdminError("_TRANSPORT", f"{where}: {exc or 'no connection in time'}", retriable=True) from exc
        connection = cls(reader, writer, settings.client_id, where)
        try:
            async with asyncio.timeout(timeout):
                answer = await connection.call(request(API_VERSIONS, 0), 0)
                connection.served = {int(a.api_key): (int(a.min_version), int(a.max_version))
                                     for a in answer.api_keys}
                if credentials is not None:
                    dialogue = sasl_dialogue(credentials, where)
                    step: Any = None
                    with contextlib.suppress(StopIteration):
                        while True:
                            step = await connection.call(dialogue.send(step))
                    lifetime = getattr(step, "session_lifetime", None)
                    if lifetime is not None and lifetime.total_seconds() > 0:
                        connection.renew_at = time.monotonic() + 0.8 * lifetime.total_seconds()
        except TimeoutError as exc:
            connection.close()
            raise AdminError("_TIMED_OUT", f"{where}: no handshake in {timeout:g} s", retriable=True) from exc
        except BaseException:
            connection.close()
            raise
        return connection

    def version(self, api_key: int, readable: range) -> int:
        return negotiate(self.served, api_key, readable, self.where)

    async def call(self, message: Any, version: int | None = None) -> Any:
        """The decoded body of the answer to one kio request (AdminError _TRANSPORT when the connection fails)."""
        if self.closed:
            raise AdminError("_TRANSPORT", f"{self.where}: connection closed", retriable=True)
        _, data = self._codec.send(message, version)
        answer: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiting.append(answer)
        self._writer.write(data)
        if self._writer.transport.get_write_buffer_size() > 1024 * 1024:
            await self._writer.drain()
        return await answer

    async def _read_all(self) -> None:
        failure: BaseException | None = None
        try:
            while True:
                head = await self._reader.readexactly(4)
                (size,) = SIZE.unpack(head)
                if size < 0 or size > DEFAULT_MAX_FRAME_BYTES:
                    raise RemoteProtocolError(f"response frame of {size} bytes")
                body = self._codec.receive_frame(await self._reader.readexactly(size)).body
                answer = self._waiting.popleft()
                if not answer.done():
                    answer.set_result(body)
                if self.retiring and not self._waiting:
                    break
        except Exception as exc:  # a broken connection or an answer that does not decode: the stream is lost
            failure = exc
        except asyncio.CancelledError:
            failure = ConnectionAbortedError("connection closed")
        finally:
            self.close()
            error = AdminError("_TRANSPORT", f"{self.where}: {failure or 'connection closed'}", retriable=True)
            while self._waiting:
                answer = self._waiting.popleft()
                if not answer.done():
                    answer.set_exception(error)

    @property
    def usable(self) -> bool:
        return not self.closed and (self.renew_at is None or time.monotonic() < self.renew_at)

    def retire(self) -> None:
        """No new requests; closed once the ones sent are answered."""
        self.retiring = True
        if not self._waiting:
            self.close()

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._writer.close()
            self._task.cancel()


class AsyncProducer:
    """See the module docstring: who owns it (one event loop) and what it guarantees."""

    def __init__(self, config: Mapping[str, Any], bootstrap: Sequence[tuple[str, int]], *,
                 client_id: str = "sluice-rest-proxy", delivery_timeout: float = 30.0,
                 request_timeout: float = 30.0, max_batch_bytes: int = MAX_BATCH_BYTES) -> None:
        if not bootstrap:
            raise AdminError("_INVALID_ARG", "no bootstrap servers")
        self._settings = WireSettings(config, client_id=client_id)
        self._bootstrap = [BrokerInfo(-1 - i, host, port, None) for i, (host, port) in enumerate(bootstrap)]
        self._brokers: dict[int, BrokerInfo] = {}
        self._connections: dict[int, _Connection] = {}
        self._connecting: dict[int, asyncio.Task[_Connection]] = {}
        self._topics: dict[str, _Topic] = {}
        self._reading: dict[str, asyncio.Task[_Topic]] = {}
        self._partitions: dict[tuple[str, int], _Partition] = {}
        self._producer: tuple[int, int, int] | None = None  # (id, epoch, generation)
        self._producer_failure: tuple[float, AdminError] | None = None
        self._generation = 0
        self._initialising: asyncio.Task[tuple[int, int, int]] | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._delivery_timeout = delivery_timeout
        self._request_timeout = request_timeout
        self._max_batch_bytes = max_batch_bytes
        self.closed = False
        self.last_used = time.monotonic()  # of ``send``: the pool closes producers idle for long
        self.retries = 0  # batches sent again (after a lost connection, a timeout, a leader change): a metric

    # ---------------------------------------------------------------- the callers' side

    def cached_partition_count(self, topic: str) -> int | None:
        """The topic's partition count if known and fresh, else None (never waits)."""
        known = self._topics.get(topic)
        return len(known.leaders) if known is not None and known.fresh_until > time.monotonic() else None

    async def partition_count(self, topic: str, *, fresh: bool = False) -> int:
        """The topic's partition count (cached briefly; ``fresh``: read again unless read in the last second, for a
        partition beyond the count, which may have grown). AdminError UNKNOWN_TOPIC_OR_PART
        when it does not exist, TOPIC_AUTHORIZATION_FAILED when the principal may not describe it."""
        count = None if fresh else self.cached_partition_count(topic)
        if count is not None:
            return count
        known = self._topics.get(topic)
        if fresh and known is not None and known.fresh_until - METADATA_SECONDS < time.monotonic() - 1:
            self._topics.pop(topic, None)  # at most once a second: not for every request naming a bad partition
        return len((await self._topic(topic)).leaders)

    def send(self, topic: str, partition: int, records: list[Record]) -> asyncio.Future[list[Segment]]:
        """Queue records for one partition; the future gets their segments (in record order) once every record
        is acknowledged or has failed. It never raises: failures are in the segments."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[list[Segment]] = loop.create_future()
        if not records:
            future.set_result([])
            return future
        if self.closed:
            future.set_result([Segment(0, len(records), -1, -1, AdminError("_DESTROY", "the producer is closed"))])
            return future
        self.last_used = time.monotonic()
        pending = _Send(records, future, left=len(records))
        part = self._partitions.get((topic, partition))
        if part is None:
            part = self._partitions[(topic, partition)] = _Partition()
        part.waiting.append(_Piece(pending, 0, records))
        if not part.sending:
            part.sending = True
            self._spawn(self._drain(topic, partition, part), f"produce {topic}-{partition}")
        return future

    def close(self) -> None:
        """Drop connections and fail what waits (a caller of ``send`` gets its segments with errors)."""
        self.closed = True
        for task in list(self._tasks):
            task.cancel()
        for connection in self._connections.values():
            connection.close()
        self._connections.clear()
        error = AdminError("_DESTROY", "the producer is closed")
        for part in self._partitions.values():
            while part.waiting:
                piece = part.waiting.popleft()
                piece.send.settle(Segment(piece.start, len(piece.records), -1, -1, error))

    # ---------------------------------------------------------------- batches

    async def _drain(self, topic: str, partition: int, part: _Partition) -> None:
        """Send the partition's waiting pieces, one batch at a time, until none wait."""
        pieces: list[_Piece] = []
        try:
            while part.waiting:
                pieces = [part.waiting.popleft()]
                if not pieces[0].alone:
                    size = _size(pieces[0].records)
                    while part.waiting and not part.waiting[0].alone:
                        more = _size(part.waiting[0].records)
                        if size + more > self._max_batch_bytes:
                            break
                        size += more
                        pieces.append(part.waiting.popleft())
                await self._send_batch(topic, partition, part, pieces)
                pieces = []
        except asyncio.CancelledError:
            # Closed: the batch in flight may or may not be written; its callers are told it failed.
            self._fail([*pieces, *part.waiting], AdminError("_DESTROY", "the producer is closed"))
            part.waiting.clear()
            raise
        except Exception as exc:  # a bug: callers get an error rather than waiting for ever
            log.exception("producing to %s-%d failed", topic, partition)
            self._producer = None  # the batch in flight may or may not be written: no later one reuses its sequence
            self._fail([*pieces, *part.waiting], AdminError("_FAIL", f"the producer failed: {exc!r}"))
            part.waiting.clear()
        finally:
            part.sending = False

    async def _send_batch(self, topic: str, partition: int, part: _Partition, pieces: list[_Piece]) -> None:
        records = pieces[0].records if len(pieces) == 1 else [r for piece in pieces for r in piece.records]
        deadline = time.monotonic() + self._delivery_timeout
        attempt = 0
        batch = b""
        last: AdminError | None = None
        while True:
            if not batch:
                try:
                    producer_id, epoch, generation = await self._producer_id()
                except AdminError as exc:
                    self._fail(pieces, exc)
                    return
                if part.generation != generation:
                    part.generation, part.sequence = generation, 0
                try:
                    batch = encode_batch(records, producer_id, epoch, part.sequence)
                except (TypeError, ValueError) as exc:  # a caller's bad record (nothing was sent): it fails alone
                    if len(records) > 1:
                        self._split(part, pieces)
                    else:
                        self._fail(pieces, AdminError("_INVALID_ARG", f"a record cannot be encoded: {exc}"))
                    return
            if time.monotonic() >= deadline:
                # Its fate is unknown (it may have been written): no later batch may reuse its sequence.
                self._retire_producer_id(generation)
                why = last.message if last is not None else "no answer"
                self._fail(pieces, AdminError("_MSG_TIMED_OUT", f"not acknowledged in {self._delivery_timeout:g} s "
                                              f"({why})", retriable=True))
                return
            try:
                answer = await self._produce(topic, partition, batch, deadline)
            except AdminError as exc:
                if not exc.retriable or exc.code == "UNKNOWN_TOPIC_OR_PART":
                    self._fail(pieces, exc)
                    return
                last, code, retry = exc, None, True
            else:
                code = _code(int(answer.error_code.value))
                if code in ACKNOWLEDGED:
                    part.sequence = (part.sequence + len(records)) % (MAX_SEQUENCE + 1)
                    at, append_time = int(answer.base_offset), _epoch_ms(answer.log_append_time)
                    for piece in pieces:
                        piece.send.settle(Segment(piece.start, len(piece.records), at, append_time))
                        at += len(piece.records)
                    return
                last = AdminError.from_wire(int(answer.error_code.value), answer.error_message)
                retry = code is not None and (code in RETRIABLE or code.retriable)
            if code in PRODUCER_STATE:
                self.retries += 1
                self._retire_producer_id(generation)
                batch = b""  # encoded again under the new id
            elif retry:
                self.retries += 1
                self._topics.pop(topic, None)  # leaders are read again before the next attempt
            elif code in SPLITTABLE and len(records) > 1:
                self._split(part, pieces)
                return
            else:
                self._fail(pieces, last)
                return
            await asyncio.sleep(RETRY_BACKOFF_SECONDS[min(attempt, len(RETRY_BACKOFF_SECONDS) - 1)])
            attempt += 1

    @property
    def busy(self) -> bool:
        """Whether any records wait or are in flight."""
        return any(part.sending for part in self._partitions.values())

    @staticmethod
    def _split(part: _Partition, pieces: list[_Piece]) -> None:
        """The pieces' records back at the front of the queue, one batch each, in order."""
        for piece in reversed(pieces):
            for index in range(len(piece.records) - 1, -1, -1):
                part.waiting.appendleft(_Piece(piece.send, piece.start + index, [piece.records[index]], alone=True))

    @staticmethod
    def _fail(pieces: list[_Piece], error: AdminError) -> None:
        for piece in pieces:
            piece.send.settle(Segment(piece.start, len(piece.records), -1, -1, error))

    async def _produce(self, topic: str, partition: int, batch: bytes, deadline: float) -> Any:
        """The partition's answer to one Produce of ``batch`` (AdminError: no answer, or no such partition)."""
        known = await self._topic(topic)
        if partition >= len(known.leaders):
            raise AdminError("_UNKNOWN_PARTITION", f"{topic} has no partition {partition}")
        leader = known.leaders[partition]
        if leader < 0 or leader not in self._brokers:
            raise AdminError("LEADER_NOT_AVAILABLE", f"{topic}-{partition} has no leader", retriable=True)
        connection = await self._connection(leader)
        version = connection.version(PRODUCE, PRODUCE_VERSIONS)
        request_cls, topic_cls, partition_cls = _produce_classes(version)
        produce = request_cls(transactional_id=None, acks=-1,
                              timeout=datetime.timedelta(milliseconds=int(self._request_timeout * 1000)),
                              topic_data=(topic_cls(name=topic, partition_data=(partition_cls(index=partition,
                                                                                              records=batch),)),))
        try:
            # The broker answers within the request's own timeout; the margin is for the trip.
            async with asyncio.timeout(max(0.001, min(deadline - time.monotonic() + 1,
                                                      self._request_timeout + min(5.0, self._request_timeout)))):
                answer = await connection.call(produce, version)
        except TimeoutError as exc:
            connection.close()  # answers come in order: a late one would be taken for the next request's
            raise AdminError("_TIMED_OUT", f"{connection.where} did not answer in time", retriable=True) from exc
        return answer.responses[0].partition_responses[0]

    # ---------------------------------------------------------------- producer id

    async def _producer_id(self) -> tuple[int, int, int]:
        if self._producer is not None:
            return self._producer
        failed = self._producer_failure
        if failed is not None and time.monotonic() - failed[0] < 5.0:
            raise failed[1]  # a principal with no WRITE anywhere gets its refusal without a request each time
        if self._initialising is None:
            self._initialising = self._spawn(self._init_producer_id(), "init producer id")
        return await asyncio.shield(self._initialising)

    async def _init_producer_id(self) -> tuple[int, int, int]:
        deadline = time.monotonic() + self._request_timeout
        attempt = 0
        try:
            while True:
                try:
                    connection = await self._any_connection()
                    version = connection.version(INIT_PRODUCER_ID, INIT_PRODUCER_ID_VERSIONS)
                    fields: dict[str, Any] = {"transactional_id": None,
                                              "transaction_timeout": datetime.timedelta(milliseconds=60_000)}
                    if version >= 3:
                        fields.update(producer_id=-1, producer_epoch=-1)
                    async with asyncio.timeout(self._request_timeout):
                        answer = await connection.call(request(INIT_PRODUCER_ID, version, **fields), version)
                    if answer.error_code != WireError.none:
                        raise AdminError.from_wire(answer.error_code.value)
                    self._generation += 1
                    self._producer = (int(answer.producer_id), int(answer.producer_epoch), self._generation)
                    self._producer_failure = None
                    return self._producer
                except (AdminError, TimeoutError) as exc:
                    error = exc if isinstance(exc, AdminError) else AdminError("_TIMED_OUT", "no producer id in time",
                                                                               retriable=True)
                    if not error.retriable or time.monotonic() >= deadline:
                        self._producer_failure = (time.monotonic(), error)
                        raise error from None
                await asyncio.sleep(RETRY_BACKOFF_SECONDS[min(attempt, len(RETRY_BACKOFF_SECONDS) - 1)])
                attempt += 1
        finally:
            self._initialising = None

    def _retire_producer_id(self, generation: int) -> None:
        """The producer id of ``generation`` is not used for new batches any more (once per generation)."""
        if self._producer is not None and self._producer[2] == generation:
            self._producer = None

    # ---------------------------------------------------------------- metadata and connections

    async def _topic(self, topic: str) -> _Topic:
        known = self._topics.get(topic)
        if known is not None and known.fresh_until > time.monotonic():
            return known
        reading = self._reading.get(topic)
        if reading is None:  # one read for every caller, in a task of its own: a caller cancelled stops only itself
            reading = self._reading[topic] = self._spawn(self._read_topic(topic), f"metadata {topic}")
            reading.add_done_callback(lambda _: self._reading.pop(topic, None))
        return await asyncio.shield(reading)

    async def _read_topic(self, topic: str) -> _Topic:
        connection = await self._any_connection()
        version = connection.version(METADATA, METADATA_VERSIONS)
        fields: dict[str, Any] = {"topics": (_metadata_topic(version, topic),)}
        if version >= 4:
            fields["allow_auto_topic_creation"] = False
        if 8 <= version <= 10:
            fields["include_cluster_authorized_operations"] = False
        if version >= 8:
            fields["include_topic_authorized_operations"] = False
        try:
            async with asyncio.timeout(self._request_timeout):
                answer = await connection.call(request(METADATA, version, **fields), version)
        except TimeoutError as exc:
            connection.close()
            raise AdminError("_TIMED_OUT", f"{connection.where}: no metadata in time", retriable=True) from exc
        for broker in answer.brokers:
            self._brokers[int(broker.node_id)] = BrokerInfo(int(broker.node_id), broker.host, int(broker.port), None)
        described = answer.topics[0]
        if described.error_code != WireError.none:
            raise AdminError.from_wire(described.error_code.value)
        leaders = [-1] * len(described.partitions)
        for entry in described.partitions:
            if 0 <= int(entry.partition_index) < len(leaders):
                leaders[int(entry.partition_index)] = int(entry.leader_id)
        if not leaders:
            raise AdminError("UNKNOWN_TOPIC_OR_PART", f"topic {topic} has no partitions")
        known = _Topic(leaders, time.monotonic() + METADATA_SECONDS)
        self._topics[topic] = known
        return known

    async def _any_connection(self) -> _Connection:
        for node_id, connection in self._connections.items():
            if connection.usable:
                return await self._connection(node_id)
        candidates = list(self._brokers) or [b.node_id for b in self._bootstrap]
        random.shuffle(candidates)
        failure: AdminError | None = None
        for node_id in candidates:
            try:
                return await self._connection(node_id)
            except AdminError as exc:
                failure = exc
        assert failure is not None
        self._brokers.clear()  # none answered: start again from the bootstrap servers
        raise failure

    async def _connection(self, node_id: int) -> _Connection:
        connection = self._connections.get(node_id)
        if connection is not None:
            if connection.usable:
                return connection
            del self._connections[node_id]
            connection.retire()
        opening = self._connecting.get(node_id)
        if opening is None:  # one connection attempt for every caller, in a task of its own
            broker = self._brokers.get(node_id) or next((b for b in self._bootstrap if b.node_id == node_id), None)
            if broker is None:
                raise AdminError("BROKER_NOT_AVAILABLE", f"broker {node_id} is not known", retriable=True)
            opening = self._connecting[node_id] = self._spawn(self._open(node_id, broker), f"connect {node_id}")
            opening.add_done_callback(lambda _: self._connecting.pop(node_id, None))
        return await asyncio.shield(opening)

    async def _open(self, node_id: int, broker: BrokerInfo) -> _Connection:
        connection = await _Connection.open(self._settings, broker, self._request_timeout)
        if self.closed:
            connection.close()
            raise AdminError("_DESTROY", "the producer is closed")
        self._connections[node_id] = connection
        return connection

    def _spawn(self, coroutine: Coroutine[Any, Any, T], name: str) -> asyncio.Task[T]:
        """A task the producer owns (cancelled by ``close``); its exception counts as retrieved (callers await
        it through ``shield`` and may have gone)."""
        task = asyncio.get_running_loop().create_task(coroutine, name=name)
        self._tasks.add(task)
        task.add_done_callback(_forget(self._tasks))
        return task


def _forget(tasks: set[asyncio.Task[Any]]) -> Callable[[asyncio.Task[Any]], None]:
    def done(task: asyncio.Task[Any]) -> None:
        tasks.discard(task)
        if not task.cancelled():
            task.exception()  # retrieved: whoever awaited it through shield may have gone
    return done


def _size(records: list[Record]) -> int:
    return sum(len(r[1] or b"") + len(r[0] or b"") + 16 for r in records)


def _epoch_ms(moment: datetime.datetime | None) -> int:
    if moment is None:
        return -1
    return int(moment.timestamp() * 1000)


def _code(value: int) -> ErrorCode | None:
    try:
        return ErrorCode(value)
    except ValueError:
        return None


@functools.cache
def _produce_classes(version: int) -> tuple[Any, Any, Any]:
    request_cls: Any = load_request_schema(PRODUCE, version)
    topic_cls = nested(request_cls, "topic_data")
    return request_cls, topic_cls, nested(topic_cls, "partition_data")


def _metadata_topic(version: int, topic: str) -> Any:
    topic_cls = nested(load_request_schema(METADATA, version), "topics")
    if version >= 10:
        return topic_cls(topic_id=None, name=topic)
    return topic_cls(name=topic)
