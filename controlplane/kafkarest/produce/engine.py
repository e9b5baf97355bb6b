"""REST produce's one engine: a request's records partitioned, encoded and sent as Kafka batches on an event loop.

Every REST produce path comes here: the ASGI fast paths (``produce.streaming``: v3 ``records`` and
``records:batch``, v2 produce, on the server's event loop) and the DRF views (a console session's produce, any
request the fast paths hand on to Django; through ``produce.services`` onto ``produce.loop``'s event loop). A
request's records go to the cluster's :class:`~dataplane.client.producer.AsyncProducer`, one ``send`` per
partition, and their offsets are read back from each batch's base offset: no call or callback per record
(docs/decisions/0014-rest-proxy.md, "REST produce as batches"; 0023 for why there is only this one engine).
Records are written with ``acks=all`` and idempotence, as the caller's principal (the cluster's ACLs decide),
and keys are partitioned with the Java client's murmur2.

Keyless records of one request go to one partition chosen at random (as the Java client's sticky partitioner
keeps a batch together); a key goes where murmur2 puts it; a ``partition_id`` is checked against the topic.

Ownership: a :class:`ProducerPool` and its producers belong to one event loop (:func:`pool` gives the running
loop's); everything here runs on that loop. The pool closes its producers when the loop shuts down (a keeper
task, cancelled with the loop's other tasks), when they are idle, and when the credentials that used one are
revoked (``kafkarest.revocation``).
"""

from __future__ import annotations

import asyncio
import os
import random
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import KafkaError

from controlplane.kafkarest.access import ClusterAccess
from controlplane.kafkarest.errors import (
    BROKER_NOT_AVAILABLE,
    INVALID_PAYLOAD,
    KAFKA_AUTHORIZATION,
    KAFKA_RETRIABLE,
    PARTITION_NOT_FOUND,
    RestError,
    rest_error_for,
    topic_denied,
)
from controlplane.kafkarest.records import ProduceRecord, SchemaRecord, as_record, batch_success, delivery_report
from controlplane.kafkarest.revocation import watcher
from controlplane.tenancy.revocation import Credential
from dataplane.client.producer import AsyncProducer, Record, Segment
from dataplane.client.wire import AdminError
from dataplane.protocol._encode import partition_for_key

IDLE_SECONDS = 600.0
MAX_BODY_BYTES = 64 * 1024 * 1024  # a non-streaming request's body (a chunked stream has no total limit)
MAX_RECORD_BYTES = 8 * 1024 * 1024  # one record of a v3 body
DELIVERY_SECONDS = 30.0  # the producer gives a batch up after this (then it reports 50003)
DELIVERY_WAIT_SECONDS = 40.0  # longer than the producer's own delivery timeout, which reports first
METADATA_WAIT_SECONDS = 5.0  # for the topic's partitions, before a request is answered "not available"
RETIRE_POLL_SECONDS = 0.5  # how often a revoked credential's producer, still busy, is looked at again
PENDING: Any = object()
UNREACHABLE = frozenset({"_TRANSPORT", "_TIMED_OUT", "BROKER_NOT_AVAILABLE"})  # reading metadata: 50302
NOT_ACKNOWLEDGED = "The cluster did not acknowledge the record in time."


@dataclass(frozen=True, slots=True)
class Delivered:
    partition: int
    offset: int
    timestamp_ms: int


Outcome = Delivered | RestError
# Records with a schema'd key or value, encoded with the cluster's registry (kafkarest.schemas, on a thread):
# each a ProduceRecord or the RestError that takes its place, in order.
Resolver = Callable[[list[SchemaRecord]], Awaitable[list[ProduceRecord | RestError]]]


async def _unresolved(records: list[SchemaRecord]) -> list[ProduceRecord | RestError]:
    return [RestError(INVALID_PAYLOAD, "Payload error. Schemas are not served on this path.") for _ in records]


def rest_error(error: AdminError, topic: str) -> RestError:
    """The producer's error as the REST Proxy reports it (through librdkafka's names, as the consumers' are)."""
    if error.code == "CLUSTER_AUTHORIZATION_FAILED":  # KIP-679: no WRITE on any topic, so no producer id
        return topic_denied(topic)
    code = getattr(KafkaError, error.code, None)
    if not isinstance(code, int):
        code = KafkaError._FAIL
    return rest_error_for(KafkaError(code, error.message, retriable=error.retriable), topic)


class Produced:
    """Outcomes of one group of records (a request, or a piece of a streamed one), by position.

    Owned by the request on the pool's event loop. A slot is PENDING, a ``(partition, offset, timestamp_ms)``
    tuple or a RestError; :meth:`wait` fills every slot once the cluster has answered for all of them.
    """

    def __init__(self, topic: str) -> None:
        self.topic = topic
        self.records: list[ProduceRecord | None] = []
        self.results: list[Any] = []
        self._sends: list[tuple[int, list[int], list[int], asyncio.Future[list[Segment]]]] = []
        self._done = False

    def __len__(self) -> int:
        return len(self.results)

    async def wait(self, timeout: float = DELIVERY_WAIT_SECONDS) -> None:
        """Every slot's outcome; a send not settled in ``timeout`` (never, unless the producer is broken) leaves
        its slots PENDING, reported as 50003."""
        if self._done:
            return
        if self._sends:
            await asyncio.wait([future for *_, future in self._sends], timeout=timeout)  # cancels nothing
        for partition, indexes, stamps, future in self._sends:
            if not future.done():
                continue
            segments = future.result()
            for segment in segments:
                if segment.error is not None:
                    failure = rest_error(segment.error, self.topic)
                    for at in range(segment.start, segment.start + segment.count):
                        self.results[indexes[at]] = failure
                    continue
                offset, append_time = segment.base_offset, segment.log_append_time
                for at in range(segment.start, segment.start + segment.count):
                    self.results[indexes[at]] = (partition, offset, append_time if append_time >= 0 else stamps[at])
                    offset += 1
        self._sends.clear()
        self._done = True

    def outcome(self, index: int) -> Outcome:
        result = self.results[index]
        if isinstance(result, tuple):
            return Delivered(*result)
        if result is PENDING:  # only after wait() ran out of time
            return RestError(KAFKA_RETRIABLE, NOT_ACKNOWLEDGED)
        return result  # type: ignore[no-any-return]

    def report(self, index: int, cluster_id: str) -> dict[str, Any]:
        result, record = self.results[index], self.records[index]
        if isinstance(result, tuple) and record is not None:
            return delivery_report(cluster_id, self.topic, record, *result)
        outcome = self.outcome(index)
        assert isinstance(outcome, RestError)
        return outcome.body()

    def denied(self) -> RestError | None:
        """The first record the cluster's ACLs refused (40301), for the request's audit event; None if none was."""
        return next((r for r in self.results if isinstance(r, RestError) and r.error_code == KAFKA_AUTHORIZATION),
                    None)


async def produce(producer: AsyncProducer, topic: str, values: list[Any], resolve: Resolver = _unresolved) -> Produced:
    """Parse ``values`` (request bodies, ProduceRecords, SchemaRecords or RestErrors) and send them; ``wait()`` on
    the result for their outcomes. Records with a schema are encoded by ``resolve`` first (one call for all of
    them). A topic that does not exist or may not be written fails every record alike."""
    produced = Produced(topic)
    records, results = produced.records, produced.results
    schema_records: list[int] = []
    for value in values:
        record, error = as_record(value)
        records.append(record)
        if record is not None:
            results.append(PENDING)
        else:
            results.append(error)
            if type(error) is SchemaRecord:  # only records that are not plain pay this check
                schema_records.append(len(results) - 1)
    if schema_records:
        encoded = await resolve([results[index] for index in schema_records])
        for index, outcome in zip(schema_records, encoded, strict=True):
            if isinstance(outcome, RestError):
                results[index] = outcome
            else:
                records[index], results[index] = outcome, PENDING
    if all(r is None for r in records):
        return produced
    try:
        count = await producer.partition_count(topic)
        if any(r is not None and r.partition is not None and r.partition >= count for r in records):
            count = await producer.partition_count(topic, fresh=True)  # it may have grown since it was read
    except AdminError as exc:
        failure = rest_error(exc, topic)
        for index, record in enumerate(records):
            if record is not None:
                results[index] = failure
        return produced
    now = int(time.time() * 1000)
    sticky = random.randrange(count)
    groups: dict[int, tuple[list[int], list[int], list[Record]]] = {}
    for index, record in enumerate(records):
        if record is None:
            continue
        partition, key = record.partition, record.key
        if partition is None:
            partition = sticky if key is None else partition_for_key(key, count)
        elif partition >= count:
            results[index] = RestError(PARTITION_NOT_FOUND, "Partition not found.")
            continue
        group = groups.get(partition)
        if group is None:
            group = groups[partition] = ([], [], [])
        stamp = now if record.timestamp_ms is None else record.timestamp_ms
        group[0].append(index)
        group[1].append(stamp)
        group[2].append((key, record.value, record.headers, stamp))
    for partition, (indexes, stamps, batch) in groups.items():
        produced._sends.append((partition, indexes, stamps, producer.send(topic, partition, batch)))
    return produced


def batch_response(produced: Produced, ids: list[str], cluster_id: str) -> dict[str, Any]:
    """A ``records:batch`` answer: each entry a success or a failure, by id."""
    successes: list[dict[str, Any]] = []
    failures: list[dict[str, Any]] = []
    topic = produced.topic
    for index, entry_id in enumerate(ids):
        result, record = produced.results[index], produced.records[index]
        if isinstance(result, tuple) and record is not None:
            successes.append(batch_success(entry_id, cluster_id, topic, record, *result))
        else:
            failures.append({"id": entry_id, **produced.report(index, cluster_id)})
    return {"successes": successes, "failures": failures}


async def open_topic(access: ClusterAccess, topic: str) -> tuple[AsyncProducer, int]:
    """The running loop's producer for ``access`` and the topic's partition count: 40401 when the topic does not
    exist, 40301 when the principal may not see it, 50302 when the cluster does not answer in
    ``METADATA_WAIT_SECONDS`` (the caller audits a refusal)."""
    producer = pool().get(access)
    try:
        async with asyncio.timeout(METADATA_WAIT_SECONDS):
            return producer, await producer.partition_count(topic)
    except AdminError as exc:
        if exc.code in UNREACHABLE:  # no broker took the connection or answered: as a metadata read that timed out
            raise RestError(BROKER_NOT_AVAILABLE, f"The cluster did not answer: {exc.message}") from exc
        raise rest_error(exc, topic) from exc
    except TimeoutError as exc:
        raise RestError(BROKER_NOT_AVAILABLE, f"The cluster did not answer in {METADATA_WAIT_SECONDS:g} s.") from exc


@dataclass(slots=True)
class _Pooled:
    producer: AsyncProducer
    holds: dict[Credential, Any] = field(default_factory=dict)  # revocation holds, by the credentials that used it


class ProducerPool:
    """One AsyncProducer per (cluster, how it is reached, principal), made on first use. Owned by one event loop
    (see the module docstring); ``get`` and everything else run on it, except ``_revoked``'s hand-over.

    A producer is closed: when it has sent nothing for ``IDLE_SECONDS`` and has nothing in flight (by whichever
    ``get`` notices; a long streaming request keeps its producer alive by sending); when any credential that used
    it is revoked (taken out of the pool at once, closed once what it has in flight is answered: its principal's
    connections do not outlive the key); and when the loop shuts down.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._producers: dict[tuple[Any, ...], _Pooled] = {}
        self._swept = time.monotonic()
        self._keeper = loop.create_task(self._keep(), name="rest produce pool")

    def get(self, access: ClusterAccess) -> AsyncProducer:
        if not access.bootstrap:
            raise RestError(BROKER_NOT_AVAILABLE, "The cluster has no running brokers yet.")
        key = access.client_key
        pooled = self._producers.get(key)
        if pooled is None:
            producer = AsyncProducer(access.client_config(), _servers(access.bootstrap),
                                     delivery_timeout=DELIVERY_SECONDS)
            pooled = self._producers[key] = _Pooled(producer)
        credential = access.credential
        if credential is not None and credential not in pooled.holds:
            self._hold(key, pooled, credential)
        producer = pooled.producer
        now = producer.last_used = time.monotonic()  # taken for a request: not idle
        if now - self._swept > IDLE_SECONDS / 10:
            self._swept = now
            for stale in [k for k, p in self._producers.items()
                          if p is not pooled and now - p.producer.last_used > IDLE_SECONDS and not p.producer.busy]:
                self._retire(stale)
        return producer

    def _hold(self, key: tuple[Any, ...], pooled: _Pooled, credential: Credential) -> None:
        def revoked(reason: str) -> None:  # on the watcher's thread (or here): hand it to the pool's loop
            self._loop.call_soon_threadsafe(self._revoked, key, pooled)

        pooled.holds[credential] = None  # taken before the hold: ``revoked`` may run from within ``hold``
        pooled.holds[credential] = watcher.hold(credential, revoked)

    def _revoked(self, key: tuple[Any, ...], pooled: _Pooled) -> None:
        if self._producers.get(key) is pooled:
            self._retire(key)

    def _retire(self, key: tuple[Any, ...]) -> None:
        """Out of the pool now; closed once nothing it sent is waiting for an answer."""
        pooled = self._producers.pop(key)
        for hold in pooled.holds.values():
            if hold is not None:
                hold.release()
        self._close_when_idle(pooled.producer, time.monotonic() + DELIVERY_WAIT_SECONDS)

    def _close_when_idle(self, producer: AsyncProducer, deadline: float) -> None:
        if not producer.busy or time.monotonic() >= deadline:
            producer.close()
        else:
            self._loop.call_later(RETIRE_POLL_SECONDS, self._close_when_idle, producer, deadline)

    def __len__(self) -> int:
        return len(self._producers)

    def close(self) -> None:
        """Close every producer now (what is in flight fails); the pool may be used again after."""
        producers, self._producers = list(self._producers.values()), {}
        for pooled in producers:
            for hold in pooled.holds.values():
                if hold is not None:
                    hold.release()
            pooled.producer.close()

    async def _keep(self) -> None:
        """Waits for the loop's end: ``asyncio.run`` (uvicorn, ``produce.loop``) cancels the tasks left, and the
        producers' connections are closed here rather than dropped with the loop."""
        try:
            await asyncio.Event().wait()
        finally:
            self.close()
            with _pools_lock:
                if _pools.get(self._loop) is self:
                    del _pools[self._loop]


_pools: dict[asyncio.AbstractEventLoop, ProducerPool] = {}  # by event loop; a loop's entry goes with its keeper
_pools_lock = threading.Lock()


def pool() -> ProducerPool:
    """The running event loop's pool (made on first use)."""
    loop = asyncio.get_running_loop()
    found = _pools.get(loop)  # a dict read is atomic: no lock on the hot path
    if found is None:
        with _pools_lock:
            found = _pools.get(loop)
            if found is None:
                found = _pools[loop] = ProducerPool(loop)
    return found


def _forget_pools_in_child() -> None:
    """A forked child (a Celery or server worker) has none of its parent's loops running: their pools' sockets
    are the parent's, so they are forgotten here, never closed or used."""
    global _pools_lock
    _pools.clear()
    _pools_lock = threading.Lock()


os.register_at_fork(after_in_child=_forget_pools_in_child)


def _servers(bootstrap: str) -> list[tuple[str, int]]:
    servers = []
    for item in bootstrap.split(","):
        host, _, port = item.strip().rpartition(":")
        servers.append((host.strip("[]"), int(port)))
    return servers
