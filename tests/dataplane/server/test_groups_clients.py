"""Unmodified client libraries run consumer groups against a real broker process.

Each consumer runs its poll loop in a thread and reports what it receives and what it
is assigned to a shared ``Ledger``; the test waits on the ledger's condition (with a
deadline) for the state it needs, never on a sleep.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.support.broker import BrokerProcess, logged_broker

GROUP_ARGS = ["--group-min-session-timeout-ms", "500", "--group-initial-rebalance-delay-ms", "0",
              "--offsets-topic-partitions", "4"]
CHILD = Path(__file__).with_name("group_member_child.py")


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    process = logged_broker(tmp_path, extra_args=GROUP_ARGS)
    process.start()
    try:
        yield process
    finally:
        process.stop(signal.SIGKILL)


@dataclass
class Ledger:
    """What every consumer received and holds; waiters block on ``changed``."""

    received: dict[bytes, list[str]] = field(default_factory=dict)
    by_partition: dict[int, set[str]] = field(default_factory=dict)
    assignments: dict[str, set[int]] = field(default_factory=dict)
    events: list[tuple[str, str, tuple[int, ...]]] = field(default_factory=list)  # (member, assign|revoke, parts)
    changed: threading.Condition = field(default_factory=threading.Condition)

    def record(self, member: str, partition: int, value: bytes) -> None:
        with self.changed:
            self.received.setdefault(value, []).append(member)
            self.by_partition.setdefault(partition, set()).add(member)
            self.changed.notify_all()

    def assigned(self, member: str, partitions: set[int]) -> None:
        with self.changed:
            self.assignments[member] = set(partitions)
            self.changed.notify_all()

    def event(self, member: str, kind: str, partitions: list[int]) -> None:
        with self.changed:
            self.events.append((member, kind, tuple(sorted(partitions))))
            self.changed.notify_all()

    def wait(self, condition: Callable[[], bool], what: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        with self.changed:
            while not condition():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise AssertionError(f"timed out waiting for {what}: assignments={self.assignments}, "
                                         f"received={len(self.received)}")
                self.changed.wait(min(remaining, 0.5))

    def covered(self, members: set[str], partitions: int) -> bool:
        """Exactly these members hold assignments, and together they hold every partition once."""
        held = [p for m in members for p in self.assignments.get(m, set())]
        return set(self.assignments) >= members and sorted(held) == list(range(partitions)) \
            and all(self.assignments.get(m) for m in members) \
            and not any(self.assignments[m] for m in set(self.assignments) - members)


def create_topic(broker: BrokerProcess, name: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)


def produce(broker: BrokerProcess, topic: str, values: list[bytes]) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    for value in values:
        producer.produce(topic, value=value, key=value)
    assert producer.flush(30) == 0


# ---------------------------------------------------------------------- consumers in threads, one per library


class Member(threading.Thread):
    def __init__(self, name: str, ledger: Ledger) -> None:
        super().__init__(name=name, daemon=True)
        self.ledger = ledger
        self.stop_event = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.consume()
        except BaseException as exc:  # surfaced by close()
            self.error = exc

    def consume(self) -> None:
        raise NotImplementedError

    def close(self) -> None:
        self.stop_event.set()
        self.join(30)
        assert not self.is_alive(), f"{self.name} did not stop"
        if self.error is not None:
            raise self.error


class ConfluentMember(Member):
    def __init__(self, name: str, ledger: Ledger, bootstrap: str, topic: str, group: str,
                 **config: Any) -> None:
        super().__init__(name, ledger)
        self.topic = topic
        self.config = {"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                       "session.timeout.ms": 6000, "heartbeat.interval.ms": 200, "client.id": name, **config}
        self.pause = threading.Event()

    def consume(self) -> None:
        from confluent_kafka import Consumer

        consumer = Consumer(self.config)
        cooperative = self.config.get("partition.assignment.strategy") == "cooperative-sticky"

        def on_assign(c: Any, partitions: list[Any]) -> None:
            self.ledger.event(self.name, "assign", [p.partition for p in partitions])
            current = {p.partition for p in c.assignment()} | {p.partition for p in partitions}
            self.ledger.assigned(self.name, current if cooperative else {p.partition for p in partitions})

        def on_revoke(c: Any, partitions: list[Any]) -> None:
            self.ledger.event(self.name, "revoke", [p.partition for p in partitions])
            gone = {p.partition for p in partitions}
            self.ledger.assigned(self.name, ({p.partition for p in c.assignment()} - gone) if cooperative else set())

        consumer.subscribe([self.topic], on_assign=on_assign, on_revoke=on_revoke)
        try:
            while not self.stop_event.is_set():
                if self.pause.is_set():  # "stuck in processing": no poll, so max.poll.interval.ms runs out
                    self.stop_event.wait(0.1)
                    continue
                message = consumer.poll(0.1)
                if message is None or message.error():
                    continue
                self.ledger.record(self.name, message.partition(), message.value())
        finally:
            consumer.close()


class KafkaPythonMember(Member):
    def __init__(self, name: str, ledger: Ledger, bootstrap: str, topic: str, group: str) -> None:
        super().__init__(name, ledger)
        self.args = (bootstrap, topic, group)

    def consume(self) -> None:
        from kafka import KafkaConsumer

        bootstrap, topic, group = self.args
        consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
                                 session_timeout_ms=6000, heartbeat_interval_ms=200, client_id=self.name)
        # kafka-python's range assignor gives nothing to anyone if the elected leader has no metadata for the
        # topic yet (a client race that shows under load), so know the topic before joining.
        while consumer.partitions_for_topic(topic) is None and not self.stop_event.is_set():
            self.stop_event.wait(0.05)
        consumer.subscribe([topic])
        try:
            while not self.stop_event.is_set():
                batches = consumer.poll(timeout_ms=100)
                self.ledger.assigned(self.name, {tp.partition for tp in consumer.assignment()})
                for tp, records in batches.items():
                    for record in records:
                        self.ledger.record(self.name, tp.partition, record.value)
        finally:
            consumer.close()


class AiokafkaMember(Member):
    def __init__(self, name: str, ledger: Ledger, bootstrap: str, topic: str, group: str) -> None:
        super().__init__(name, ledger)
        self.args = (bootstrap, topic, group)

    def consume(self) -> None:
        asyncio.run(self._consume())

    async def _consume(self) -> None:
        from aiokafka import AIOKafkaConsumer

        bootstrap, topic, group = self.args
        consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
                                    session_timeout_ms=6000, heartbeat_interval_ms=200, client_id=self.name)
        await consumer.start()
        try:
            while not self.stop_event.is_set():
                batches = await consumer.getmany(timeout_ms=100)
                self.ledger.assigned(self.name, {tp.partition for tp in consumer.assignment()})
                for tp, records in batches.items():
                    for record in records:
                        self.ledger.record(self.name, tp.partition, record.value)
        finally:
            await consumer.stop()


LIBRARIES: dict[str, type[Member]] = {"confluent-kafka": ConfluentMember, "kafka-python": KafkaPythonMember,
                                      "aiokafka": AiokafkaMember}


@pytest.mark.parametrize("library", list(LIBRARIES))
def test_three_consumers_split_six_partitions_and_read_every_record_once(broker: BrokerProcess,
                                                                          library: str) -> None:
    create_topic(broker, "orders", 6)
    ledger = Ledger()
    members = [LIBRARIES[library](f"m{i}", ledger, broker.bootstrap, "orders", "split")  # type: ignore[call-arg]
               for i in range(3)]
    for member in members:
        member.start()
    try:
        names = {m.name for m in members}
        ledger.wait(lambda: ledger.covered(names, 6), "three members to hold all six partitions")
        assert sorted(len(ledger.assignments[n]) for n in names) == [2, 2, 2]
        values = [b"v%d" % i for i in range(3000)]
        produce(broker, "orders", values)
        ledger.wait(lambda: len(ledger.received) == len(values), "every record")
    finally:
        for member in members:
            member.close()
    assert set(ledger.received) == set(values)
    assert {v: n for v, n in ledger.received.items() if len(n) != 1} == {}, "a record was consumed twice"
    assert all(len(readers) == 1 for readers in ledger.by_partition.values())
    assert set(ledger.by_partition) == set(range(6))


def test_two_groups_each_receive_every_record_and_offset_reset_applies_without_a_commit(
        broker: BrokerProcess) -> None:
    create_topic(broker, "news", 3)
    produce(broker, "news", [b"old-%d" % i for i in range(30)])
    ledger_a, ledger_b, ledger_latest = Ledger(), Ledger(), Ledger()
    a = ConfluentMember("a", ledger_a, broker.bootstrap, "news", "readers-a")
    b = KafkaPythonMember("b", ledger_b, broker.bootstrap, "news", "readers-b")
    latest = ConfluentMember("late", ledger_latest, broker.bootstrap, "news", "latest",
                             **{"auto.offset.reset": "latest"})
    for member in (a, b, latest):
        member.start()
    try:
        ledger_latest.wait(lambda: ledger_latest.covered({"late"}, 3), "the latest group's assignment")
        ledger_a.wait(lambda: len(ledger_a.received) == 30, "group a: the old records (earliest)")
        ledger_b.wait(lambda: len(ledger_b.received) == 30, "group b: the old records (earliest)")
        # "latest" starts at the end once its position is fetched; the first fetch has happened when a
        # record produced now arrives, so produce until one does, then the rest.
        deadline = time.monotonic() + 30
        probe = 0
        while not ledger_latest.received:
            produce(broker, "news", [b"probe-%d" % probe])
            probe += 1
            with ledger_latest.changed:
                ledger_latest.changed.wait(0.5)
            assert time.monotonic() < deadline
        produce(broker, "news", [b"new-%d" % i for i in range(30)])
        total = 60 + probe
        for ledger in (ledger_a, ledger_b):
            ledger.wait(lambda ledger=ledger: len(ledger.received) == total, "every record in each group")
        ledger_latest.wait(lambda: sum(v.startswith(b"new-") for v in ledger_latest.received) == 30, "new records")
    finally:
        for member in (a, b, latest):
            member.close()
    assert not any(v.startswith(b"old-") for v in ledger_latest.received)


def test_commit_close_and_restart_resumes_at_the_committed_offset(broker: BrokerProcess) -> None:
    from confluent_kafka import Consumer, TopicPartition

    create_topic(broker, "jobs", 1)
    produce(broker, "jobs", [b"%d" % i for i in range(100)])
    config = {"bootstrap.servers": broker.bootstrap, "group.id": "workers", "enable.auto.commit": False,
              "auto.offset.reset": "earliest"}

    def read(count: int) -> list[int]:
        consumer = Consumer(config)
        consumer.subscribe(["jobs"])
        got: list[int] = []
        deadline = time.monotonic() + 30
        while len(got) < count:
            assert time.monotonic() < deadline
            message = consumer.poll(0.2)
            if message is not None and not message.error():
                got.append(int(message.value()))
                if len(got) == count:
                    consumer.commit(message=message, asynchronous=False)
        consumer.close()
        return got

    assert read(40) == list(range(40))
    assert read(35) == list(range(40, 75))  # no redelivery, no gap
    consumer = Consumer(config)
    committed = consumer.committed([TopicPartition("jobs", 0)], timeout=10)
    consumer.close()
    assert committed[0].offset == 75


def test_a_killed_consumer_s_partitions_move_and_no_record_is_skipped(broker: BrokerProcess, tmp_path: Path) -> None:
    create_topic(broker, "work", 6)
    values = [b"w%d" % i for i in range(2000)]
    ledger = Ledger()
    survivor = ConfluentMember("survivor", ledger, broker.bootstrap, "work", "crew",
                               **{"enable.auto.commit": False, "session.timeout.ms": 2000})
    survivor.start()
    ledger.wait(lambda: ledger.covered({"survivor"}, 6), "the survivor's first assignment")
    out = tmp_path / "child.out"
    with out.open("w") as sink:
        child = subprocess.Popen([sys.executable, str(CHILD), broker.bootstrap, "work", "crew"], stdout=sink,
                                 stderr=subprocess.STDOUT, start_new_session=True)
    try:
        ledger.wait(lambda: len(ledger.assignments.get("survivor", ())) == 3, "the child to take half")
        produce(broker, "work", values)

        def child_lines() -> list[str]:
            return out.read_text().splitlines()
        deadline = time.monotonic() + 30
        while sum(line.startswith("got ") for line in child_lines()) < 200:  # the child is mid-stream
            assert time.monotonic() < deadline, child_lines()[-5:]
            with ledger.changed:
                ledger.changed.wait(0.1)
        os.killpg(child.pid, signal.SIGKILL)
        child.wait(10)
        ledger.wait(lambda: ledger.covered({"survivor"}, 6), "the killed member's partitions to move", timeout=30)
        processed = [line.split(" ") for line in child_lines() if line.startswith("got ")]
        child_values = {value.encode() for _, _, value in processed}
        last_per_partition = {partition: value.encode() for _, partition, value in processed}
        ledger.wait(lambda: set(ledger.received) | child_values >= set(values), "every record processed once")
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
        survivor.close()
    assert set(ledger.received) | child_values == set(values)
    # The child commits after each record it prints, so only its last record per partition can come again.
    assert set(ledger.received) & child_values <= set(last_per_partition.values())
    assert len(child_values) >= 200 and len(set(ledger.received) - child_values) > 0


def test_a_consumer_stuck_past_max_poll_interval_is_removed_and_its_partitions_reassigned(
        broker: BrokerProcess) -> None:
    create_topic(broker, "slow", 4)
    ledger = Ledger()
    config = {"max.poll.interval.ms": 2000, "session.timeout.ms": 2000}
    stuck = ConfluentMember("stuck", ledger, broker.bootstrap, "slow", "pollers", **config)
    healthy = ConfluentMember("healthy", ledger, broker.bootstrap, "slow", "pollers", **config)
    for member in (stuck, healthy):
        member.start()
    try:
        ledger.wait(lambda: ledger.covered({"stuck", "healthy"}, 4), "two members sharing four partitions")
        stuck.pause.set()
        # The stuck member cannot see its own revocation (callbacks run inside poll): the healthy one's view counts.
        ledger.wait(lambda: ledger.assignments.get("healthy") == set(range(4)), "the stuck member's partitions to move",
                    timeout=30)
        produce(broker, "slow", [b"s%d" % i for i in range(100)])
        ledger.wait(lambda: len(ledger.received) == 100, "the healthy member to read all partitions")
        assert set(ledger.by_partition) == set(range(4)) and all(r == {"healthy"} for r in ledger.by_partition.values())
    finally:
        stuck.pause.clear()
        for member in (stuck, healthy):
            member.close()


def test_cooperative_sticky_never_revokes_a_partition_that_stays(broker: BrokerProcess) -> None:
    create_topic(broker, "coop", 6)
    ledger = Ledger()
    config = {"partition.assignment.strategy": "cooperative-sticky"}
    first = [ConfluentMember(f"c{i}", ledger, broker.bootstrap, "coop", "coop-group", **config) for i in range(2)]
    for member in first:
        member.start()
    third = ConfluentMember("c2", ledger, broker.bootstrap, "coop", "coop-group", **config)
    try:
        ledger.wait(lambda: ledger.covered({"c0", "c1"}, 6), "two members sharing six partitions")
        before = {name: set(parts) for name, parts in ledger.assignments.items()}
        with ledger.changed:
            mark = len(ledger.events)
        third.start()
        # Cooperative rebalancing moves partitions over several rounds (a member may hold 1, 2 and 3 on the way):
        # the settled state is two each.
        ledger.wait(lambda: ledger.covered({"c0", "c1", "c2"}, 6) and
                    all(len(ledger.assignments[n]) == 2 for n in ("c0", "c1", "c2")),
                    "three members holding two partitions each")
        after = {name: set(parts) for name, parts in ledger.assignments.items()}
        with ledger.changed:
            later = ledger.events[mark:]
    finally:
        for member in (*first, third):
            member.close()
    assert sorted(len(after[n]) for n in ("c0", "c1", "c2")) == [2, 2, 2]
    for name in ("c0", "c1"):
        revoked = {p for member, kind, parts in later if member == name and kind == "revoke" for p in parts}
        kept = before[name] & after[name]
        assert kept and not (revoked & kept), f"{name} had {kept} revoked although it kept them"
        assert revoked == before[name] - after[name]


def test_a_static_member_restarting_within_its_session_causes_no_rebalance(broker: BrokerProcess) -> None:
    from confluent_kafka.admin import AdminClient

    create_topic(broker, "static", 4)
    ledger = Ledger()
    config = {"session.timeout.ms": 15000}
    steady = ConfluentMember("steady", ledger, broker.bootstrap, "static", "statics",
                             **{**config, "group.instance.id": "steady-1"})
    bouncing = ConfluentMember("bouncing", ledger, broker.bootstrap, "static", "statics",
                               **{**config, "group.instance.id": "bouncing-1"})
    for member in (steady, bouncing):
        member.start()
    try:
        ledger.wait(lambda: ledger.covered({"steady", "bouncing"}, 4), "two static members sharing four partitions")
        owned = set(ledger.assignments["bouncing"])
        with ledger.changed:
            steady_events = [e for e in ledger.events if e[0] == "steady"]
        bouncing.close()  # static members do not send LeaveGroup
        ledger.assignments.pop("bouncing")
        restarted = ConfluentMember("bouncing", ledger, broker.bootstrap, "static", "statics",
                                    **{**config, "group.instance.id": "bouncing-1"})
        restarted.start()
        ledger.wait(lambda: ledger.assignments.get("bouncing") == owned, "the restarted member's old partitions")
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        description = admin.describe_consumer_groups(["statics"])["statics"].result(10)
        assert description.state.name == "STABLE" and len(description.members) == 2
        with ledger.changed:
            assert [e for e in ledger.events if e[0] == "steady"] == steady_events, "the steady member rebalanced"
    finally:
        steady.close()
        restarted.close()


def test_admin_lists_describes_and_deletes_groups_and_offsets(broker: BrokerProcess) -> None:
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import AdminClient
    from kafka import KafkaConsumer
    from kafka.admin import KafkaAdminClient
    from kafka.structs import OffsetAndMetadata
    from kafka.structs import TopicPartition as KafkaTopicPartition

    create_topic(broker, "audit", 2)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    offsets = [TopicPartition("audit", 0, 5), TopicPartition("audit", 1, 9)]
    admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions("archived", offsets)])["archived"].result(10)
    listed = admin.list_consumer_groups().result(10)
    assert "archived" in {g.group_id for g in listed.valid}
    fetched = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions("archived")])["archived"].result(10)
    assert {(tp.partition, tp.offset) for tp in fetched.topic_partitions} == {(0, 5), (1, 9)}
    committer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id="annotated", enable_auto_commit=False)
    committer.commit({KafkaTopicPartition("audit", 0): OffsetAndMetadata(3, "note", -1)})  # outside group management
    committer.close()
    kp_admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        both = kp_admin.list_group_offsets(["annotated", "archived"])  # batched OffsetFetch (v8+)
        assert both["annotated"][KafkaTopicPartition("audit", 0)] == OffsetAndMetadata(3, "note", -1)
        assert both["archived"][KafkaTopicPartition("audit", 1)].offset == 9
        deleted = kp_admin.delete_group_offsets("archived", [KafkaTopicPartition("audit", 1)])
        assert [error.errno for error in deleted.values()] == [0]
        assert set(kp_admin.list_group_offsets("archived")["archived"]) == {KafkaTopicPartition("audit", 0)}
    finally:
        kp_admin.close()
    admin.delete_consumer_groups(["archived"])["archived"].result(10)
    assert "archived" not in {g.group_id for g in admin.list_consumer_groups().result(10).valid}
