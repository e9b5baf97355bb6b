"""Producing REST records: submit each to the cluster's shared producer, then report where it landed.

Shared by the records view, ``records:batch`` and the streaming ASGI path; none of it blocks except
:func:`wait_report`, which the synchronous views use.
"""

from __future__ import annotations

import concurrent.futures
from typing import Any

from controlplane.kafkarest.errors import KAFKA_RETRIABLE, RestError
from controlplane.kafkarest.producer import ClusterProducer, Delivered
from controlplane.kafkarest.records import ProduceRecord, delivery_report, parse_batch, parse_produce_request

DELIVERY_WAIT_SECONDS = 40.0  # longer than the producer's own delivery timeout, which reports first

Pending = tuple[ProduceRecord, concurrent.futures.Future[Delivered]] | RestError


def submit(producer: ClusterProducer, topic: str, body: Any) -> Pending:
    """Parse one request object and queue it; a bad record is its RestError, never an exception."""
    if isinstance(body, RestError):
        return body
    try:
        record = parse_produce_request(body) if not isinstance(body, ProduceRecord) else body
        return record, producer.send(topic, value=record.value, key=record.key, partition=record.partition,
                                     headers=record.headers, timestamp_ms=record.timestamp_ms)
    except RestError as exc:
        return exc


def report(cluster_id: str, topic: str, record: ProduceRecord, outcome: Delivered | BaseException) -> dict[str, Any]:
    if isinstance(outcome, Delivered):
        return delivery_report(cluster_id, topic, record, outcome.partition, outcome.offset, outcome.timestamp_ms)
    error = outcome if isinstance(outcome, RestError) else RestError(KAFKA_RETRIABLE, f"Produce failed: {outcome}")
    return error.body()


def wait_report(cluster_id: str, topic: str, pending: Pending) -> dict[str, Any]:
    if isinstance(pending, RestError):
        return pending.body()
    record, future = pending
    try:
        outcome: Delivered | BaseException = future.result(DELIVERY_WAIT_SECONDS)
    except concurrent.futures.TimeoutError:
        outcome = RestError(KAFKA_RETRIABLE, "The cluster did not acknowledge the record in time.")
    except Exception as exc:  # the delivery callback's RestError
        outcome = exc
    return report(cluster_id, topic, record, outcome)


def produce_batch(producer: ClusterProducer, cluster_id: str, topic: str, body: Any) -> dict[str, Any]:
    """A ``records:batch`` request: every entry is produced, then reported as a success or a failure."""
    entries = parse_batch(body)
    pending = [(entry_id, submit(producer, topic, record)) for entry_id, record in entries]
    successes: list[dict[str, Any]] = []
    failures: list[dict[str, Any]] = []
    for entry_id, item in pending:
        result = wait_report(cluster_id, topic, item)
        if result["error_code"] == 200:
            successes.append({"id": entry_id, **{k: v for k, v in result.items() if k != "error_code"}})
        else:
            failures.append({"id": entry_id, **result})
    return {"successes": successes, "failures": failures}
