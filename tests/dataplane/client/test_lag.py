"""Consumer lag: the pure computation, and the read-out against a real broker with a live group."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from dataplane.client.lag import LagError, Owner, PartitionLag, compute_lag, group_lag
from tests.support.broker import BrokerProcess, logged_broker


def test_lag_is_end_minus_committed_and_unknown_without_a_commit() -> None:
    owner = Owner("m-1", "c", "/127.0.0.1")
    rows = compute_lag({("t", 0): (4, "meta"), ("t", 2): (9, "")}, {("t", 0): 10, ("t", 1): 5, ("t", 2): 3},
                       {("t", 1): owner})
    assert rows == (PartitionLag("t", 0, 4, 10, 6, "meta"), PartitionLag("t", 1, None, 5, None, "", owner),
                    PartitionLag("t", 2, 9, 3, 0, ""))  # a commit past the end (truncated log) is no lag


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    process = logged_broker(tmp_path, extra_args=["--group-initial-rebalance-delay-ms", "0"])
    process.start()
    try:
        yield process
    finally:
        process.stop()


def test_group_lag_reads_commits_ends_and_owners_from_the_cluster(broker: BrokerProcess) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("lagged", 3, 1)])["lagged"].result(30)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for partition, count in ((0, 10), (1, 20), (2, 0)):
        for i in range(count):
            producer.produce("lagged", value=b"%d" % i, partition=partition)
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "readers", "client.id": "reader-1",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    consumer.subscribe(["lagged"])
    deadline = time.monotonic() + 30
    while len(consumer.assignment()) < 3:
        consumer.poll(0.2)
        assert time.monotonic() < deadline, "no assignment"
    consumer.commit(offsets=[TopicPartition("lagged", 0, 4), TopicPartition("lagged", 1, 20, metadata="done")],
                    asynchronous=False)
    live = group_lag(broker.bootstrap, "readers")
    assert live.state == "Stable" and live.total_lag == 6
    assert [(p.partition, p.committed_offset, p.log_end_offset, p.lag, p.metadata) for p in live.partitions] == \
        [(0, 4, 10, 6, ""), (1, 20, 20, 0, "done"), (2, None, 0, None, "")]
    assert {p.owner.client_id if p.owner else None for p in live.partitions} == {"reader-1"}
    consumer.close()
    idle = group_lag(broker.bootstrap, "readers")
    assert idle.state == "Empty" and [p.partition for p in idle.partitions] == [0, 1]
    assert all(p.owner is None for p in idle.partitions)


def test_group_lag_of_an_unreachable_cluster_is_a_lag_error() -> None:
    from sluice.embedded import free_port

    with pytest.raises(LagError):
        group_lag(f"127.0.0.1:{free_port()}", "nobody", timeout=2)
