"""Transactional APIs on the wire: every bad request gets the Kafka error code Kafka uses (never a crash, a closed
connection or a stuck partition), and transaction version 2 (EndTxn v5, KIP-890 part 2) bumps the epoch so a late
write of the finished transaction is refused."""

from __future__ import annotations

import datetime
import signal
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kio.index import load_request_schema
from kio.schema.add_partitions_to_txn.v3.request import AddPartitionsToTxnRequest, AddPartitionsToTxnTopic
from kio.schema.add_partitions_to_txn.v4.request import AddPartitionsToTxnRequest as VerifyRequest
from kio.schema.add_partitions_to_txn.v4.request import AddPartitionsToTxnTopic as VerifyTopic
from kio.schema.add_partitions_to_txn.v4.request import AddPartitionsToTxnTransaction
from kio.schema.describe_producers.v0.request import DescribeProducersRequest
from kio.schema.describe_producers.v0.request import TopicRequest as DescribeProducersTopic
from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest
from kio.schema.init_producer_id.v5.request import InitProducerIdRequest
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.schema.types import ProducerId, TopicName, TransactionalId
from kio.static.primitive import i8, i16, i32, i32Timedelta

from dataplane.protocol.control import build_marker
from dataplane.protocol.errors import ErrorCode
from dataplane.protocol.records import Record, build_batch
from tests.support import wire as kafka_wire
from tests.support.broker import BrokerProcess, logged_broker
from tests.support.polling import wait_until

pytestmark = pytest.mark.xdist_group("transactions-wire")
TOPIC = "wire-txn"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    from confluent_kafka.admin import AdminClient, NewTopic

    process = logged_broker(tmp_path_factory.mktemp("txn-wire"),
                            extra_args=["--transaction-state-partitions", "2", "--transaction-max-timeout-ms", "60000"])
    process.start()
    try:
        admin = AdminClient({"bootstrap.servers": process.bootstrap})
        admin.create_topics([NewTopic(TOPIC, 2, 1)])[TOPIC].result(30)
        with kafka_wire.KafkaWire(process.port) as wire:  # the coordinator's topic, made and loaded
            wire.call(FindCoordinatorRequest(key_type=i8(1), coordinator_keys=("warm-up",)), 4)
        yield process
    finally:
        process.stop(signal.SIGKILL)


def code(value: Any) -> ErrorCode:
    return ErrorCode(int(value.value))


def timeout(ms: int) -> i32Timedelta:
    return i32Timedelta.parse(datetime.timedelta(milliseconds=ms))


def init(wire: kafka_wire.KafkaWire, txn_id: str, timeout_ms: int = 30000) -> Any:
    return wire.call(InitProducerIdRequest(transactional_id=TransactionalId(txn_id),
                                           transaction_timeout=timeout(timeout_ms)), 5)


def add(wire: kafka_wire.KafkaWire, txn_id: str, pid: int, epoch: int, topic: str = TOPIC,
        partitions: tuple[int, ...] = (0,)) -> list[tuple[int, ErrorCode]]:
    """AddPartitionsToTxn v3 (what librdkafka sends): each partition's error."""
    answer = wire.call(AddPartitionsToTxnRequest(
        v3_and_below_transactional_id=TransactionalId(txn_id), v3_and_below_producer_id=ProducerId(pid),
        v3_and_below_producer_epoch=i16(epoch), v3_and_below_topics=(AddPartitionsToTxnTopic(
            name=TopicName(topic), partitions=tuple(i32(p) for p in partitions)),)), 3)
    return [(int(p.partition_index), code(p.partition_error_code))
            for t in answer.results_by_topic_v3_and_below for p in t.results_by_partition]


def end(wire: kafka_wire.KafkaWire, txn_id: str, pid: int, epoch: int, *, commit: bool, version: int = 5) -> Any:
    schema: Any = load_request_schema(26, version)
    return wire.call(schema(transactional_id=TransactionalId(txn_id), producer_id=ProducerId(pid),
                            producer_epoch=i16(epoch), committed=commit), version)


def produce(wire: kafka_wire.KafkaWire, txn_id: str | None, batch: bytes, partition: int = 0) -> ErrorCode:
    data = TopicProduceData(name=TopicName(TOPIC), partition_data=(PartitionProduceData(index=i32(partition),
                                                                                        records=batch),))
    request = ProduceRequest(transactional_id=None if txn_id is None else TransactionalId(txn_id), acks=i16(-1),
                             timeout=timeout(10000), topic_data=(data,))
    return code(wire.call(request, 9).responses[0].partition_responses[0].error_code)


def txn_batch(pid: int, epoch: int, seq: int, value: bytes = b"v") -> bytes:
    return build_batch([Record(0, 1000, b"k", value, ())], producer_id=pid, producer_epoch=epoch,
                       base_sequence=seq, is_transactional=True)


def test_bad_transactional_requests_get_kafkas_error_codes(broker: BrokerProcess) -> None:
    txn_id = f"bad-{uuid.uuid4().hex[:6]}"
    with kafka_wire.KafkaWire(broker.port) as wire:
        assert code(init(wire, txn_id, timeout_ms=0).error_code) == ErrorCode.INVALID_TRANSACTION_TIMEOUT
        assert code(init(wire, txn_id, timeout_ms=60001).error_code) == ErrorCode.INVALID_TRANSACTION_TIMEOUT
        assert code(init(wire, "").error_code) == ErrorCode.INVALID_REQUEST
        # an id the coordinator never saw
        assert add(wire, "never-seen", 1, 0) == [(0, ErrorCode.INVALID_PRODUCER_ID_MAPPING)]
        assert code(end(wire, "never-seen", 1, 0, commit=True).error_code) == ErrorCode.INVALID_PRODUCER_ID_MAPPING
        started = init(wire, txn_id)
        pid, epoch = int(started.producer_id), int(started.producer_epoch)
        # nothing open: there is nothing to commit
        assert code(end(wire, txn_id, pid, epoch, commit=True, version=3).error_code) == ErrorCode.INVALID_TXN_STATE
        # a wrong epoch, a wrong producer id, an unknown topic (nothing of the request is added)
        assert add(wire, txn_id, pid, epoch - 1 if epoch else epoch + 7) == [(0, ErrorCode.PRODUCER_FENCED)]
        assert add(wire, txn_id, pid + 1000, epoch) == [(0, ErrorCode.INVALID_PRODUCER_ID_MAPPING)]
        assert sorted(add(wire, txn_id, pid, epoch, topic="no-such-topic", partitions=(0, 1))) == [
            (0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), (1, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]
        # a transactional write to a partition the transaction does not hold (KIP-890 part 1)
        assert produce(wire, txn_id, txn_batch(pid, epoch, 0)) == ErrorCode.INVALID_TXN_STATE
        # clients never write markers
        assert produce(wire, None, build_marker(pid, epoch, commit=True, coordinator_epoch=0, timestamp=1)) \
            == ErrorCode.INVALID_RECORD
        # the partition took none of it: a plain write lands at offset 0 of partition 1 and nothing is open
        assert add(wire, txn_id, pid, epoch, partitions=(1,)) == [(1, ErrorCode.NONE)]
        assert produce(wire, txn_id, txn_batch(pid, epoch, 0), partition=1) == ErrorCode.NONE
        assert code(end(wire, txn_id, pid, epoch, commit=False, version=3).error_code) == ErrorCode.NONE
        # a request still answers on the same connection after all that
        assert code(end(wire, txn_id, pid, epoch, commit=False, version=3).error_code) == ErrorCode.NONE  # retried


def test_verify_only_never_adds_a_partition(broker: BrokerProcess) -> None:
    txn_id = f"ver-{uuid.uuid4().hex[:6]}"
    with kafka_wire.KafkaWire(broker.port) as wire:
        started = init(wire, txn_id)
        pid, epoch = int(started.producer_id), int(started.producer_epoch)
        assert add(wire, txn_id, pid, epoch, partitions=(0,)) == [(0, ErrorCode.NONE)]
        request = VerifyRequest(transactions=(AddPartitionsToTxnTransaction(
            transactional_id=TransactionalId(txn_id), producer_id=ProducerId(pid), producer_epoch=i16(epoch),
            verify_only=True, topics=(VerifyTopic(name=TopicName(TOPIC), partitions=(i32(0), i32(1))),)),))
        answer = wire.call(request, 4)
        results = {int(p.partition_index): code(p.partition_error_code)
                   for t in answer.results_by_transaction[0].topic_results for p in t.results_by_partition}
        assert results == {0: ErrorCode.NONE, 1: ErrorCode.INVALID_TXN_STATE}
        assert produce(wire, txn_id, txn_batch(pid, epoch, 0), partition=1) == ErrorCode.INVALID_TXN_STATE


def test_transaction_version_2_bumps_the_epoch_at_every_end(broker: BrokerProcess) -> None:
    """KIP-890 part 2: a late write of a finished transaction cannot join the next one."""
    txn_id = f"tv2-{uuid.uuid4().hex[:6]}"
    with kafka_wire.KafkaWire(broker.port) as wire:
        started = init(wire, txn_id)
        pid, epoch = int(started.producer_id), int(started.producer_epoch)
        assert add(wire, txn_id, pid, epoch) == [(0, ErrorCode.NONE)]
        assert produce(wire, txn_id, txn_batch(pid, epoch, 0)) == ErrorCode.NONE
        ended = end(wire, txn_id, pid, epoch, commit=True)
        assert code(ended.error_code) == ErrorCode.NONE
        assert (int(ended.producer_id), int(ended.producer_epoch)) == (pid, epoch + 1)
        retried = end(wire, txn_id, pid, epoch, commit=True)  # the answer was lost: the retry gets it again
        assert (code(retried.error_code), int(retried.producer_epoch)) == (ErrorCode.NONE, epoch + 1)
        # the next transaction, with the new epoch; a late batch of the old one is refused
        assert add(wire, txn_id, pid, epoch + 1) == [(0, ErrorCode.NONE)]
        assert produce(wire, txn_id, txn_batch(pid, epoch, 1, b"late")) in (ErrorCode.INVALID_PRODUCER_EPOCH,
                                                                             ErrorCode.INVALID_TXN_STATE)
        assert produce(wire, txn_id, txn_batch(pid, epoch + 1, 0, b"next")) == ErrorCode.NONE
        assert code(end(wire, txn_id, pid, epoch + 1, commit=True).error_code) == ErrorCode.NONE


def test_an_idle_transactional_id_expires_and_an_open_one_does_not(tmp_path_factory: pytest.TempPathFactory) -> None:
    """transactional.id.expiration.ms: an id idle that long with no transaction open is forgotten (a tombstone in
    __transaction_state); one with a transaction open stays; the forgotten id starts afresh."""
    from confluent_kafka.admin import AdminClient, NewTopic

    process = logged_broker(tmp_path_factory.mktemp("txn-expiry"), extra_args=[
        "--transaction-state-partitions", "1", "--transactional-id-expiration-ms", "1500",
        "--transaction-abort-timed-out-interval-ms", "100"])
    process.start()
    try:
        admin = AdminClient({"bootstrap.servers": process.bootstrap})
        admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(30)
        with kafka_wire.KafkaWire(process.port) as wire:
            wire.call(FindCoordinatorRequest(key_type=i8(1), coordinator_keys=("warm-up",)), 4)  # made and loaded
            idle = init(wire, "idle-id")
            busy = init(wire, "busy-id")
            assert code(idle.error_code) == code(busy.error_code) == ErrorCode.NONE
            assert add(wire, "busy-id", int(busy.producer_id), int(busy.producer_epoch)) == [(0, ErrorCode.NONE)]
            describe: Any = load_request_schema(65, 0)

            def state(txn_id: str) -> Any:
                return wire.call(describe(transactional_ids=(TransactionalId(txn_id),)), 0).transaction_states[0]

            wait_until(lambda: code(state("idle-id").error_code) == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND,
                       "the idle id to expire")
            busy_state = state("busy-id")  # open (its timeout is 30 s): kept though idle past the expiration
            assert (code(busy_state.error_code), str(busy_state.transaction_state)) == (ErrorCode.NONE, "Ongoing")
            again = init(wire, "idle-id")
            assert code(again.error_code) == ErrorCode.NONE
            assert int(again.producer_id) != int(idle.producer_id)  # a new start, not the forgotten producer
    finally:
        process.stop(signal.SIGKILL)


def test_describe_producers_shows_an_open_transaction_until_its_marker(broker: BrokerProcess) -> None:
    """KIP-664's DescribeProducers, what ``kafka-transactions.sh find-hanging`` reads: the producer's epoch, last
    sequence and timestamp, and its open transaction's first offset (-1 once the marker closed it)."""
    from confluent_kafka.admin import AdminClient, NewTopic

    topic, txn_id = f"producers-{uuid.uuid4().hex[:6]}", f"described-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})  # kept: a dropped client ends its futures
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    with kafka_wire.KafkaWire(broker.port) as wire:
        def producers(partitions: tuple[int, ...] = (0,)) -> list[Any]:
            request = DescribeProducersRequest(topics=(DescribeProducersTopic(
                name=TopicName(topic), partition_indexes=tuple(i32(p) for p in partitions)),))
            return list(wire.call(request, 0).topics[0].partitions)

        assert [(p.partition_index, code(p.error_code)) for p in producers((0, 7))] == [
            (0, ErrorCode.NONE), (7, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]
        assert producers()[0].active_producers == ()
        started = init(wire, txn_id)
        pid, epoch = int(started.producer_id), int(started.producer_epoch)
        assert add(wire, txn_id, pid, epoch, topic=topic) == [(0, ErrorCode.NONE)]
        data = TopicProduceData(name=TopicName(topic), partition_data=(
            PartitionProduceData(index=i32(0), records=txn_batch(pid, epoch, 0)),))
        answer = wire.call(ProduceRequest(transactional_id=TransactionalId(txn_id), acks=i16(-1),
                                          timeout=timeout(10000), topic_data=(data,)), 9)
        assert code(answer.responses[0].partition_responses[0].error_code) == ErrorCode.NONE
        [open_state] = producers()[0].active_producers
        assert (int(open_state.producer_id), int(open_state.producer_epoch), int(open_state.last_sequence),
                int(open_state.last_timestamp), int(open_state.current_txn_start_offset)) == (pid, epoch, 0, 1000, 0)
        assert code(end(wire, txn_id, pid, epoch, commit=True, version=3).error_code) == ErrorCode.NONE
        [closed] = producers()[0].active_producers
        assert int(closed.current_txn_start_offset) == -1 and int(closed.coordinator_epoch) >= 0
