"""A 3-broker cluster's answers, request by request: metadata, leader epochs, min.insync.replicas,
the high watermark, preferred election and rack-aware placement.

Requests go to a broker's own port (not its proxy), so cutting a broker's proxy
cuts replication to it while these clients still reach it.
"""

from __future__ import annotations

import datetime
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import ElectionType, TopicPartition
from kio.schema.describe_cluster.v1.request import DescribeClusterRequest
from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.list_offsets.v7.request import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic
from kio.schema.offset_for_leader_epoch.v4.request import (
    OffsetForLeaderEpochRequest,
    OffsetForLeaderPartition,
    OffsetForLeaderTopic,
)
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.schema.types import BrokerId, TopicName
from kio.static.primitive import i8, i16, i32, i32Timedelta, i64

from dataplane.protocol.records import Record, build_batch
from tests.chaos.cluster import Cluster, Node, replica_logs
from tests.support import wire as kafka_wire

pytestmark = pytest.mark.xdist_group("heavy")  # many-process tests run one at a time: two cores

NONE, NOT_LEADER, TIMED_OUT, NOT_ENOUGH_REPLICAS, FENCED, UNKNOWN_EPOCH = 0, 6, 7, 19, 74, 75


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    # A long lag time: a follower cut off stays in the ISR for the whole test unless its lease lapses.
    found = Cluster(tmp_path, lag_ms=60_000, racks=["east", "west", "north"])
    try:
        found.start()
        yield found
    finally:
        found.stop()


def call(node: Node, request: Any, version: int) -> Any:
    return kafka_wire.call(node.port, request, version)


def produce(node: Node, topic: str, acks: int, value: bytes, timeout_ms: int = 30_000) -> tuple[int, int]:
    data = PartitionProduceData(index=i32(0), records=build_batch([Record(0, 0, None, value)]))
    response = call(node, ProduceRequest(
        transactional_id=None, acks=i16(acks), timeout=i32Timedelta.parse(datetime.timedelta(milliseconds=timeout_ms)),
        topic_data=(TopicProduceData(name=TopicName(topic), partition_data=(data,)),)), 9)
    part = response.responses[0].partition_responses[0]
    return int(part.error_code.value), int(part.base_offset)


def produce_v12(node: Node, topic: str, value: bytes) -> Any:
    from kio.schema.produce.v12.request import PartitionProduceData as Data12
    from kio.schema.produce.v12.request import ProduceRequest as Produce12
    from kio.schema.produce.v12.request import TopicProduceData as Topic12

    return call(node, Produce12(
        transactional_id=None, acks=i16(1), timeout=i32Timedelta.parse(datetime.timedelta(seconds=10)),
        topic_data=(Topic12(name=TopicName(topic), partition_data=(
            Data12(index=i32(0), records=build_batch([Record(0, 0, None, value)])),)),)), 12)


def fetch(node: Node, topic: str, offset: int, epoch: int = -1) -> tuple[int, int, bytes]:
    response = call(node, FetchRequest(
        cluster_id=None, replica_id=BrokerId(-1), max_wait=i32Timedelta.parse(datetime.timedelta(0)),
        min_bytes=i32(0), max_bytes=i32(1 << 20), isolation_level=i8(0), session_id=i32(0), session_epoch=i32(-1),
        topics=(FetchTopic(topic=TopicName(topic), partitions=(FetchPartition(
            partition=i32(0), current_leader_epoch=i32(epoch), fetch_offset=i64(offset), last_fetched_epoch=i32(-1),
            log_start_offset=i64(-1), partition_max_bytes=i32(1 << 20)),)),),
        forgotten_topics_data=(), rack_id=""), 12)
    part = response.responses[0].partitions[0]
    return int(part.error_code.value), int(part.high_watermark), bytes(part.records or b"")


def latest(node: Node, topic: str) -> int:
    return latest_and_epoch(node, topic)[0]


def latest_and_epoch(node: Node, topic: str) -> tuple[int, int]:
    """ListOffsets(latest): the high watermark, and the leader epoch it was read at."""
    response = call(node, ListOffsetsRequest(replica_id=BrokerId(-1), isolation_level=i8(0), topics=(
        ListOffsetsTopic(name=TopicName(topic), partitions=(ListOffsetsPartition(
            partition_index=i32(0), current_leader_epoch=i32(-1), timestamp=i64(-1)),)),)), 7)
    part = response.topics[0].partitions[0]
    return int(part.offset), int(part.leader_epoch)


def leader_and_epoch(cluster: Cluster, topic: str) -> tuple[Node, int]:
    """The partition's leader as the metadata names it, once that broker answers as the leader.

    Right after a failover one broker's metadata cache may still name the dead leader for a moment, and the named
    new leader may not have taken leadership yet (it answers NOT_LEADER, epoch -1): each broker refreshes on its
    own NOTIFY. Asking either too early would be a test race, not a finding.
    """
    found: list[tuple[Node, int]] = []

    def live_leader() -> bool:
        node = cluster.nodes.get(cluster.metadata().topics[topic].partitions[0].leader)
        if node is None or not node.running:
            return False
        epoch = latest_and_epoch(node, topic)[1]
        found[:] = [(node, epoch)] if epoch >= 0 else []
        return bool(found)

    cluster.wait_until(live_leader, f"a running leader of {topic} that answers as its leader")
    return found[0]


def offsets_for_epoch(node: Node, topic: str, current: int, epoch: int) -> tuple[int, int, int]:
    response = call(node, OffsetForLeaderEpochRequest(replica_id=BrokerId(-1), topics=(OffsetForLeaderTopic(
        topic=TopicName(topic), partitions=(OffsetForLeaderPartition(
            partition=i32(0), current_leader_epoch=i32(current), leader_epoch=i32(epoch)),)),)), 4)
    part = response.topics[0].partitions[0]
    return int(part.error_code.value), int(part.leader_epoch), int(part.end_offset)


def test_rack_aware_placement_and_metadata(cluster: Cluster) -> None:
    cluster.create_topic("spread", 6, 3)
    partitions = cluster.metadata().topics["spread"].partitions.values()
    assert all(sorted(p.replicas) == [1, 2, 3] and sorted(p.isrs) == [1, 2, 3] for p in partitions)
    leaders = [p.leader for p in partitions]
    assert sorted(leaders) == [1, 1, 2, 2, 3, 3]  # leaders spread evenly
    # Every broker answers from one metadata cache: DescribeCluster agrees with Metadata, on every broker.
    controller = cluster.metadata().controller_id
    for node in cluster.nodes.values():
        described = call(node, DescribeClusterRequest(include_cluster_authorized_operations=False,
                                                      endpoint_type=i8(1)), 1)
        assert int(described.error_code.value) == NONE
        assert sorted(int(b.broker_id) for b in described.brokers) == [1, 2, 3]
        assert {int(b.broker_id): b.rack for b in described.brokers} == {1: "east", 2: "west", 3: "north"}
        assert int(described.controller_id) == controller
        assert cluster.metadata(node).controller_id == controller


def test_epochs_fence_stale_clients_and_followers_refuse_leader_work(cluster: Cluster) -> None:
    cluster.create_topic("epochs", 1, 3)
    leader, _ = leader_and_epoch(cluster, "epochs")
    assert produce(leader, "epochs", -1, b"first")[0] == NONE
    leader.kill(signal.SIGKILL)
    cluster.wait_until(lambda: cluster.partition("epochs")[0] not in (-1, leader.node_id), "failover")
    new_leader, epoch = leader_and_epoch(cluster, "epochs")
    assert epoch >= 1
    follower = next(n for n in cluster.nodes.values() if n.running and n is not new_leader)
    assert produce(follower, "epochs", -1, b"x")[0] == NOT_LEADER
    # KIP-951 (Produce v10+): the refusal names the leader and how to reach it.
    hinted = produce_v12(follower, "epochs", b"x")
    assert int(hinted.responses[0].partition_responses[0].error_code.value) == NOT_LEADER
    current = hinted.responses[0].partition_responses[0].current_leader
    assert (int(current.leader_id), int(current.leader_epoch)) == (new_leader.node_id, epoch)
    assert [(int(e.node_id), f"{e.host}:{int(e.port)}") for e in hinted.node_endpoints] == \
        [(new_leader.node_id, new_leader.address)]  # the address it advertises
    assert fetch(follower, "epochs", 0)[0] == NOT_LEADER
    assert fetch(new_leader, "epochs", 0, epoch - 1)[0] == FENCED
    assert fetch(new_leader, "epochs", 0, epoch + 1)[0] == UNKNOWN_EPOCH
    # A new leader's high watermark catches up once the remaining follower fetches from it.
    cluster.wait_until(lambda: fetch(new_leader, "epochs", 0, epoch)[1] == 1, "the new leader's high watermark")
    error, hw, records = fetch(new_leader, "epochs", 0, epoch)
    assert error == NONE and hw == 1 and b"first" in records
    assert produce(new_leader, "epochs", -1, b"second") == (NONE, 1)
    # Epoch 0 ended where the new leader's epoch began (KIP-101's answer for a follower of the old leader).
    assert offsets_for_epoch(new_leader, "epochs", epoch, 0)[1:] == (0, 1)
    assert offsets_for_epoch(new_leader, "epochs", epoch - 1, 0)[0] == FENCED
    leader.start()
    cluster.wait_for_full_isr("epochs")


def test_min_insync_replicas_and_the_high_watermark(cluster: Cluster) -> None:
    cluster.create_topic("durable", 1, 3, **{"min.insync.replicas": "2"})
    leader, _ = leader_and_epoch(cluster, "durable")
    followers = [n for n in cluster.nodes.values() if n is not leader]
    assert produce(leader, "durable", -1, b"a") == (NONE, 0)
    # Followers cannot fetch (the leader's proxy is cut) but stay in the ISR: writes wait for them.
    assert leader.proxy is not None
    leader.proxy.cut()
    error, offset = produce(leader, "durable", 1, b"b")
    assert (error, offset) == (NONE, 1)
    assert latest(leader, "durable") == 1                  # consumers see only the high watermark ...
    assert fetch(leader, "durable", 1)[1:] == (1, b"")     # ... and nothing above it
    assert produce(leader, "durable", -1, b"c", timeout_ms=500)[0] == TIMED_OUT
    leader.proxy.heal()
    cluster.wait_until(lambda: latest(leader, "durable") == 3, "the high watermark to catch up")
    # Both followers paused past their lease: the controller takes them out of the ISR.
    for follower in followers:
        follower.send_signal(signal.SIGSTOP)
    try:
        cluster.wait_until(lambda: cluster.partition("durable", via=leader)[2] == [leader.node_id], "ISR = leader")
        assert produce(leader, "durable", -1, b"d")[0] == NOT_ENOUGH_REPLICAS
        assert produce(leader, "durable", 1, b"e")[0] == NONE  # acks=1 does not need the ISR
    finally:
        for follower in followers:
            follower.send_signal(signal.SIGCONT)
    cluster.wait_for_full_isr("durable")
    assert produce(leader, "durable", -1, b"f")[0] == NONE


def test_preferred_leader_election_moves_leadership_back(cluster: Cluster) -> None:
    cluster.create_topic("preferred", 1, 3)
    preferred_id = cluster.metadata().topics["preferred"].partitions[0].replicas[0]
    preferred = cluster.nodes[preferred_id]
    preferred.kill(signal.SIGTERM)
    cluster.wait_until(lambda: cluster.partition("preferred")[0] not in (-1, preferred_id), "failover")
    preferred.start()
    cluster.wait_for_full_isr("preferred")
    assert cluster.partition("preferred")[0] != preferred_id
    admin = cluster.admin()
    admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition("preferred", 0)]).result(30)
    cluster.wait_until(lambda: cluster.partition("preferred")[0] == preferred_id, "the preferred leader")
    again = admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition("preferred", 0)]).result(30)
    [error] = again.values()
    assert error is not None and "not needed" in str(error).lower().replace("_", " ")


def reassign(node: Node, topic: str, replicas: list[int] | None) -> tuple[int, int]:
    """(top-level error, partition error) of AlterPartitionReassignments for partition 0."""
    from kio.schema.alter_partition_reassignments.v0.request import (
        AlterPartitionReassignmentsRequest,
        ReassignablePartition,
        ReassignableTopic,
    )
    wanted = None if replicas is None else tuple(BrokerId(r) for r in replicas)
    response = call(node, AlterPartitionReassignmentsRequest(
        timeout=i32Timedelta.parse(datetime.timedelta(seconds=30)), topics=(ReassignableTopic(
            name=TopicName(topic), partitions=(ReassignablePartition(partition_index=i32(0), replicas=wanted),)),)),
        0)
    if response.error_code.value:
        return int(response.error_code.value), -1
    return 0, int(response.responses[0].partitions[0].error_code.value)


def reassignments(node: Node) -> list[tuple[str, int, list[int], list[int], list[int]]]:
    from kio.schema.list_partition_reassignments.v0.request import ListPartitionReassignmentsRequest
    response = call(node, ListPartitionReassignmentsRequest(
        timeout=i32Timedelta.parse(datetime.timedelta(seconds=30)), topics=None), 0)
    return [(str(t.name), int(p.partition_index), list(p.replicas), list(p.adding_replicas),
             list(p.removing_replicas)) for t in response.topics for p in t.partitions]


def test_partition_reassignment_moves_replicas_and_leadership(cluster: Cluster) -> None:
    cluster.create_topic("moving", 1, 2)
    leader_id, replicas, _ = cluster.partition("moving")
    leader = cluster.nodes[leader_id]
    for i in range(20):
        assert produce(leader, "moving", -1, f"v{i}".encode())[0] == NONE
    spare = next(n for n in cluster.nodes if n not in replicas)
    target = [spare, next(r for r in replicas if r != leader_id)]  # the leader leaves
    controller = cluster.nodes[cluster.metadata().controller_id]
    not_controller = next(n for n in cluster.nodes.values() if n is not controller)
    assert reassign(not_controller, "moving", target)[0] == 41          # NOT_CONTROLLER
    assert reassign(controller, "moving", [spare, spare]) == (0, 39)    # INVALID_REPLICA_ASSIGNMENT
    assert reassign(controller, "moving", None) == (0, 85)              # NO_REASSIGNMENT_IN_PROGRESS
    assert reassign(controller, "moving", target) == (0, 0)
    cluster.wait_until(lambda: sorted(cluster.partition("moving")[1]) == sorted(target)
                       and sorted(cluster.partition("moving")[2]) == sorted(target), "the move to finish")
    assert reassignments(controller) == []
    new_leader = cluster.nodes[cluster.partition("moving")[0]]
    assert new_leader.node_id in target
    cluster.wait_until(lambda: fetch(new_leader, "moving", 0)[1] == 20, "the new leader's high watermark")
    error, hw, records = fetch(new_leader, "moving", 0)
    assert error == NONE and hw == 20 and b"v0" in records and b"v19" in records
    cluster.wait_until(lambda: not (leader.data_dir / "moving-0").exists(), "the old replica's log to go")


def test_a_group_survives_the_loss_of_its_coordinator(cluster: Cluster) -> None:
    from confluent_kafka import Consumer, Producer

    from dataplane.coordinator.records import partition_for_group
    from tests.chaos.cluster import QUIET

    cluster.create_topic("orders", 1, 3, **{"min.insync.replicas": "2"})
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", **QUIET})
    for i in range(100):
        producer.produce("orders", f"o{i}".encode(), partition=0)
    assert producer.flush(30) == 0

    def consumer() -> Consumer:
        found = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "billing",
                          "auto.offset.reset": "earliest", "enable.auto.commit": False, "session.timeout.ms": 6000,
                          **QUIET})
        found.subscribe(["orders"])
        return found

    def read(c: Consumer, count: int) -> list[str]:
        got: list[str] = []
        cluster.wait_until(lambda: got.extend(m.value().decode() for m in c.consume(count - len(got), 0.5)
                                              if m.error() is None) or len(got) >= count, f"{count} records")
        return got

    first = consumer()
    assert read(first, 60) == [f"o{i}" for i in range(60)]
    first.commit(asynchronous=False)
    first.close()
    offsets_partition = partition_for_group("billing", 3)
    coordinator = cluster.nodes[cluster.partition("__consumer_offsets", offsets_partition)[0]]
    coordinator.kill(signal.SIGKILL)
    cluster.wait_until(lambda: cluster.partition("__consumer_offsets", offsets_partition)[0]
                       not in (-1, coordinator.node_id), "a new coordinator")
    second = consumer()
    try:
        assert read(second, 40) == [f"o{i}" for i in range(60, 100)]  # resumes at the committed offset
    finally:
        second.close()


def test_a_waiting_acks_all_produce_does_not_hold_up_the_connection_and_answers_stay_in_order(
        cluster: Cluster) -> None:
    import socket

    from kio.schema.metadata.v9.request import MetadataRequest

    cluster.create_topic("ordered", 1, 3, **{"min.insync.replicas": "2"})
    leader, epoch = leader_and_epoch(cluster, "ordered")
    assert leader.proxy is not None

    def log_end() -> int:  # OffsetForLeaderEpoch for the current epoch answers the leader's log end
        return offsets_for_epoch(leader, "ordered", epoch, epoch)[2]
    start = log_end()
    leader.proxy.cut()  # followers cannot fetch: an acks=all write waits until its timeout

    def produce_request(acks: int, value: bytes, timeout_ms: int) -> ProduceRequest:
        data = PartitionProduceData(index=i32(0), records=build_batch([Record(0, 0, None, value)]))
        return ProduceRequest(transactional_id=None, acks=i16(acks), timeout=i32Timedelta.parse(
            datetime.timedelta(milliseconds=timeout_ms)), topic_data=(TopicProduceData(
                name=TopicName("ordered"), partition_data=(data,)),))

    with kafka_wire.KafkaWire(leader.port, client_id="pipeline-test") as wire:
        assert wire.send(produce_request(-1, b"slow", 3_000), produce_request(1, b"fast", 3_000),
                         MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                         include_cluster_authorized_operations=False,
                                         include_topic_authorized_operations=False)) == [1, 2, 3]
        # The second write is in the log while the first still waits for the ISR, and nothing is answered yet.
        cluster.wait_until(lambda: log_end() == start + 2, "both writes appended")
        wire.sock.setblocking(False)  # a socket with a timeout would wait out MSG_DONTWAIT
        with pytest.raises(BlockingIOError):
            wire.sock.recv(1, socket.MSG_PEEK)
        wire.sock.settimeout(30)
        responses = wire.receive(3)
    answers = [(r.correlation_id, r.body) for r in responses]
    assert [cid for cid, _ in answers] == [1, 2, 3]  # in request order, though the first waited longest
    slow = answers[0][1].responses[0].partition_responses[0]
    fast = answers[1][1].responses[0].partition_responses[0]
    assert int(slow.error_code.value) == TIMED_OUT and int(fast.error_code.value) == NONE
    assert int(fast.base_offset) == int(slow.base_offset) + 1  # appended in request order
    leader.proxy.heal()


def test_a_deleted_topic_leaves_no_data_on_any_replica(cluster: Cluster) -> None:
    """Deleted through one broker, gone from all three: the topic created again under its name starts empty."""
    cluster.create_topic("again", 1, 3)
    leader, _ = leader_and_epoch(cluster, "again")
    assert produce(leader, "again", -1, b"old") == (NONE, 0)
    cluster.wait_until(lambda: all(replica_logs(cluster, "again")[n] for n in cluster.nodes), "every replica")
    admin = cluster.admin(cluster.nodes[1].address)  # kept referenced: a collected client fails its futures
    for future in admin.delete_topics(["again"]).values():
        future.result(30)
    cluster.wait_until(lambda: all(not (n.data_dir / "again-0").exists() for n in cluster.nodes.values()),
                       "every replica's directory removed")
    cluster.create_topic("again", 1, 3)
    leader, _ = leader_and_epoch(cluster, "again")
    assert latest(leader, "again") == 0
    assert produce(leader, "again", -1, b"new") == (NONE, 0)
    cluster.wait_until(lambda: all(len(replica_logs(cluster, "again")[n]) == 1 for n in cluster.nodes),
                       "the new record on every replica, and nothing else")
