"""Producing REST records on threads: queue each on the cluster's shared librdkafka producer, collect where
they landed.

These are the DRF views' paths (the ASGI fast paths produce as batches: ``kafkarest.batched``). A request's
records are tracked by an ``Outcomes`` (one slot per record, in request order): the producer's poll thread
fills slots as the cluster acknowledges records, and the request's thread reads them in order. One object per
request rather than a future per record, because at tens of thousands of records a second the futures were
most of the cost. For the same reason a slot holds librdkafka's delivered ``Message`` as it came (turned into a
:class:`Delivered` only when read).
"""

from __future__ import annotations

import functools
import threading
from typing import Any

from confluent_kafka import KafkaError, Message

from controlplane.kafkarest.errors import KAFKA_RETRIABLE, RestError
from controlplane.kafkarest.producer import ClusterProducer, Delivered, Outcome, rest_error_for
from controlplane.kafkarest.records import ProduceRecord, as_record, batch_success, delivery_report, parse_batch

DELIVERY_WAIT_SECONDS = 40.0  # longer than the producer's own delivery timeout, which reports first
PENDING: Any = object()
NOT_ACKNOWLEDGED = "The cluster did not acknowledge the record in time."


class Outcomes:
    """Outcomes of one request's records, by position. Owned by the request; slots are written by the producer's
    poll thread (each once) and read by the request's own thread or loop through the subclasses.

    A slot is PENDING, a delivered ``Message`` or a RestError; :meth:`outcome` reads it as a :data:`Outcome`.
    """

    def __init__(self) -> None:
        self.records: list[ProduceRecord | None] = []
        self.results: list[Any] = []
        # Slots queued (written by the request only) and acknowledged (by the poll thread only): one writer each,
        # so no lock; every slot has its outcome once acked == queued after the request added its last record.
        self.queued = 0
        self.acked = 0
        self._awaited = -1  # the slot the request waits on: only its delivery wakes the request

    def __len__(self) -> int:
        return len(self.results)

    def add(self, producer: ClusterProducer, topic: str, body: Any) -> None:
        """Parse and queue one record (a RestError, or a body that fails to parse, takes its slot as the error)."""
        record, error = as_record(body)
        self.records.append(record)
        if record is None:
            self.results.append(error)
            return
        index = len(self.results)
        self.results.append(PENDING)
        self.queued += 1
        try:
            producer.produce(topic, functools.partial(self._delivered, index), record.value, record.key,
                             record.partition, record.headers, record.timestamp_ms)
        except RestError as exc:
            self.results[index] = exc
            self.queued -= 1

    def all_in(self) -> bool:
        """Whether every slot has its outcome (meaningful once the request has added its last record)."""
        return self.acked >= self.queued

    def _delivered(self, index: int, error: KafkaError | None, message: Message) -> None:
        """librdkafka's delivery callback, on the poll thread."""
        self.results[index] = message if error is None else rest_error_for(error)
        self.acked += 1
        if index == self._awaited or self.acked == self.queued:
            self._arrived()

    def _arrived(self) -> None:
        """Called on the poll thread after the awaited slot (or the last one) was filled."""

    def outcome(self, index: int) -> Outcome:
        """Where record ``index`` landed, or why not (a record still pending when the wait ran out is 50003)."""
        result = self.results[index]
        if isinstance(result, Message):
            return Delivered(result.partition() or 0, result.offset() or 0, result.timestamp()[1])
        if result is PENDING:
            return RestError(KAFKA_RETRIABLE, NOT_ACKNOWLEDGED)
        assert isinstance(result, RestError)
        return result

    def report(self, index: int, cluster_id: str, topic: str) -> dict[str, Any]:
        result, record = self.results[index], self.records[index]
        if isinstance(result, Message) and record is not None:  # straight from the Message: no Delivered per record
            return delivery_report(cluster_id, topic, record, result.partition() or 0, result.offset() or 0,
                                   result.timestamp()[1])
        outcome = self.outcome(index)
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
        self._awaited = len(self.results)  # no single slot: woken by the last delivery
        with self._changed:
            self._changed.wait_for(self.all_in, timeout)


def batch_response(outcomes: Outcomes, ids: list[str], cluster_id: str, topic: str) -> dict[str, Any]:
    successes: list[dict[str, Any]] = []
    failures: list[dict[str, Any]] = []
    for index, entry_id in enumerate(ids):
        result, record = outcomes.results[index], outcomes.records[index]
        if isinstance(result, Message) and record is not None:  # built at once: one dict per entry, not three
            successes.append(batch_success(entry_id, cluster_id, topic, record, result.partition() or 0,
                                           result.offset() or 0, result.timestamp()[1]))
        else:
            failures.append({"id": entry_id, **outcomes.report(index, cluster_id, topic)})
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
