"""The asyncio producer against a real 3-broker cluster: what it writes reads back exactly (keys, headers,
timestamps, offsets), concurrent sends keep their order, a leader killed with SIGKILL mid-stream loses and
duplicates nothing, a broker that stops answering is retried without duplicates, and a bad record, topic or
partition fails alone with its Kafka error.

The cluster starts once for the module; each test uses topics of its own.
"""

from __future__ import annotations

import asyncio
import signal
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from dataplane.client.admin import ClusterAdmin, NewTopic
from dataplane.client.producer import AsyncProducer, Record, Segment
from tests.dataplane.client.test_admin import Cluster, create, start_cluster

pytestmark = pytest.mark.xdist_group("heavy")  # many-process tests run one at a time: two cores


def servers(cluster: Cluster) -> list[tuple[str, int]]:
    return [(host, int(port)) for host, _, port in (b.bootstrap.rpartition(":") for b in cluster.brokers.values())]


def topic_name() -> str:
    return f"produce-{uuid.uuid4().hex[:8]}"


def read_all(bootstrap: str, topic: str, partition: int, count: int) -> list[object]:
    """Every record of one partition from offset 0 (waits for ``count`` of them, then a little for extras)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{uuid.uuid4().hex[:6]}",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        consumer.assign([TopicPartition(topic, partition, 0)])
        records: list[object] = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            batch = consumer.consume(1000, 0.5)
            records += [m for m in batch if m.error() is None]
            if len(records) >= count and not batch:
                break
        return records
    finally:
        consumer.close()


def run(coroutine: object) -> object:
    return asyncio.run(coroutine)  # type: ignore[arg-type]


def test_records_read_back_as_sent_with_offsets_from_each_batch(cluster: Cluster, admin: ClusterAdmin) -> None:
    topic = topic_name()
    create(admin, NewTopic(topic, 3, 3))
    sent: list[Record] = [(b"k%d" % i if i % 3 else None, b"v%d" % i, [("h", b"x"), ("n", None)] if i % 2 else None,
                           1_700_000_000_000 + i) for i in range(300)]

    async def main() -> list[list[Segment]]:
        producer = AsyncProducer({}, servers(cluster))
        try:
            return list(await asyncio.gather(*(producer.send(topic, p, sent[p * 100:(p + 1) * 100])
                                               for p in range(3))))
        finally:
            producer.close()

    results = run(main())
    assert isinstance(results, list)
    for partition, segments in enumerate(results):
        assert [(s.start, s.count, s.base_offset, s.error) for s in segments] == [(0, 100, 0, None)]
        read = read_all(cluster.bootstrap, topic, partition, 100)
        want = sent[partition * 100:(partition + 1) * 100]
        got = [(m.key(), m.value(), m.headers() or None, m.timestamp()[1], m.offset()) for m in read]  # type: ignore[attr-defined]
        assert got == [(k, v, h, ts, i) for i, (k, v, h, ts) in enumerate(want)]


def test_concurrent_sends_to_one_partition_keep_their_order_and_share_batches(cluster: Cluster,
                                                                             admin: ClusterAdmin) -> None:
    topic = topic_name()
    create(admin, NewTopic(topic, 1, 3))

    async def main() -> list[list[Segment]]:
        producer = AsyncProducer({}, servers(cluster))
        try:
            futures = [producer.send(topic, 0, [(None, b"%d-%d" % (n, i), None, 1) for i in range(10)])
                       for n in range(200)]
            return list(await asyncio.gather(*futures))
        finally:
            producer.close()

    results = run(main())
    assert isinstance(results, list)
    offsets = [segments[0].base_offset for segments in results]
    assert offsets == [n * 10 for n in range(200)]  # in send order, no gap
    values = [m.value() for m in read_all(cluster.bootstrap, topic, 0, 2000)]  # type: ignore[attr-defined]
    assert values == [b"%d-%d" % (n, i) for n in range(200) for i in range(10)]


def test_a_leader_killed_mid_stream_loses_and_duplicates_nothing(tmp_path: Path) -> None:
    own = start_cluster(tmp_path, (1, 2, 3))
    try:
        with ClusterAdmin(own.bootstrap, timeout=15) as admin:
            topic = topic_name()
            create(admin, NewTopic(topic, 1, 3, {"min.insync.replicas": "2"}))
            leader = admin.topics()[topic].partitions[0].leader
            killed = asyncio.Event()

            async def main() -> list[list[Segment]]:
                producer = AsyncProducer({}, servers(own))
                results: list[list[Segment]] = []
                try:
                    for window in range(40):  # windows of 10 sends: some acknowledged, some in flight at the kill
                        sends = [producer.send(topic, 0, [(None, b"%d-%d" % (n, i), None, 1) for i in range(5)])
                                 for n in range(window * 10, window * 10 + 10)]
                        if window == 10:
                            await asyncio.sleep(0)  # the window's first batch is written to the leader
                            own.brokers[leader].stop(signal.SIGKILL)
                            killed.set()
                        results += await asyncio.gather(*sends)
                    assert producer.retries >= 1
                    return results
                finally:
                    producer.close()

            results = run(main())
            assert isinstance(results, list)
            assert killed.is_set()
            errors = [s.error for segments in results for s in segments if s.error is not None]
            assert errors == []
            offsets = [segments[0].base_offset for segments in results]
            assert offsets == [n * 5 for n in range(400)]
            survivor = next(b for n, b in own.brokers.items() if n != leader)
            read = read_all(survivor.bootstrap, topic, 0, 2000)
            values = [m.value() for m in read]  # type: ignore[attr-defined]
            assert values == [b"%d-%d" % (n, i) for n in range(400) for i in range(5)]  # once each, in order
    finally:
        own.stop()


def test_a_broker_that_stops_answering_is_retried_without_duplicates(cluster: Cluster, admin: ClusterAdmin) -> None:
    topic = topic_name()
    create(admin, NewTopic(topic, 1, 1, assignments=[[2]]))
    broker = cluster.brokers[2]
    assert broker.proc is not None

    async def main() -> list[list[Segment]]:
        producer = AsyncProducer({}, servers(cluster), request_timeout=0.5, delivery_timeout=60)
        try:
            first = await producer.send(topic, 0, [(None, b"before", None, 1)])
            broker.proc.send_signal(signal.SIGSTOP)  # type: ignore[union-attr]
            try:
                pending = producer.send(topic, 0, [(None, b"during", None, 1)])
                # Its Produce is sent, and times out (its connection dropped) at least once while the broker is
                # stopped; the broker reads it when it goes on, and then the same batch sent again.
                deadline = time.monotonic() + 30
                while producer.retries < 1 and time.monotonic() < deadline:
                    await asyncio.sleep(0.05)  # polling the retry counter (the condition), with a deadline
                assert not pending.done() and producer.retries >= 1
            finally:
                broker.proc.send_signal(signal.SIGCONT)  # type: ignore[union-attr]
            during = await pending
            after = await producer.send(topic, 0, [(None, b"after", None, 1)])
            return [first, during, after]
        finally:
            producer.close()

    results = run(main())
    assert isinstance(results, list)
    assert [[(s.base_offset, s.error) for s in r] for r in results] == [[(0, None)], [(1, None)], [(2, None)]]
    values = [m.value() for m in read_all(cluster.bootstrap, topic, 0, 3)]  # type: ignore[attr-defined]
    assert values == [b"before", b"during", b"after"]


def test_a_record_too_large_fails_alone_and_bad_topics_and_partitions_fail_clearly(cluster: Cluster,
                                                                                    admin: ClusterAdmin) -> None:
    topic = topic_name()
    create(admin, NewTopic(topic, 2, 3, {"max.message.bytes": "10000"}))

    async def main() -> tuple[list[Segment], list[Segment], list[Segment], list[Segment]]:
        producer = AsyncProducer({}, servers(cluster))
        try:
            await producer.partition_count(topic)
            small = [(None, b"a" * 100, None, 1)] * 3
            # Three sends merged into one batch (they wait behind the first): the middle one has a record too large.
            first = producer.send(topic, 0, small)
            mixed = producer.send(topic, 0, [*small, (None, b"b" * 20_000, None, 1), *small])
            last = producer.send(topic, 0, small)
            await first
            unknown = await producer.send(f"missing-{uuid.uuid4().hex[:6]}", 0, small)
            no_partition = await producer.send(topic, 7, small)
            return await mixed, await last, unknown, no_partition
        finally:
            producer.close()

    results = run(main())
    assert isinstance(results, tuple)
    mixed, last, unknown, no_partition = results
    # The merged batch was refused whole, so it went again one record per batch: only the large one failed.
    assert [(s.start, s.count, s.error.code if s.error else None) for s in mixed] == [
        (0, 1, None), (1, 1, None), (2, 1, None), (3, 1, "MSG_SIZE_TOO_LARGE"), (4, 1, None), (5, 1, None),
        (6, 1, None)]
    assert [s.base_offset for s in mixed if s.error is None] == [3, 4, 5, 6, 7, 8]
    assert [(s.base_offset, s.error) for s in last] == [(9, None), (10, None), (11, None)]
    assert [s.error.code for s in unknown if s.error] == ["UNKNOWN_TOPIC_OR_PART"]
    assert [s.error.code for s in no_partition if s.error] == ["_UNKNOWN_PARTITION"]


def test_a_record_that_cannot_be_encoded_fails_alone(cluster: Cluster, admin: ClusterAdmin) -> None:
    topic = topic_name()
    create(admin, NewTopic(topic, 1, 3))

    async def main() -> tuple[list[Segment], list[Segment]]:
        producer = AsyncProducer({}, servers(cluster))
        try:
            good = producer.send(topic, 0, [(None, b"a", None, 1)])
            bad = producer.send(topic, 0, [(None, b"b", [("\ud800", None)], 1), (None, b"c", None, 1)])
            return await good, await bad
        finally:
            producer.close()

    good, bad = asyncio.run(main())
    assert [(s.base_offset, s.error) for s in good] == [(0, None)]
    assert [(s.start, s.error.code if s.error else s.base_offset) for s in bad] == [(0, "_INVALID_ARG"), (1, 1)]
    values = [m.value() for m in read_all(cluster.bootstrap, topic, 0, 2)]  # type: ignore[attr-defined]
    assert values == [b"a", b"c"]


def test_a_failure_inside_the_sender_fails_its_callers_instead_of_leaving_them_waiting() -> None:
    """The safety net for a bug: whatever goes wrong in a partition's sender reaches the callers as an error."""

    async def main() -> list[Segment]:
        producer = AsyncProducer({}, [("127.0.0.1", 9)])

        async def producer_id() -> tuple[int, int, int]:
            return 1, 0, 1

        async def broken(*_args: object) -> object:
            raise RuntimeError("a bug")

        producer._producer_id = producer_id  # type: ignore[method-assign]
        producer._produce = broken  # type: ignore[method-assign]
        try:
            return await asyncio.wait_for(producer.send("t", 0, [(None, b"v", None, 1)]), 10)
        finally:
            producer.close()

    segments = asyncio.run(main())
    assert [(s.start, s.count, s.error.code if s.error else None) for s in segments] == [(0, 1, "_FAIL")]
