"""Reading from librdkafka without waiting for a full batch.

``Consumer.consume(n, timeout)`` returns when it has ``n`` messages *or* the timeout passed, so a live
stream slower than ``n`` per timeout waits the whole timeout for every batch (half a second of latency
at 1,000 records/s with n=500). :func:`take` waits only for the first message, then takes whatever else
is already fetched: records go out as soon as they arrive, in batches as large as the stream allows.
"""

from __future__ import annotations

from confluent_kafka import Consumer, Message


def take(consumer: Consumer, limit: int, timeout: float) -> list[Message]:
    """Up to ``limit`` messages (errors and partition ends included): blocks at most ``timeout`` for the first."""
    first = consumer.poll(timeout)
    if first is None:
        return []
    return [first, *consumer.consume(limit - 1, 0)] if limit > 1 else [first]
