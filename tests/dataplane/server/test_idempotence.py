"""Idempotent produce against a live broker: duplicates, gaps, fencing, and state across restarts."""

from __future__ import annotations

import signal

import pytest

from dataplane.protocol.errors import ErrorCode
from dataplane.protocol.records import Record, build_batch
from tests.dataplane.server.wire import WireClient
from tests.support.broker import BrokerProcess


def batch(pid: int, epoch: int, seq: int, count: int = 5) -> bytes:
    return build_batch([Record(offset=i, timestamp=1_700_000_000_000 + i, key=b"k%d" % i, value=b"v%d" % (seq + i),
                               headers=()) for i in range(count)],
                       producer_id=pid, producer_epoch=epoch, base_sequence=seq)


def test_producer_ids_are_unique_and_survive_restarts(broker: BrokerProcess) -> None:
    with WireClient(broker.port) as client:
        first = {client.init_producer_id()[0] for _ in range(5)}
    broker.stop(signal.SIGKILL)
    broker.start()
    with WireClient(broker.port) as client:
        second = {client.init_producer_id()[0] for _ in range(5)}
    assert len(first) == 5 and len(second) == 5 and not first & second


def test_retries_are_answered_as_duplicates_and_gaps_refused(broker: BrokerProcess) -> None:
    with WireClient(broker.port) as client:
        pid, epoch = client.init_producer_id()
        assert client.produce("idem", 0, batch(pid, epoch, 0)) == (0, 0)
        assert client.produce("idem", 0, batch(pid, epoch, 5)) == (0, 5)
        assert client.produce("idem", 0, batch(pid, epoch, 0)) == (0, 0)  # a retry: original offset, no write
        assert client.produce("idem", 0, batch(pid, epoch, 20))[0] == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
        assert client.produce("idem", 0, batch(pid, epoch + 1, 0)) == (0, 10)  # a new epoch restarts at 0
        assert client.produce("idem", 0, batch(pid, epoch, 10))[0] == ErrorCode.INVALID_PRODUCER_EPOCH
        assert client.produce("idem", 0, batch(pid, epoch + 1, 5)) == (0, 15)


@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGKILL])
def test_duplicate_detection_survives_a_restart(broker: BrokerProcess, how: signal.Signals) -> None:
    """SIGTERM restores the snapshot; SIGKILL rebuilds the state by scanning the log."""
    with WireClient(broker.port) as client:
        pid, epoch = client.init_producer_id()
        for seq in range(0, 50, 5):
            assert client.produce("restart", 0, batch(pid, epoch, seq)) == (0, seq)
    broker.stop(how)
    broker.start()
    with WireClient(broker.port) as client:
        assert client.produce("restart", 0, batch(pid, epoch, 45)) == (0, 45)  # retried after the restart
        assert client.produce("restart", 0, batch(pid, epoch, 55))[0] == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
        assert client.produce("restart", 0, batch(pid, epoch, 50)) == (0, 50)


def test_bad_acks_and_multi_batch_idempotent_produce_are_refused(broker: BrokerProcess) -> None:
    with WireClient(broker.port) as client:
        pid, epoch = client.init_producer_id()
        assert client.produce("strict", 0, batch(pid, epoch, 0), acks=2)[0] == ErrorCode.INVALID_REQUIRED_ACKS
        two = batch(pid, epoch, 0) + batch(pid, epoch, 5)
        assert client.produce("strict", 0, two)[0] == ErrorCode.INVALID_RECORD
        assert client.produce("strict", 0, batch(pid, epoch, 0)) == (0, 0)
