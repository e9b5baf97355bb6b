"""Producing REST records: queue each on the cluster's shared producer, collect where they landed.

A request's records are tracked by an ``Outcomes`` (one slot per record, in request order): the producer's
poll thread fills slots as the cluster acknowledges records, and the request -- a thread in the DRF views,
the event loop on the ASGI paths -- reads them in order. One object per request rather than a future per
record, because at tens of thousands of records a second the futures were most of the cost.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from controlplane.kafkarest.errors import KAFKA_RETRIABLE, RestError
from controlplane.kafkarest.producer import ClusterProducer, Delivered, Outcome
from controlplane.kafkarest.records import ProduceRecord, delivery_report, parse_batch, parse_produce_request

DELIVERY_WAIT_SECONDS = 40.0  # longer than the producer's own delivery timeout, which reports first
PENDING: Any = object()


class Outcomes:
    """Outcomes of one request's records, by position. Owned by the request; slots are written by the producer's
    poll thread (each once) and read by the request's own thread or loop through the subclasses."""

    def __init__(self) -> None:
        self.records: list[ProduceRecord | None] = []
        self.results: list[Any] = []

    def __len__(self) -> int:
        return len(self.results)

    def add(self, producer: ClusterProducer, topic: str, body: Any) -> None:
        """Parse and queue one record (a RestError, or a body that fails to parse, takes its slot as the error)."""
        index = len(self.results)
        try:
            record = body if isinstance(body, ProduceRecord) else (
                None if isinstance(body, RestError) else parse_produce_request(body))
        except RestError as exc:
            record, body = None, exc
        self.records.append(record)
        if record is None:
            self.results.append(body)
            return
        self.results.append(PENDING)

        def done(outcome: Outcome) -> None:
            self.results[index] = outcome
            self._arrived()

        try:
            producer.send(topic, done, value=record.value, key=record.key, partition=record.partition,
                          headers=record.headers, timestamp_ms=record.timestamp_ms)
        except RestError as exc:
            self.results[index] = exc

    def _arrived(self) -> None:
        """Called on the poll thread after a slot was filled."""

    def report(self, index: int, cluster_id: str, topic: str) -> dict[str, Any]:
        outcome = self.results[index]
        record = self.records[index]
        if isinstance(outcome, Delivered) and record is not None:
            return delivery_report(cluster_id, topic, record, outcome.partition, outcome.offset,
                                   outcome.timestamp_ms)
        if outcome is PENDING:
            outcome = RestError(KAFKA_RETRIABLE, "The cluster did not acknowledge the record in time.")
        assert isinstance(outcome, RestError)
        return outcome.body()


class BlockingOutcomes(Outcomes):
    """For a request served on a thread: :meth:`wait` blocks until every record has its outcome."""

    def __init__(self) -> None:
        super().__init__()
        self._changed = threading.Condition()

    def _arrived(self) -> None:
        with self._changed:
            self._changed.notify_all()

    def wait(self, timeout: float = DELIVERY_WAIT_SECONDS) -> None:
        with self._changed:
            self._changed.wait_for(lambda: PENDING not in self.results, timeout)


class AsyncOutcomes(Outcomes):
    """For a request served on an event loop: :meth:`ready` awaits one slot. Wake-ups from the poll thread are
    coalesced, so a burst of acknowledgements costs one loop wake-up, not one per record."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__()
        self._loop = loop
        self._event = asyncio.Event()
        self._lock = threading.Lock()
        self._wake_scheduled = False

    def _arrived(self) -> None:
        with self._lock:
            if self._wake_scheduled:
                return
            self._wake_scheduled = True
        self._loop.call_soon_threadsafe(self._wake)

    def _wake(self) -> None:
        with self._lock:
            self._wake_scheduled = False
        self._event.set()

    async def ready(self, index: int, timeout: float = DELIVERY_WAIT_SECONDS) -> None:
        deadline = self._loop.time() + timeout
        while self.results[index] is PENDING:
            self._event.clear()
            if self.results[index] is not PENDING:
                return
            left = deadline - self._loop.time()
            if left <= 0:
                return
            try:
                await asyncio.wait_for(self._event.wait(), left)
            except TimeoutError:
                return


def batch_response(outcomes: Outcomes, ids: list[str], cluster_id: str, topic: str) -> dict[str, Any]:
    successes: list[dict[str, Any]] = []
    failures: list[dict[str, Any]] = []
    for index, entry_id in enumerate(ids):
        result = outcomes.report(index, cluster_id, topic)
        if result["error_code"] == 200:
            result.pop("error_code")
            successes.append({"id": entry_id, **result})
        else:
            failures.append({"id": entry_id, **result})
    return {"successes": successes, "failures": failures}


def produce_batch(producer: ClusterProducer, cluster_id: str, topic: str, body: Any) -> dict[str, Any]:
    """A ``records:batch`` request on a thread: every entry produced, then reported as a success or a failure."""
    entries = parse_batch(body)
    outcomes = BlockingOutcomes()
    for _, record in entries:
        outcomes.add(producer, topic, record)
    outcomes.wait()
    return batch_response(outcomes, [entry_id for entry_id, _ in entries], cluster_id, topic)


def produce_all(producer: ClusterProducer, cluster_id: str, topic: str, bodies: list[Any]) -> list[dict[str, Any]]:
    """Records of one request on a thread: their reports, in order."""
    outcomes = BlockingOutcomes()
    for body in bodies:
        outcomes.add(producer, topic, body)
    outcomes.wait()
    return [outcomes.report(i, cluster_id, topic) for i in range(len(outcomes))]
