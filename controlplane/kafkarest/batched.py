"""REST produce on the event loop: a request's records partitioned, encoded and sent as Kafka batches.

The ASGI fast paths (``streaming``: v3 ``records`` and ``records:batch``, v2 produce) hand a request's records
to the cluster's :class:`~dataplane.client.producer.AsyncProducer`, one ``send`` per partition, and read
their offsets back from each batch's base offset: no librdkafka call or delivery callback per record, which was
most of a web process's CPU in ``records:batch`` (docs/decisions/0014-rest-proxy.md, "REST produce as batches"). The DRF
views, which run on threads, keep the librdkafka producer of ``kafkarest.producer``; both write with
``acks=all`` and idempotence, act as the caller's principal, and partition keys with the Java client's murmur2.

Keyless records of one request go to one partition chosen at random (as the Java client's sticky partitioner
keeps a batch together); a key goes where murmur2 puts it; a ``partition_id`` is checked against the topic.

Ownership: :data:`pool` and its producers belong to the event loop that serves the ASGI app (one per
process); everything here runs on that loop.
"""

from __future__ import annotations

import asyncio
import random
import time
from typing import Any

from confluent_kafka import KafkaError

from controlplane.kafkarest.access import ClusterAccess
from controlplane.kafkarest.errors import BROKER_NOT_AVAILABLE, KAFKA_RETRIABLE, PARTITION_NOT_FOUND, RestError
from controlplane.kafkarest.produce import NOT_ACKNOWLEDGED
from controlplane.kafkarest.producer import Delivered, Outcome, rest_error_for, topic_denied
from controlplane.kafkarest.records import ProduceRecord, as_record, batch_success, delivery_report
from dataplane.client.producer import AsyncProducer, Record, Segment
from dataplane.client.wire import AdminError
from dataplane.protocol._encode import partition_for_key

IDLE_SECONDS = 600.0
DELIVERY_WAIT_SECONDS = 40.0  # longer than the producer's own delivery timeout (30 s), which reports first
PENDING: Any = object()


def rest_error(error: AdminError, topic: str) -> RestError:
    """The producer's error as the REST Proxy reports it (through librdkafka's names, as the thread paths)."""
    if error.code == "CLUSTER_AUTHORIZATION_FAILED":  # KIP-679: no WRITE on any topic, so no producer id
        return topic_denied(topic)
    code = getattr(KafkaError, error.code, None)
    if not isinstance(code, int):
        code = KafkaError._FAIL
    return rest_error_for(KafkaError(code, error.message, retriable=error.retriable), topic)


class Produced:
    """Outcomes of one group of records (a request, or a piece of a streamed one), by position.

    Owned by the request on the event loop. A slot is PENDING, a ``(partition, offset, timestamp_ms)`` tuple or
    a RestError; :meth:`wait` fills every slot once the cluster has answered for all of them.
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


async def produce(producer: AsyncProducer, topic: str, values: list[Any]) -> Produced:
    """Parse ``values`` (request bodies, ProduceRecords or RestErrors) and send them; ``wait()`` on the result
    for their outcomes. A topic that does not exist or may not be written fails every record alike."""
    produced = Produced(topic)
    records, results = produced.records, produced.results
    for value in values:
        record, error = as_record(value)
        records.append(record)
        results.append(PENDING if record is not None else error)
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


class ProducerPool:
    """One AsyncProducer per (cluster, how it is reached, principal), made on first use; one that has sent
    nothing for ``IDLE_SECONDS`` and has nothing in flight is closed by whichever ``get`` notices (a long
    streaming request keeps its producer alive by sending). Owned by the serving event loop."""

    def __init__(self) -> None:
        self._producers: dict[tuple[Any, ...], AsyncProducer] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._swept = time.monotonic()

    def get(self, access: ClusterAccess) -> AsyncProducer:
        if not access.bootstrap:
            raise RestError(BROKER_NOT_AVAILABLE, "The cluster has no running brokers yet.")
        loop = asyncio.get_running_loop()
        if self._loop is not loop:  # a new loop (a restarted server's): the old one's connections are not usable
            self._producers, self._loop = {}, loop
        key = access.client_key
        producer = self._producers.get(key)
        if producer is None:
            producer = self._producers[key] = AsyncProducer(access.client_config(), _servers(access.bootstrap))
        now = producer.last_used = time.monotonic()  # taken for a request: not idle
        if now - self._swept > IDLE_SECONDS / 10:
            self._swept = now
            for stale in [k for k, p in self._producers.items()
                          if p is not producer and now - p.last_used > IDLE_SECONDS and not p.busy]:
                self._producers.pop(stale).close()
        return producer


def _servers(bootstrap: str) -> list[tuple[str, int]]:
    servers = []
    for item in bootstrap.split(","):
        host, _, port = item.strip().rpartition(":")
        servers.append((host.strip("[]"), int(port)))
    return servers


pool = ProducerPool()
