"""One Spark (local[2]) and one real broker for every Spark test of the session, both stopped by pid at the end.

The Spark modules are marked ``xdist_group("spark")`` so one xdist worker runs them all and the JVM
starts once. Each test makes its own topics (``new_topic``), so tests share the broker but no data.
"""

from __future__ import annotations

import signal
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pytest

from tests.support.broker import BrokerProcess

TS0 = 1_700_000_000_000  # record timestamps (CreateTime) the tests set themselves


@dataclass(frozen=True)
class Rec:
    """A produced record as the source should return it (``timestamp`` in ms)."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp: int
    headers: tuple[tuple[str, bytes | None], ...] = ()

    def row(self, *, headers: bool = False) -> tuple[Any, ...]:
        base = (self.key, self.value, self.topic, self.partition, self.offset, self.timestamp, 0)
        return (*base, list(self.headers) or None) if headers else base


@pytest.fixture(scope="session")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    broker = BrokerProcess(tmp_path_factory.mktemp("spark-broker") / "data", f"spark-{uuid.uuid4().hex[:8]}")
    broker.start()
    try:
        yield broker.bootstrap
    finally:
        broker.stop(signal.SIGKILL)


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    from pyspark import SparkContext

    from dataplane.client.spark.session import spark_session, stop_spark

    session = spark_session(master="local[2]", conf={"spark.sql.shuffle.partitions": "2"})
    jvm = SparkContext._gateway.proc  # type: ignore[union-attr]
    try:
        yield session
    finally:
        stop_spark()
        assert jvm.poll() is not None, "the JVM outlived stop_spark()"


@pytest.fixture
def new_topic(kafka: str) -> Any:
    """``new_topic(partitions, **config)``: a fresh topic's name."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": kafka})

    def create(partitions: int = 1, **config: str) -> str:
        name = f"t-{uuid.uuid4().hex[:10]}"
        admin.create_topics([NewTopic(name, partitions, 1, config=config)])[name].result(30)
        return name
    return create


def produce(bootstrap: str, topic: str, records: Sequence[tuple[int, bytes | None, bytes | None]], *,
            headers: Sequence[Sequence[tuple[str, bytes | None]]] | None = None, ts0: int = TS0,
            **config: Any) -> list[Rec]:
    """Produce ``(partition, key, value)`` records (the i-th at ``ts0 + i`` s); what was written, in order."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **config})
    written: list[Rec] = []

    def delivered(i: int) -> Any:
        def report(error: Any, message: Any) -> None:
            assert error is None, error
            _, key, value = records[i]
            written.append(Rec(topic, message.partition(), message.offset(), key, value, ts0 + i * 1000,
                               tuple(headers[i]) if headers else ()))
        return report

    for i, (partition, key, value) in enumerate(records):
        producer.produce(topic, value=value, key=key, partition=partition, timestamp=ts0 + i * 1000,
                         headers=list(headers[i]) if headers and headers[i] else None, on_delivery=delivered(i))
    assert producer.flush(30) == 0
    return sorted(written, key=lambda r: (r.partition, r.offset))


ROW = ("key", "value", "topic", "partition", "offset", "unix_millis(timestamp) AS ts", "timestampType")


def rows(df: Any, *, headers: bool = False) -> list[tuple[Any, ...]]:
    """A source DataFrame's rows as comparable tuples (binary as bytes, timestamps as ms), by partition/offset."""
    picked = df.selectExpr(*ROW, *(["headers"] if headers else []))
    out = []
    for r in picked.collect():
        key = bytes(r["key"]) if r["key"] is not None else None
        value = bytes(r["value"]) if r["value"] is not None else None
        base = (key, value, r["topic"], r["partition"], r["offset"], r["ts"], r["timestampType"])
        if headers:
            found = [(h["key"], bytes(h["value"]) if h["value"] is not None else None) for h in r["headers"]] \
                if r["headers"] is not None else None
            base = (*base, found)
        out.append(base)
    return sorted(out, key=lambda t: (t[2], t[3], t[4]))
