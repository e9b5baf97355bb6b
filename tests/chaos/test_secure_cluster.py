"""A 3-broker replicated cluster with SASL and ACLs on keeps replicating and failing over.

Brokers authenticate to each other with the cluster's broker credential (SCRAM-SHA-512)
and fetch as replicas under CLUSTER_ACTION; a client producing and consuming as an
ordinary principal through ACLs sees every acknowledged write after the leader is killed.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from tests.chaos.cluster import QUIET, Cluster
from tests.dataplane.server.test_security import USERS, sasl_config_file, seed_credentials

pytestmark = pytest.mark.xdist_group("heavy")  # many-process tests run one at a time: two cores


def sasl(user: str, mechanism: str = "SCRAM-SHA-256") -> dict[str, str]:
    return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mechanism, "sasl.username": user,
            "sasl.password": USERS[user]}


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    found = Cluster(tmp_path, extra_args=["--config", str(sasl_config_file(tmp_path))], client_config=sasl("admin"))
    seed_credentials(found.cluster_id)
    try:
        found.start()
        yield found
    finally:
        found.stop()


def test_replication_and_failover_with_sasl_and_acls(cluster: Cluster) -> None:
    cluster.create_topic("secured", 1, 3, **{"min.insync.replicas": "2"})
    admin = cluster.admin()
    acls = [AclBinding(ResourceType.TOPIC, "secured", ResourcePatternType.LITERAL, "User:alice", "*", op,
                       AclPermissionType.ALLOW) for op in (AclOperation.WRITE, AclOperation.READ)]
    acls.append(AclBinding(ResourceType.GROUP, "readers", ResourcePatternType.LITERAL, "User:alice", "*",
                           AclOperation.READ, AclPermissionType.ALLOW))
    for future in admin.create_acls(acls).values():
        future.result(30)
    for node in cluster.nodes.values():  # every broker has heard of the ACLs (NOTIFY): alice may describe the topic
        alice = AdminClient({"bootstrap.servers": node.address, **sasl("alice"), **QUIET})
        cluster.wait_until(lambda a=alice: "secured" in a.list_topics(timeout=10).topics,
                           f"broker {node.node_id} to apply the ACLs")

    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "enable.idempotence": True,
                         **sasl("alice", "PLAIN"), **QUIET})
    failures: list[object] = []

    def produce(values: range) -> None:
        for i in values:
            producer.produce("secured", str(i).encode(),
                             on_delivery=lambda err, msg: failures.append(err) if err is not None else None)
        assert producer.flush(60) == 0
    produce(range(100))
    cluster.wait_for_full_isr("secured")  # the followers fetched everything: inter-broker SASL and CLUSTER_ACTION
    leader, _, _ = cluster.partition("secured")
    cluster.nodes[leader].kill(signal.SIGKILL)
    cluster.wait_until(lambda: cluster.partition("secured")[0] not in (-1, leader), "a new leader")
    produce(range(100, 200))
    assert failures == []

    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "readers", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", **sasl("alice", "SCRAM-SHA-512"), **QUIET})
    consumer.assign([TopicPartition("secured", 0, 0)])
    seen: list[int] = []
    try:
        while len(seen) < 200:
            message = consumer.poll(30)
            assert message is not None, f"only {len(seen)} of 200 records came back"
            assert message.error() is None, message.error()
            seen.append(int(message.value()))
    finally:
        consumer.close()
    assert sorted(seen) == list(range(200))
