"""Transactions under faults, Jepsen-style: a transactional producer commits (and deliberately aborts) transactions
spread over two partitions of a 3-broker cluster (RF 3, min.insync.replicas 2) while the broker coordinating its
transactional id, and then a partition leader, are SIGKILLed and come back.

Checked afterwards on a ``read_committed`` read of everything: every committed transaction is there whole and once;
nothing of an aborted one is; a transaction whose outcome the client never learned is all or nothing. The default
suite runs one round; ``make chaos`` runs ``CHAOS_ROUNDS``.
"""

from __future__ import annotations

import os
import signal
import threading
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from dataplane.coordinator.txn_records import TRANSACTION_STATE_TOPIC, partition_for
from tests.chaos.cluster import QUIET, Cluster, Node

ROUNDS = int(os.environ.get("CHAOS_ROUNDS", "1"))
TOPIC, PARTITIONS, TXN_ID = "txns", 2, "chaos-txn"
TXN_PARTITIONS = 3
pytestmark = [pytest.mark.xdist_group("heavy"), pytest.mark.timeout(600 * max(1, ROUNDS // 5))]


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    found = Cluster(tmp_path, extra_args=["--transaction-state-partitions", str(TXN_PARTITIONS),
                                          "--transaction-abort-timed-out-interval-ms", "500"])
    try:
        found.start()
        yield found
    finally:
        found.stop()


@dataclass
class Ledger:
    """Each transaction's records and what the client learned of its end."""

    outcomes: dict[int, str] = field(default_factory=dict)  # committed | aborted | unknown
    sizes: dict[int, int] = field(default_factory=dict)
    changed: threading.Condition = field(default_factory=threading.Condition)

    def end(self, txn: int, outcome: str) -> None:
        with self.changed:
            self.outcomes[txn] = outcome
            self.changed.notify_all()

    def committed(self) -> int:
        with self.changed:
            return sum(o == "committed" for o in self.outcomes.values())


class TransactionalWorker(threading.Thread):
    """Transactions of 1-6 records until stopped; every fifth aborted on purpose."""

    def __init__(self, cluster: Cluster, ledger: Ledger) -> None:
        super().__init__(daemon=True)
        self.cluster, self.ledger = cluster, ledger
        self.stopping = threading.Event()
        self.failure: BaseException | None = None

    def _producer(self) -> Producer:
        producer = Producer({"bootstrap.servers": self.cluster.bootstrap, "transactional.id": TXN_ID,
                             "transaction.timeout.ms": 20000, "linger.ms": 2, **QUIET})
        producer.init_transactions(60)
        return producer

    def run(self) -> None:
        try:
            producer = self._producer()
            txn = 0
            while not self.stopping.is_set():
                size = 1 + txn % 6
                self.ledger.sizes[txn] = size
                try:
                    producer.begin_transaction()
                    for i in range(size):
                        producer.produce(TOPIC, value=f"{txn}:{i}".encode(), partition=i % PARTITIONS)
                    producer.flush(60)
                    if txn % 5 == 4:
                        producer.abort_transaction(60)
                        self.ledger.end(txn, "aborted")
                    else:
                        producer.commit_transaction(60)
                        self.ledger.end(txn, "committed")
                except KafkaException as exc:
                    error: KafkaError = exc.args[0]
                    self.ledger.end(txn, "unknown")
                    if error.txn_requires_abort():
                        try:
                            producer.abort_transaction(60)
                            self.ledger.end(txn, "aborted")
                        except KafkaException:
                            producer = self._producer()
                    else:  # fatal or retriable mid-commit: a new instance finishes or aborts what was pending
                        producer = self._producer()
                txn += 1
        except BaseException as exc:  # reported by the test
            self.failure = exc


def _coordinator(cluster: Cluster) -> Node:
    leader, _, _ = cluster.partition(TRANSACTION_STATE_TOPIC, partition_for(TXN_ID, TXN_PARTITIONS))
    return cluster.nodes[leader]


def _read_committed(cluster: Cluster) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "checker", "enable.auto.commit": False,
                         "isolation.level": "read_committed", "enable.partition.eof": True, **QUIET})
    consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
    values, at_end = [], set()
    try:
        while len(at_end) < PARTITIONS:
            message = consumer.poll(1.0)
            if message is None:
                continue
            if message.error():
                if message.error().code() == KafkaError._PARTITION_EOF:
                    at_end.add(message.partition())
                continue
            values.append(message.value())
        return values
    finally:
        consumer.close()


def check(ledger: Ledger, values: list[bytes]) -> list[str]:
    """Problems found: lost, torn, duplicated or aborted-but-read transactions."""
    seen = Counter(values)
    problems = [f"{v!r} read {n} times" for v, n in seen.items() if n > 1]
    by_txn: dict[int, set[int]] = {}
    for value in seen:
        txn, _, index = value.decode().partition(":")
        by_txn.setdefault(int(txn), set()).add(int(index))
    for txn, outcome in sorted(ledger.outcomes.items()):
        found, size = by_txn.get(txn, set()), ledger.sizes[txn]
        if outcome == "committed" and len(found) != size:
            problems.append(f"committed transaction {txn} has {len(found)} of its {size} records")
        if outcome == "aborted" and found:
            problems.append(f"aborted transaction {txn} was read: {sorted(found)}")
        if outcome == "unknown" and found and len(found) != size:
            problems.append(f"transaction {txn} was read in part: {sorted(found)} of {size}")
    return problems


def test_transactions_survive_their_coordinator_and_a_leader_killed(cluster: Cluster) -> None:
    cluster.create_topic(TOPIC, PARTITIONS, 3, **{"min.insync.replicas": "2"})
    ledger = Ledger()
    worker = TransactionalWorker(cluster, ledger)
    worker.start()

    def progress(more: int, timeout: float = 120) -> None:
        target = ledger.committed() + more
        cluster.wait_until(lambda: ledger.committed() >= target or worker.failure is not None,
                           f"{more} more committed transactions", timeout)
        assert worker.failure is None, worker.failure

    try:
        progress(5)
        for _ in range(ROUNDS):
            coordinator = _coordinator(cluster)
            coordinator.kill(signal.SIGKILL)
            progress(5)
            coordinator.start()
            cluster.wait_for_full_isr(TOPIC, PARTITIONS)
            leader = cluster.nodes[cluster.partition(TOPIC, 0)[0]]
            leader.kill(signal.SIGKILL)
            progress(5)
            leader.start()
            cluster.wait_for_full_isr(TOPIC, PARTITIONS)
        progress(3)
    finally:
        worker.stopping.set()
        worker.join(180)
    assert worker.failure is None, worker.failure
    assert not worker.is_alive()
    problems = check(ledger, _read_committed(cluster))
    assert not problems, "\n".join(problems)
    assert ledger.committed() >= 13


@pytest.mark.parametrize(("outcomes", "values", "expected"), [
    ({0: "committed", 1: "aborted"}, [b"0:0"], []),
    ({0: "committed"}, [], ["committed transaction 0 has 0 of its 1 records"]),
    ({0: "committed", 1: "aborted"}, [b"0:0", b"1:0"], ["aborted transaction 1 was read: [0]"]),
    ({2: "unknown"}, [b"2:0"], ["transaction 2 was read in part: [0] of 3"]),
    ({2: "unknown"}, [], []),
    ({0: "committed"}, [b"0:0", b"0:0"], ["b'0:0' read 2 times"]),
])
def test_the_checker(outcomes: dict[int, str], values: list[bytes], expected: list[str]) -> None:
    ledger = Ledger(outcomes=dict(outcomes), sizes={0: 1, 1: 1, 2: 3})
    assert check(ledger, values) == expected
