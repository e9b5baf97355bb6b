"""A managed cluster's life through the API, with real agents, brokers, worker, Postgres and Redis."""

from __future__ import annotations

import os
import signal
import threading
import uuid
from datetime import UTC
from pathlib import Path
from typing import Any

import psycopg
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from controlplane.clusters.kafka_clients import admin_as_internal
from controlplane.clusters.models import BrokerNode, Cluster
from controlplane.reconcile import nodes
from controlplane.reconcile.node_plan import plan_nodes
from controlplane.reconcile.topic_plan import plan_topics
from controlplane.reconcile.topics import desired_topic, observe_topics
from controlplane.resources.models import Topic
from controlplane.tenancy.models import Role
from tests.controlplane.conftest import TenantWorld, make_world
from tests.controlplane.managed.conftest import Stack, wait_for

pytestmark = [pytest.mark.xdist_group("heavy"), pytest.mark.timeout(600)]


def _status(world: TenantWorld, cluster_id: str) -> dict[str, Any]:
    response = world.client(Role.ADMIN).get(f"{world.base}/clusters/{cluster_id}")
    assert response.status_code == 200, response.content
    return dict(response.json())


def _condition(body: dict[str, Any], kind: str) -> dict[str, Any]:
    return next((c for c in body["status"].get("conditions", []) if c["type"] == kind), {})


def _ready(world: TenantWorld, cluster_id: str) -> dict[str, Any] | None:
    body = _status(world, cluster_id)
    return body if _condition(body, "Ready").get("status") == "True" else None


def _delete_and_wait(world: TenantWorld, cluster_id: str, stack: Stack) -> None:
    response = world.client(Role.ADMIN).delete(f"{world.base}/clusters/{cluster_id}")
    assert response.status_code in (202, 204), response.content
    wait_for(lambda: not Cluster.objects.filter(pk=cluster_id).exists(), 90, "the cluster row to go", stack)


@pytest.mark.django_db(transaction=True)
def test_three_broker_cluster_from_create_to_delete(stack: Stack) -> None:
    world = make_world(f"t{uuid.uuid4().hex[:6]}")
    admin = world.client(Role.ADMIN)
    created = admin.post(f"{world.base}/clusters", {"name": "orders", "plan": "dedicated", "broker_count": 3},
                         format="json")
    assert created.status_code == 201, created.content
    cluster_id = created.json()["id"]
    kafka_id = created.json()["kafka_cluster_id"]
    try:
        body = wait_for(lambda: _ready(world, cluster_id), 90, "the cluster to be Ready", stack,
                lambda: _status(world, cluster_id)["status"])
        bootstrap = body["status"]["bootstrap_servers"]
        assert len(bootstrap.split(",")) == 3
        hosts = {b["host"] for b in body["status"]["brokers"]}
        assert hosts == set(stack.agents), "three brokers spread over both hosts"
        assert {b["rack"] for b in body["status"]["brokers"]} == {"r1", "r2"}
        assert body["status"]["observed_generation"] == body["generation"]

        # A topic made through the API reaches the cluster ...
        made = admin.post(f"{world.base}/clusters/{cluster_id}/topics",
                          {"name": "payments", "partitions": 3, "replication_factor": 3,
                           "configs": {"min.insync.replicas": "2"}}, format="json")
        assert made.status_code == 201, made.content
        kafka_admin = AdminClient(world.kafka(bootstrap))
        wait_for(lambda: "payments" in kafka_admin.list_topics(timeout=5).topics, 60, "the topic on the cluster",
                 stack)
        meta = kafka_admin.list_topics(topic="payments", timeout=5).topics["payments"]
        assert len(meta.partitions) == 3 and all(len(p.replicas) == 3 for p in meta.partitions.values())

        # ... and one a Kafka client made shows up in the API as observed.
        kafka_admin.create_topics([NewTopic("from-client", 2, 2)])["from-client"].result(30)

        def observed() -> dict[str, Any] | None:
            listing = admin.get(f"{world.base}/clusters/{cluster_id}/topics").json()["results"]
            return next((t for t in listing if t["name"] == "from-client"), None)

        topic = wait_for(observed, 60, "the client's topic in the API", stack)
        assert topic["managed"] is False and topic["partitions"] == 2 and topic["replication_factor"] == 2
        wait_for(lambda: _condition(admin.get(f"{world.base}/clusters/{cluster_id}/topics/payments").json(),
                                    "Ready").get("status") == "True", 60, "the API topic Ready", stack)
        # An ACL binding goes to the cluster's reconcile and into the brokers, which enforce it; the cluster
        # stays Ready.
        acl = admin.post(f"{world.base}/clusters/{cluster_id}/acls",
                         {"principal": "User:*", "resource_type": "TOPIC", "pattern_type": "LITERAL",
                          "resource_name": "payments", "operation": "READ", "permission": "ALLOW", "host": "*"},
                         format="json")
        assert acl.status_code == 201, acl.content

        def acls_reported() -> bool:
            body = _status(world, cluster_id)
            acls = body["status"].get("acls", {})
            # Managed brokers enforce ACLs: the binding, plus the allow-all ones of the owner and the admin.
            return acls.get("bindings") == 1 and acls.get("from_roles") == 8 and acls.get("enforced") is True \
                and _condition(body, "Ready").get("status") == "True"

        wait_for(acls_reported, 60, "the ACL reported as enforced, the cluster Ready", stack,
                 lambda: _status(world, cluster_id)["status"])
        # Converged: planning again against the real cluster finds nothing to do, for brokers and topics alike.
        last: list[object] = []
        try:
            wait_for(lambda: _nothing_to_do(cluster_id, bootstrap, last), 60, "a plan with no steps")
        except AssertionError as exc:
            raise AssertionError(f"still planned: {last[-1:]}") from exc

        # SIGKILL one broker while a producer runs: Degraded, restarted by its agent, Ready; nothing acked lost.
        acked: list[bytes] = []
        failed: list[str] = []
        stop = threading.Event()

        def produce() -> None:
            producer = Producer({**world.kafka(bootstrap), "acks": "all", "enable.idempotence": True,
                                 "linger.ms": 5, "message.timeout.ms": 60000})
            n = 0

            def report(err: Any, msg: Any) -> None:
                (failed.append(str(err)) if err else acked.append(msg.value()))

            while not stop.is_set():
                producer.produce("payments", value=f"v{n}".encode(), key=str(n % 7).encode(), on_delivery=report)
                n += 1
                producer.poll(0.002)
            producer.flush(60)

        writer = threading.Thread(target=produce)
        writer.start()
        try:
            wait_for(lambda: len(acked) > 200, 60, "acknowledged records before the kill", stack)
            victim = BrokerNode.objects.filter(cluster_id=cluster_id).order_by("node_id").last()
            assert victim is not None
            pid = victim.process["pid"]
            from datetime import datetime

            killed_at = datetime.now(UTC)
            os.kill(pid, signal.SIGKILL)

            # The restart can be quicker than a poll, so "Degraded was reported" is read from the condition's
            # transition time: going True and back False after the kill both move it past the kill.
            def degraded_since_kill() -> bool:
                when = _condition(_status(world, cluster_id), "Degraded").get("last_transition_time", "")
                return bool(when) and datetime.fromisoformat(when) > killed_at

            wait_for(degraded_since_kill, 60, "a Degraded transition after the kill", stack)
            try:
                wait_for(lambda: _ready(world, cluster_id) and _condition(_status(world, cluster_id), "Degraded")
                         .get("status") == "False", 60, "Ready and no longer Degraded", stack,
                        lambda: _status(world, cluster_id)["status"])
            except AssertionError as exc:
                raise AssertionError(f"{_status(world, cluster_id)}") from exc
            restarted = BrokerNode.objects.get(pk=victim.pk).process
            assert restarted["pid"] != pid and restarted["restarts"] >= 1
            before = len(acked)
            wait_for(lambda: len(acked) > before + 200, 60, "records acknowledged after the restart", stack)
        finally:
            stop.set()
            writer.join(90)
        assert not failed, failed[:5]
        _assert_all_present(world.kafka(bootstrap), "payments", set(acked))
    finally:
        _delete_and_wait(world, cluster_id, stack)

    # Nothing left: no broker process, no directory, no metadata row.
    assert not stack.broker_pids()
    assert not (Path(stack.root) / "clusters" / kafka_id).exists()
    with psycopg.connect(stack.env["DATABASE_URL"]) as conn:
        for table in ("clusters", "brokers", "topics"):
            count = conn.execute(f"SELECT count(*) FROM sluice_meta.{table} WHERE cluster_id = %s",
                                 (kafka_id,)).fetchone()
            assert count == (0,), table
    assert not BrokerNode.objects.filter(cluster_id=cluster_id).exists()


def _nothing_to_do(cluster_id: str, bootstrap: str, last: list[object]) -> bool:
    cluster = Cluster.objects.get(pk=cluster_id)
    view, _ = nodes.observe(cluster)
    with admin_as_internal(cluster, bootstrap=bootstrap) as admin:
        observed, under = observe_topics(admin, admin.topics())
    rows = [desired_topic(t) for t in Topic.objects.filter(cluster_id=cluster_id)]
    planned = (plan_nodes(view), plan_topics(rows, observed, correct_drift=True), under)
    last.append(planned)
    return not any(planned)


def _assert_all_present(kafka: dict[str, str], topic: str, expected: set[bytes]) -> None:
    from confluent_kafka import Consumer

    consumer = Consumer({**kafka, "group.id": f"check-{uuid.uuid4().hex[:6]}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    seen: set[bytes] = set()

    def drained() -> bool:
        for msg in consumer.consume(500, timeout=1):
            if msg.error() is None:
                seen.add(msg.value())
        return expected <= seen

    try:
        wait_for(drained, 120, "every acknowledged record to be read back")
    finally:
        consumer.close()


@pytest.mark.django_db(transaction=True)
def test_bad_plans_are_refused_with_the_field_named(stack: Stack) -> None:
    world = make_world(f"b{uuid.uuid4().hex[:6]}")
    admin = world.client(Role.ADMIN)
    impossible = admin.post(f"{world.base}/clusters", {"name": "x", "plan": "basic", "broker_count": 3},
                            format="json")
    assert impossible.status_code == 400 and "broker_count" in impossible.json()["extra"]["fields"]
    assert not Cluster.objects.filter(tenant=world.tenant).exists()


@pytest.mark.django_db(transaction=True)
def test_brokers_partitions_groups_lag_reset_and_delete_records(stack: Stack) -> None:
    from confluent_kafka import Consumer

    world = make_world(f"o{uuid.uuid4().hex[:6]}")
    admin = world.client(Role.ADMIN)
    created = admin.post(f"{world.base}/clusters", {"name": "watch", "plan": "basic"}, format="json")
    cluster_id = created.json()["id"]
    base = f"{world.base}/clusters/{cluster_id}"
    try:
        body = wait_for(lambda: _ready(world, cluster_id), 90, "Ready", stack,
                        lambda: _status(world, cluster_id)["status"])
        bootstrap = body["status"]["bootstrap_servers"]
        assert admin.post(f"{base}/topics", {"name": "events", "partitions": 2}, format="json").status_code == 201
        wait_for(lambda: _condition(admin.get(f"{base}/topics/events").json(), "Ready").get("status") == "True",
                 60, "the topic", stack)
        from controlplane.clusters import metadata
        from controlplane.clusters.throughput import sample

        cluster = Cluster.objects.get(pk=cluster_id)
        assert sample(cluster) == 0  # the first sample only sets the counters
        producer = Producer(world.kafka(bootstrap))
        for i in range(10):
            producer.produce("events", value=b"x" * 100, partition=i % 2)
        assert producer.flush(30) == 0

        consumer = Consumer({**world.kafka(bootstrap), "group.id": "readers", "auto.offset.reset": "earliest",
                             "enable.auto.commit": False})
        consumer.subscribe(["events"])
        seen = 0
        while seen < 6:
            seen += sum(1 for m in consumer.consume(10, timeout=1) if m.error() is None)
        consumer.commit(asynchronous=False)
        committed = sum(tp.offset for tp in consumer.committed(consumer.assignment(), timeout=10) if tp.offset > 0)
        # The broker publishes what it sent to consumers with its next lease renewal.
        wait_for(lambda: metadata.bytes_out(cluster.kafka_cluster_id).get(1, {}).get("events", 0) >= 600, 30,
                 "the broker's bytes-out counters", stack)
        assert sample(cluster) > 0
        points = admin.get(f"{base}/throughput", {"scope": "topic", "topic": "events"}).json()
        assert isinstance(points, list), points
        assert [(p["records_in"], p["records_out"]) for p in points] == [(10, committed)]
        assert points[0]["bytes_in"] > 1000
        assert points[0]["bytes_out"] >= 600 and points[0]["bytes_out_per_sec"] > 0
        per_broker = admin.get(f"{base}/throughput", {"scope": "broker"}).json()
        assert [(p["name"], p["records_in"], p["bytes_out"]) for p in per_broker] == [
            ("1", 10, points[0]["bytes_out"])]

        brokers = admin.get(f"{base}/brokers").json()
        assert [(b["node_id"], b["status"], b["controller"]) for b in brokers] == [(1, "up", True)]
        assert brokers[0]["partitions_led"] >= 2 and brokers[0]["disk_bytes"] > 0
        parts = admin.get(f"{base}/topics/events/partitions").json()
        assert [(p["partition"], p["leader"], p["start_offset"], p["end_offset"]) for p in parts] == [
            (0, 1, 0, 5), (1, 1, 0, 5)]
        groups = admin.get(f"{base}/consumer-groups").json()
        assert [(g["group_id"], g["members"]) for g in groups] == [("readers", 1)]
        detail = admin.get(f"{base}/consumer-groups/readers").json()
        assert detail["state"] == "Stable" and len(detail["members"]) == 1
        assert detail["total_lag"] == 10 - sum(r["committed_offset"] or 0 for r in detail["partitions"])
        # A reset while members are connected is refused; a dry run only shows the plan.
        busy = admin.post(f"{base}/consumer-groups/readers/reset-offsets", {"to": "earliest", "dry_run": False},
                          format="json")
        assert busy.status_code == 409 and busy.json()["code"] == "group_not_empty"
        plan = admin.post(f"{base}/consumer-groups/readers/reset-offsets", {"to": "earliest"}, format="json").json()
        assert plan["dry_run"] and {p["new_offset"] for p in plan["partitions"]} == {0}
        consumer.close()
        wait_for(lambda: admin.get(f"{base}/consumer-groups/readers").json()["state"] == "Empty", 60,
                 "the group to empty", stack)
        done = admin.post(f"{base}/consumer-groups/readers/reset-offsets",
                          {"to": "earliest", "topic": "events", "dry_run": False}, format="json")
        assert done.status_code == 200, done.content
        assert admin.get(f"{base}/consumer-groups/readers").json()["total_lag"] == 10
        # Delete records: admins only; the partition's start moves.
        member = world.client(Role.MEMBER)
        assert member.post(f"{base}/topics/events/delete-records", {"partitions": {"0": 3}},
                           format="json").status_code == 403
        deleted = admin.post(f"{base}/topics/events/delete-records", {"partitions": {"0": 3}}, format="json")
        assert deleted.status_code == 200 and deleted.json() == [{"partition": 0, "low_watermark": 3}]
        assert admin.get(f"{base}/topics/events/partitions").json()[0]["start_offset"] == 3
        # Bad input: named errors, nothing changed.
        bad = admin.post(f"{base}/consumer-groups/readers/reset-offsets", {"to": "offset"}, format="json")
        assert bad.status_code == 400 and "value" in bad.json()["extra"]["fields"]
        bad = admin.post(f"{base}/topics/events/delete-records", {"partitions": {"zero": 1}}, format="json")
        assert bad.status_code == 400
    finally:
        _delete_and_wait(world, cluster_id, stack)
