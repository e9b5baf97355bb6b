"""Unmodified transactional clients against a real broker: confluent-kafka (librdkafka), kafka-python, aiokafka.

What a user of Kafka's transactions relies on: a committed transaction is visible to ``read_committed`` consumers and
an aborted one is not (``read_uncommitted`` sees both); offsets sent with a transaction are committed with it; a
second producer with the same ``transactional.id`` fences the first; a transaction left open past its timeout is
aborted by the broker; a ``read_committed`` consumer never reads past the last stable offset.
"""

from __future__ import annotations

import asyncio
import signal
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.broker import BrokerProcess, logged_broker

pytestmark = pytest.mark.xdist_group("transactions-clients")

BROKER_ARGS = ["--group-min-session-timeout-ms", "500", "--group-initial-rebalance-delay-ms", "0",
               "--offsets-topic-partitions", "2", "--transaction-state-partitions", "3",
               "--transaction-abort-timed-out-interval-ms", "200"]


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = logged_broker(tmp_path_factory.mktemp("txn-clients"), extra_args=BROKER_ARGS)
    process.start()
    try:
        yield process
    finally:
        process.stop(signal.SIGKILL)


def _topic(broker: BrokerProcess, partitions: int = 1) -> str:
    name = f"t-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)], operation_timeout=30)[name].result(30)
    return name


def _producer(broker: BrokerProcess, txn_id: str, **extra: Any) -> Producer:
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": txn_id, "linger.ms": 1,
                         **extra})
    producer.init_transactions(30)
    return producer


def _read_all(broker: BrokerProcess, topic: str, *, committed: bool, partitions: int = 1) -> list[bytes]:
    """Every record a consumer of the isolation level reads up to the end it may read (the LSO for read_committed)."""
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"r-{uuid.uuid4().hex[:6]}",
                         "enable.partition.eof": True, "enable.auto.commit": False,
                         "isolation.level": "read_committed" if committed else "read_uncommitted"})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    values: list[bytes] = []
    at_end: set[int] = set()
    try:
        for _ in range(600):
            message = consumer.poll(0.1)
            if message is None:
                continue
            if message.error():
                if message.error().code() == KafkaError._PARTITION_EOF:
                    at_end.add(message.partition())
                    if len(at_end) == partitions:
                        return values
                    continue
                raise KafkaException(message.error())
            values.append(message.value())
        raise AssertionError(f"never reached the end of {topic}: {values}")
    finally:
        consumer.close()


def test_commit_is_read_and_abort_is_not(broker: BrokerProcess) -> None:
    topic = _topic(broker, partitions=2)
    producer = _producer(broker, f"tx-{uuid.uuid4().hex[:6]}")
    producer.begin_transaction()
    for i in range(10):
        producer.produce(topic, value=b"c%d" % i, partition=i % 2)
    producer.commit_transaction(30)
    producer.begin_transaction()
    for i in range(10):
        producer.produce(topic, value=b"a%d" % i, partition=i % 2)
    producer.flush(30)  # in the log before the abort (librdkafka drops what it has not sent yet)
    producer.abort_transaction(30)
    producer.begin_transaction()
    producer.produce(topic, value=b"c-last", partition=0)
    producer.commit_transaction(30)

    committed = _read_all(broker, topic, committed=True, partitions=2)
    assert sorted(committed) == sorted([b"c%d" % i for i in range(10)] + [b"c-last"])
    everything = _read_all(broker, topic, committed=False, partitions=2)
    assert sorted(everything) == sorted([b"c%d" % i for i in range(10)] + [b"a%d" % i for i in range(10)]
                                        + [b"c-last"])


def test_read_committed_stops_at_an_open_transaction(broker: BrokerProcess) -> None:
    """The LSO holds back later non-transactional records too, until the transaction ends."""
    topic = _topic(broker)
    producer = _producer(broker, f"tx-{uuid.uuid4().hex[:6]}")
    producer.begin_transaction()
    producer.produce(topic, value=b"open")
    producer.flush(30)
    plain = Producer({"bootstrap.servers": broker.bootstrap})
    plain.produce(topic, value=b"after")
    plain.flush(30)
    assert _read_all(broker, topic, committed=True) == []
    assert _read_all(broker, topic, committed=False) == [b"open", b"after"]
    producer.commit_transaction(30)
    assert _read_all(broker, topic, committed=True) == [b"open", b"after"]


def test_consume_transform_produce_commits_offsets_with_the_transaction(broker: BrokerProcess) -> None:
    source, sink = _topic(broker), _topic(broker)
    plain = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(20):
        plain.produce(source, value=b"%d" % i)
    plain.flush(30)
    group = f"g-{uuid.uuid4().hex[:6]}"
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
    consumer.assign([TopicPartition(source, 0, 0)])
    producer = _producer(broker, f"tx-{uuid.uuid4().hex[:6]}")
    taken: list[bytes] = []
    while len(taken) < 20:
        message = consumer.poll(0.2)
        if message is not None and not message.error():
            taken.append(message.value())
    # The first ten go through a transaction that aborts: neither their output nor their offsets stay.
    for commit, chunk in ((False, taken[:10]), (True, taken[:10]), (True, taken[10:])):
        producer.begin_transaction()
        for value in chunk:
            producer.produce(sink, value=b"x" + value)
        start = int(taken.index(chunk[0]))
        producer.send_offsets_to_transaction([TopicPartition(source, 0, start + len(chunk))],
                                             consumer.consumer_group_metadata(), 30)
        if commit:
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)
        if not commit:
            assert consumer.committed([TopicPartition(source, 0)], 10)[0].offset < 0
    assert consumer.committed([TopicPartition(source, 0)], 10)[0].offset == 20
    consumer.close()
    assert _read_all(broker, sink, committed=True) == [b"x%d" % i for i in range(20)]


def test_a_second_producer_with_the_same_id_fences_the_first(broker: BrokerProcess) -> None:
    topic = _topic(broker)
    txn_id = f"tx-{uuid.uuid4().hex[:6]}"
    first = _producer(broker, txn_id)
    first.begin_transaction()
    first.produce(topic, value=b"zombie")
    first.flush(30)
    second = _producer(broker, txn_id)  # aborts the first's open transaction and bumps the epoch
    second.begin_transaction()
    second.produce(topic, value=b"live")
    second.commit_transaction(30)
    with pytest.raises(KafkaException) as failed:
        first.produce(topic, value=b"late")
        first.commit_transaction(30)
    assert failed.value.args[0].fatal() or failed.value.args[0].code() in (
        KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH)
    assert _read_all(broker, topic, committed=True) == [b"live"]


def test_a_transaction_left_open_past_its_timeout_is_aborted(broker: BrokerProcess) -> None:
    topic = _topic(broker)
    producer = _producer(broker, f"tx-{uuid.uuid4().hex[:6]}", **{"transaction.timeout.ms": 1000})
    producer.begin_transaction()
    producer.produce(topic, value=b"hung")
    producer.flush(30)
    plain = Producer({"bootstrap.servers": broker.bootstrap})
    plain.produce(topic, value=b"after")
    plain.flush(30)
    # Only the broker's abort can move the LSO past the hung record: read_committed then sees "after" alone.
    for _ in range(300):
        if _read_all(broker, topic, committed=True) == [b"after"]:
            break
    else:
        raise AssertionError("the hung transaction was never aborted")
    with pytest.raises(KafkaException):
        producer.commit_transaction(30)


def test_kafka_python_transactions(broker: BrokerProcess) -> None:
    from kafka import KafkaProducer

    topic = _topic(broker)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id=f"kp-{uuid.uuid4().hex[:6]}")
    try:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send(topic, b"kp-commit")
        producer.commit_transaction()
        producer.begin_transaction()
        producer.send(topic, b"kp-abort")
        producer.flush()  # in the log before the abort
        producer.abort_transaction()
    finally:
        producer.close(timeout=10)
    assert _read_all(broker, topic, committed=True) == [b"kp-commit"]
    assert _read_all(broker, topic, committed=False) == [b"kp-commit", b"kp-abort"]


def test_aiokafka_transactions(broker: BrokerProcess) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    topic = _topic(broker)

    async def run() -> list[bytes]:
        producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap,
                                    transactional_id=f"ak-{uuid.uuid4().hex[:6]}")
        await producer.start()
        try:
            async with producer.transaction():
                await producer.send_and_wait(topic, b"ak-commit")
            await producer.begin_transaction()
            await producer.send_and_wait(topic, b"ak-abort")
            await producer.abort_transaction()
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(topic, bootstrap_servers=broker.bootstrap, isolation_level="read_committed",
                                    auto_offset_reset="earliest", enable_auto_commit=False)
        await consumer.start()
        try:
            got = await consumer.getmany(timeout_ms=5000)
            return [m.value for batch in got.values() for m in batch]
        finally:
            await consumer.stop()

    assert asyncio.run(run()) == [b"ak-commit"]
    assert _read_all(broker, topic, committed=False) == [b"ak-commit", b"ak-abort"]


def test_the_log_survives_a_restart_with_an_open_transaction(tmp_path: Path) -> None:
    """Producer state of an open transaction is rebuilt after kill -9: the LSO still holds, the commit lands."""
    process = logged_broker(tmp_path, extra_args=BROKER_ARGS)
    process.start()
    try:
        topic = _topic(process)
        producer = Producer({"bootstrap.servers": process.bootstrap, "transactional.id": "restart",
                             "linger.ms": 1})
        producer.init_transactions(30)
        producer.begin_transaction()
        producer.produce(topic, value=b"before")
        producer.commit_transaction(30)
        producer.begin_transaction()
        producer.produce(topic, value=b"open")
        producer.flush(30)
        process.stop(signal.SIGKILL)
        process.start()
        assert _read_all(process, topic, committed=True) == [b"before"]
        assert _read_all(process, topic, committed=False) == [b"before", b"open"]
    finally:
        process.stop(signal.SIGKILL)


def test_transactions_are_listed_described_and_a_hanging_one_aborted(broker: BrokerProcess) -> None:
    """kafka-python's admin client, as ``kafka-transactions.sh`` uses these APIs (KIP-664)."""
    from kafka.admin import AbortTransactionSpec, KafkaAdminClient
    from kafka.structs import TopicPartition as KTopicPartition

    topic = _topic(broker)
    txn_id = f"tx-{uuid.uuid4().hex[:6]}"
    producer = _producer(broker, txn_id)
    producer.begin_transaction()
    producer.produce(topic, value=b"open")
    producer.flush(30)
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        listed = {t.transactional_id: t for txns in admin.list_transactions().values() for t in txns}
        assert listed[txn_id].state.value == "Ongoing"
        described = admin.describe_transactions([txn_id])[txn_id]
        assert described.state.value == "Ongoing"
        assert described.topic_partitions == {KTopicPartition(topic, 0)}
        assert described.transaction_timeout_ms == 60000
        # The partition's leader writes an abort marker for the producer: read_committed moves past "open".
        admin.abort_transaction(AbortTransactionSpec(KTopicPartition(topic, 0), described.producer_id,
                                                     described.producer_epoch, -1))
        assert _read_all(broker, topic, committed=True) == []
        plain = Producer({"bootstrap.servers": broker.bootstrap})
        plain.produce(topic, value=b"after")
        plain.flush(30)
        assert _read_all(broker, topic, committed=True) == [b"after"]
        with pytest.raises(Exception, match=r"TransactionalIdNotFound|TRANSACTIONAL_ID_NOT_FOUND"):
            admin.describe_transactions(["no-such-id"])
    finally:
        admin.close()
