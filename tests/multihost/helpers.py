"""What the multi-host tests do to a cluster: create it through the API, produce with acks=all, read it back."""

from __future__ import annotations

import threading
import uuid
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import AdminClient

from controlplane.clusters.models import Cluster
from controlplane.tenancy.models import Role
from tests.controlplane.conftest import TenantWorld
from tests.multihost.conftest import MultiHostStack


def status(world: TenantWorld, cluster_id: str) -> dict[str, Any]:
    response = world.client(Role.ADMIN).get(f"{world.base}/clusters/{cluster_id}")
    assert response.status_code == 200, response.content
    return dict(response.json())


def condition(body: dict[str, Any], kind: str) -> str:
    """The condition's status ("True"/"False"), "" when absent."""
    return next((str(c["status"]) for c in body["status"].get("conditions", []) if c["type"] == kind), "")


def healthy(world: TenantWorld, cluster_id: str) -> dict[str, Any] | None:
    """The cluster's body when it is Ready and not Degraded."""
    body = status(world, cluster_id)
    return body if condition(body, "Ready") == "True" and condition(body, "Degraded") == "False" else None


def create_ready(stack: MultiHostStack, world: TenantWorld, name: str, topic: str,
                 partitions: int = 6) -> dict[str, Any]:
    """A three-broker cluster (one per rack) with an RF=3 topic (min.insync.replicas=2), both Ready."""
    stack.wait_registered()
    admin = world.client(Role.ADMIN)
    made = admin.post(f"{world.base}/clusters", {"name": name, "plan": "dedicated", "broker_count": 3},
                      format="json")
    assert made.status_code == 201, made.content
    cluster_id = str(made.json()["id"])
    stack.wait(lambda: healthy(world, cluster_id), 120, f"cluster {name} Ready",
                      lambda: status(world, cluster_id)["status"])
    made = admin.post(f"{world.base}/clusters/{cluster_id}/topics",
                      {"name": topic, "partitions": partitions, "replication_factor": 3,
                       "configs": {"min.insync.replicas": "2"}}, format="json")
    assert made.status_code == 201, made.content

    def topic_ready() -> bool:
        got = admin.get(f"{world.base}/clusters/{cluster_id}/topics/{topic}").json()
        return any(c["type"] == "Ready" and c["status"] == "True" for c in got["status"].get("conditions", []))
    stack.wait(topic_ready, 60, f"topic {topic} Ready")
    # The cluster's own Ready again (it is ReconcilingTopics meanwhile): what a fault is measured from.
    body: dict[str, Any] = stack.wait(lambda: healthy(world, cluster_id), 60, f"cluster {name} Ready with {topic}",
                                      lambda: status(world, cluster_id)["status"])
    assert len({b["rack"] for b in body["status"]["brokers"]}) == 3, body["status"]["brokers"]
    return body


def delete(stack: MultiHostStack, world: TenantWorld, cluster_id: str) -> None:
    response = world.client(Role.ADMIN).delete(f"{world.base}/clusters/{cluster_id}")
    assert response.status_code in (202, 204), response.content
    stack.wait(lambda: not Cluster.objects.filter(pk=cluster_id).exists(), 90, "the cluster row to go")


def partitions(kafka: dict[str, str], topic: str) -> dict[int, Any]:
    """The topic's partitions as the cluster reports them (leader, replicas, isrs)."""
    meta = AdminClient({**kafka, "socket.timeout.ms": "5000"}).list_topics(topic=topic, timeout=5)
    return dict(meta.topics[topic].partitions)


@dataclass
class Producing:
    """A producer (acks=all, idempotent) writing numbered records until stopped; what the cluster acknowledged."""

    kafka: dict[str, str]
    topic: str
    acked: set[bytes] = field(default_factory=set)
    failed: list[str] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __enter__(self) -> Producing:
        self.thread = threading.Thread(target=self._run, name="producing", daemon=True)
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop.set()
        assert self.thread is not None
        self.thread.join(120)

    def count(self) -> int:
        with self._lock:
            return len(self.acked)

    def _delivered(self, err: KafkaError | None, msg: Any) -> None:
        with self._lock:
            if err is None:
                self.acked.add(msg.value())
            else:
                self.failed.append(str(err))

    def _run(self) -> None:
        producer = Producer({**self.kafka, "acks": "all", "enable.idempotence": True, "linger.ms": 5})
        run = uuid.uuid4().hex[:6]
        i = 0
        while not self.stop.is_set():
            producer.produce(self.topic, key=str(i).encode(), value=f"{run}-{i}".encode(),
                             on_delivery=self._delivered)
            i += 1
            producer.poll(0.01)  # ~100 records a second, each waited on by all in-sync replicas
        producer.flush(90)


def assert_all_present(stack: MultiHostStack, kafka: dict[str, str], topic: str, expected: set[bytes]) -> None:
    """Every acknowledged record is read back (a new group, from the beginning)."""
    consumer = Consumer({**kafka, "group.id": f"check-{uuid.uuid4().hex[:6]}", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    consumer.subscribe([topic])
    seen: set[bytes] = set()

    def drained() -> bool:
        for msg in consumer.consume(500, timeout=1):
            if msg.error() is None:
                seen.add(msg.value())
        return expected <= seen
    try:
        stack.wait(drained, 90, f"all {len(expected)} acknowledged records read back",
                   lambda: f"{len(expected - seen)} missing")
    finally:
        consumer.close()
