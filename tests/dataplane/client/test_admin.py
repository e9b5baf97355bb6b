"""The admin client against a real 3-broker cluster: every call, the errors a reconcile loop branches on,
a partition move followed by a preferred leader election, an unreachable cluster, and (on a cluster of
its own) a controller failover.

The shared cluster starts once for the module; each test uses topics and groups of its own.
"""

from __future__ import annotations

import concurrent.futures
import signal
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import pytest

from dataplane.client.admin import (
    AdminError,
    BrokerInfo,
    ClusterAdmin,
    GroupListing,
    NewTopic,
    PartitionInfo,
    PartitionSize,
    overrides,
)
from dataplane.client.wire import Deadline, Wire
from sluice.embedded import free_port
from tests.support.broker import BrokerProcess
from tests.support.polling import wait_until

pytestmark = pytest.mark.xdist_group("heavy")  # many-process tests run one at a time: two cores

T = TypeVar("T")
NODES = (1, 2, 3)


@dataclass
class ClusterBroker(BrokerProcess):
    node_id: int = 1

    def command(self) -> list[str]:
        return [sys.executable, "-m", "sluice", "broker", "--node-id", str(self.node_id), "--listen", self.bootstrap,
                "--data-dir", str(self.data_dir), "--cluster-id", self.cluster_id, "--no-auto-create-topics",
                "--offsets-topic-partitions", "1", "--group-initial-rebalance-delay-ms", "0", *self.extra_args]


@dataclass
class Cluster:
    cluster_id: str
    brokers: dict[int, ClusterBroker]

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers.values())

    def stop(self) -> None:
        for broker in self.brokers.values():
            if broker.proc is not None and broker.proc.poll() is None:
                broker.stop()


def start_cluster(root: Path, nodes: tuple[int, ...], extra_args: list[str] | None = None) -> Cluster:
    """Brokers sharing one cluster id (and the session's Postgres), started together; up once all registered."""
    cluster = Cluster(f"admin-{uuid.uuid4().hex[:10]}", {})
    cluster.brokers = {n: ClusterBroker(root / f"broker-{n}", cluster.cluster_id, extra_args=list(extra_args or []),
                                        node_id=n) for n in nodes}
    try:
        with concurrent.futures.ThreadPoolExecutor(len(nodes)) as pool:
            for started in [pool.submit(b.start) for b in cluster.brokers.values()]:
                started.result()
        # Each broker must know every other one: a client may ask any of them (on a busy machine one broker's
        # view of the others lags the one that answered first).
        for broker in cluster.brokers.values():
            with ClusterAdmin(broker.bootstrap) as admin:
                wait_until(lambda a=admin: (info := answer(a.describe_cluster)) is not None  # type: ignore[misc]
                           and len(info.brokers) == len(nodes), f"broker {broker.node_id} to see every broker")
    except BaseException:
        cluster.stop()
        raise
    return cluster




def answer(call: Callable[[], T]) -> T | None:
    """``call()``, or None while the cluster answers a retriable error (it is still starting)."""
    try:
        return call()
    except AdminError as exc:
        if not exc.retriable:
            raise
        return None


def create(admin: ClusterAdmin, *specs: NewTopic) -> None:
    """Create topics and wait until every partition has a leader."""
    assert admin.create_topics(specs) == {s.name: None for s in specs}
    names = {s.name for s in specs}
    wait_until(lambda: all(t in (topics := admin.topics()) and not any(p.offline for p in topics[t].partitions)
                           for t in names), f"leaders for {sorted(names)}")


def produce(bootstrap: str, topic: str, count: int, *, partition: int = 0, first_ts: int | None = None) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i in range(count):
        producer.produce(topic, value=b"v%d" % i, partition=partition,
                         timestamp=0 if first_ts is None else first_ts + i * 1000)
    assert producer.flush(30) == 0


# ---------------------------------------------------------------------------------------------------- cluster


def test_describe_cluster_names_every_broker_and_the_controller(cluster: Cluster, admin: ClusterAdmin) -> None:
    info = admin.describe_cluster()
    assert info.cluster_id == cluster.cluster_id
    assert info.brokers == tuple(BrokerInfo(n, "127.0.0.1", cluster.brokers[n].port, None) for n in NODES)
    assert info.controller_id in NODES and info.broker(info.controller_id) is not None


def test_topic_lifecycle_create_configure_grow_delete(admin: ClusterAdmin) -> None:
    orders = NewTopic("orders", 3, 2, {"retention.ms": "3600000"})
    laid_out = NewTopic("laid-out", 2, 2, assignments=[[1, 2], [2, 3]])
    assert admin.create_topics([orders, laid_out], validate_only=True) == {"orders": None, "laid-out": None}
    assert "orders" not in admin.topics()
    create(admin, orders, laid_out)

    topics = admin.topics()
    assert [(p.partition, len(p.replicas)) for p in topics["orders"].partitions] == [(0, 2), (1, 2), (2, 2)]
    assert [p.replicas for p in topics["laid-out"].partitions] == [(1, 2), (2, 3)]
    assert topics["orders"].topic_id and not topics["orders"].internal
    assert all(p.leader == p.replicas[0] for p in topics["laid-out"].partitions)

    configs = admin.topic_configs(["orders", "laid-out"])
    assert {k: e.value for k, e in overrides(configs["orders"]).items()} == {"retention.ms": "3600000"}
    assert overrides(configs["laid-out"]) == {}
    policy = configs["orders"]["cleanup.policy"]
    assert (policy.value, policy.is_default, policy.read_only, policy.sensitive) == ("delete", True, False, False)
    assert policy.source == "DEFAULT_CONFIG"

    admin.alter_topic_configs("orders", {"cleanup.policy": "compact"}, delete=["retention.ms"])
    altered = overrides(admin.topic_configs(["orders"])["orders"])
    assert {k: (e.value, e.source) for k, e in altered.items()} == {"cleanup.policy": ("compact",
                                                                                       "DYNAMIC_TOPIC_CONFIG")}

    admin.create_partitions("orders", 4)
    admin.create_partitions("laid-out", 3, assignments=[[3, 1]])
    wait_until(lambda: len((t := admin.topics())["orders"].partitions) == 4
               and len(t["laid-out"].partitions) == 3, "the new partitions")
    assert admin.topics()["laid-out"].partitions[2].replicas == (3, 1)

    assert admin.delete_topics(["orders", "laid-out"]) == {"orders": None, "laid-out": None}
    wait_until(lambda: not {"orders", "laid-out"} & set(admin.topics()), "the topics to go")


def test_creating_existing_and_invalid_topics_fails_per_topic(admin: ClusterAdmin) -> None:
    create(admin, NewTopic("taken", 1, 1))
    results = admin.create_topics([NewTopic("taken", 1, 1), NewTopic("fresh", 1, 1), NewTopic("too-wide", 1, 4)])
    assert results["fresh"] is None
    taken, too_wide = results["taken"], results["too-wide"]
    assert taken is not None and (taken.code, taken.retriable) == ("TOPIC_ALREADY_EXISTS", False)
    assert too_wide is not None and too_wide.code == "INVALID_REPLICATION_FACTOR"
    assert "too-wide" not in admin.topics()
    with pytest.raises(ValueError, match="assignments"):
        NewTopic("uneven", 2, 2, assignments=[[1, 2]])


def test_unknown_topics_are_unknown_topic_or_part(admin: ClusterAdmin) -> None:
    with pytest.raises(AdminError) as described:
        admin.topic_configs(["missing"])
    assert described.value.code == "UNKNOWN_TOPIC_OR_PART" and "missing" in described.value.message
    deleted = admin.delete_topics(["missing"])["missing"]
    assert deleted is not None and deleted.code == "UNKNOWN_TOPIC_OR_PART"
    with pytest.raises(AdminError) as grown:
        admin.create_partitions("missing", 2)
    assert grown.value.code == "UNKNOWN_TOPIC_OR_PART"
    with pytest.raises(AdminError) as altered:
        admin.alter_topic_configs("missing", {"retention.ms": "1000"})
    assert altered.value.code == "UNKNOWN_TOPIC_OR_PART"
    moved = admin.alter_reassignments({("missing", 0): [1]})[("missing", 0)]
    assert moved is not None and moved.code == "UNKNOWN_TOPIC_OR_PART"


# ---------------------------------------------------------------------------------------------------- records


def test_offsets_delete_records_and_partition_sizes(cluster: Cluster, admin: ClusterAdmin) -> None:
    create(admin, NewTopic("events", 1, 3))
    first_ts = 1_700_000_000_000
    produce(cluster.bootstrap, "events", 10, first_ts=first_ts)
    tp = ("events", 0)
    assert admin.offsets([tp], "earliest") == {tp: 0}
    assert admin.offsets([tp], "latest") == {tp: 10}
    assert admin.offsets([tp], first_ts + 4500) == {tp: 5}
    assert admin.offsets([tp], first_ts + 60_000) == {tp: -1}

    sizes = wait_until(lambda: [s for s in admin.partition_sizes() if (s.topic, s.partition) == tp
                                and s.size_bytes > 0 and s.offset_lag == 0], "every replica's data")
    assert sorted(s.broker for s in sizes) == list(NODES)
    assert all(isinstance(s, PartitionSize) for s in sizes)

    assert admin.delete_records({tp: 4}) == {tp: 4}
    assert admin.offsets([tp], "earliest") == {tp: 4}
    assert admin.delete_records({tp: -1}) == {tp: 10}  # -1: up to the high watermark
    with pytest.raises(AdminError) as unknown:
        admin.offsets([("missing", 0)], "latest")
    assert unknown.value.code == "UNKNOWN_TOPIC_OR_PART" and "missing-0" in unknown.value.message
    with pytest.raises(AdminError) as beyond:
        admin.delete_records({("events", 7): 1})
    assert beyond.value.code == "UNKNOWN_TOPIC_OR_PART"


# ---------------------------------------------------------------------------------------------------- replicas


def test_a_reassignment_moves_a_partition_then_the_preferred_leader_is_elected(cluster: Cluster,
                                                                               admin: ClusterAdmin) -> None:
    tp = ("moving", 0)
    create(admin, NewTopic("moving", 1, 2, assignments=[[1, 2]]))
    produce(cluster.bootstrap, "moving", 20)
    assert admin.topics()["moving"].partitions[0].leader == 1

    cancelled = admin.alter_reassignments({tp: None})[tp]
    assert cancelled is not None and cancelled.code == "NO_REASSIGNMENT_IN_PROGRESS"
    doubled = admin.alter_reassignments({tp: [3, 3]})[tp]
    assert doubled is not None and doubled.code == "INVALID_REPLICA_ASSIGNMENT"

    assert admin.alter_reassignments({tp: [3, 1]}) == {tp: None}  # broker 3 joins, broker 2 leaves
    in_progress = admin.list_reassignments().get(tp)
    if in_progress is not None:  # it may already have finished: 20 records are copied quickly
        assert (in_progress.replicas, in_progress.adding, in_progress.removing) == ((3, 1, 2), (3,), (2,))
    wait_until(lambda: not admin.list_reassignments(), "the reassignment to finish")
    moved = wait_until(lambda: p if (p := admin.topics()["moving"].partitions[0]).replicas == (3, 1) else None,
                       "the new replica list")
    assert sorted(moved.isr) == [1, 3] and moved.leader in (1, 3)

    assert admin.elect_preferred_leaders([tp]) == {tp: None}
    led = wait_until(lambda: p if (p := admin.topics()["moving"].partitions[0]).leader == 3 else None,
                     "broker 3 to lead")
    assert led == PartitionInfo(0, 3, (3, 1), led.isr) and not led.under_replicated and not led.offline
    assert admin.elect_preferred_leaders([tp]) == {tp: None}  # ELECTION_NOT_NEEDED is success
    assert all(error is None for error in admin.elect_preferred_leaders().values())
    assert admin.offsets([tp], "latest") == {tp: 20}
    wait_until(lambda: not any(s.broker == 2 for s in admin.partition_sizes() if (s.topic, s.partition) == tp),
               "broker 2's replica to go")


# ---------------------------------------------------------------------------------------------------- groups


def test_groups_describe_commit_and_alter_offsets(cluster: Cluster, admin: ClusterAdmin) -> None:
    from confluent_kafka import Consumer, TopicPartition

    create(admin, NewTopic("clicks", 2, 1))
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "readers", "client.id": "reader-1",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe(["clicks"])
        wait_until(lambda: consumer.poll(0.1) is None and len(consumer.assignment()) == 2, "an assignment")
        consumer.commit(offsets=[TopicPartition("clicks", 0, 3), TopicPartition("clicks", 1, 5)], asynchronous=False)

        assert GroupListing("readers", "Stable", "consumer") in admin.groups()
        group = admin.describe_group("readers")
        assert (group.group_id, group.state, group.protocol) == ("readers", "Stable", "range")
        [member] = group.members
        assert member.client_id == "reader-1" and member.member_id and member.group_instance_id is None
        assert member.assignment == (("clicks", 0), ("clicks", 1))
        assert admin.committed_offsets("readers") == {("clicks", 0): 3, ("clicks", 1): 5}

        with pytest.raises(AdminError) as refused:
            admin.alter_group_offsets("readers", {("clicks", 0): 0})
        assert refused.value.code == "NON_EMPTY_GROUP" and "readers" in refused.value.message
    finally:
        consumer.close()

    assert wait_until(lambda: admin.describe_group("readers").state == "Empty", "the group to empty")
    admin.alter_group_offsets("readers", {("clicks", 0): 0, ("clicks", 1): 1})
    assert admin.committed_offsets("readers") == {("clicks", 0): 0, ("clicks", 1): 1}
    assert GroupListing("readers", "Empty", "consumer") in admin.groups()
    with pytest.raises(AdminError) as unknown:
        admin.describe_group("nobody")
    assert unknown.value.code == "GROUP_ID_NOT_FOUND"

    internal = admin.topics(include_internal=True)["__consumer_offsets"]
    assert internal.internal and "__consumer_offsets" not in admin.topics()


# ---------------------------------------------------------------------------------------------------- failures


def test_an_unreachable_cluster_is_a_retriable_error_within_the_timeout() -> None:
    timeout = 1.0
    with ClusterAdmin(f"127.0.0.1:{free_port()}", timeout=timeout) as admin:
        calls: list[Callable[[], object]] = [admin.describe_cluster, admin.topics, admin.list_reassignments,
                                             lambda: admin.committed_offsets("g")]
        for call in calls:
            started = time.monotonic()
            with pytest.raises(AdminError) as failed:
                call()
            assert failed.value.retriable and failed.value.code in ("_TRANSPORT", "_TIMED_OUT")
            assert time.monotonic() - started < timeout + 1.5
        started = time.monotonic()
        [error] = admin.create_topics([NewTopic("t", 1, 1)]).values()
        assert error is not None and error.retriable and time.monotonic() - started < timeout + 1.5
    with pytest.raises(AdminError) as closed:
        admin.describe_cluster()
    assert closed.value.code == "_DESTROY"


def test_a_refused_socket_connection_is_a_retriable_transport_error() -> None:
    with pytest.raises(AdminError) as refused:
        Wire(BrokerInfo(9, "127.0.0.1", free_port(), None), Deadline(2))
    assert (refused.value.code, refused.value.retriable) == ("_TRANSPORT", True)
    assert "broker 9" in refused.value.message


def test_calls_follow_the_controller_when_it_fails_over(tmp_path: Path) -> None:
    lease_ms = 1500
    cluster = start_cluster(tmp_path, (1, 2), ["--broker-session-timeout-ms", str(lease_ms)])
    try:
        with ClusterAdmin(cluster.bootstrap, timeout=15) as admin:
            old = admin.describe_cluster().controller_id
            cluster.brokers[old].stop(signal.SIGKILL)
            started = time.monotonic()
            # The survivor reports the dead broker (and its controllership) until its lease lapses: ask until
            # the failover shows, within the lease plus a margin.
            while True:
                info = admin.describe_cluster()
                if info.controller_id not in (old, -1) and [b.node_id for b in info.brokers] == [info.controller_id]:
                    break
                assert time.monotonic() - started < 12, f"no failover seen: {info}"
                time.sleep(0.1)
            assert admin.create_topics([NewTopic("after-failover", 1, 1)]) == {"after-failover": None}
            assert admin.list_reassignments() == {}
            # librdkafka notices the new controller at its next metadata refresh, not minutes later.
            assert time.monotonic() - started < 12
    finally:
        cluster.stop()
