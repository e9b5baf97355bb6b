"""Managed clusters under force: agents and workers killed, brokers scaled out and drained."""

from __future__ import annotations

import signal
import threading
import uuid
from typing import Any

import pytest
from confluent_kafka import Producer

from controlplane.clusters.models import BrokerNode, Cluster
from controlplane.tenancy.models import Role
from tests.controlplane.conftest import TenantWorld, make_world
from tests.controlplane.managed.conftest import Stack, wait_for
from tests.controlplane.managed.test_lifecycle import (
    _assert_all_present,
    _condition,
    _delete_and_wait,
    _ready,
    _status,
)

pytestmark = [pytest.mark.xdist_group("heavy"), pytest.mark.timeout(600)]


def _create(world: TenantWorld, name: str, **body: Any) -> str:
    response = world.client(Role.ADMIN).post(f"{world.base}/clusters", {"name": name, **body}, format="json")
    assert response.status_code == 201, response.content
    return str(response.json()["id"])


@pytest.mark.django_db(transaction=True)
def test_a_restarted_agent_adopts_its_running_brokers(stack: Stack) -> None:
    world = make_world(f"a{uuid.uuid4().hex[:6]}")
    cluster_id = _create(world, "solo", plan="basic")
    try:
        wait_for(lambda: _ready(world, cluster_id), 90, "Ready", stack,
                lambda: _status(world, cluster_id)["status"])
        node = BrokerNode.objects.get(cluster_id=cluster_id)
        pid = node.process["pid"]
        agent = stack.agents[node.agent_id]
        agent.stop(signal.SIGKILL)  # no shutdown at all: the broker runs on, detached
        assert pid in stack.broker_pids()
        agent.start()
        # The new agent reports the same process as adopted, and never starts a second one.
        wait_for(lambda: BrokerNode.objects.get(pk=node.pk).process.get("message") == "adopted a running broker",
                 60, "the adoption report", stack)
        assert BrokerNode.objects.get(pk=node.pk).process["pid"] == pid
        assert stack.broker_pids().count(pid) == 1 and len(stack.broker_pids()) == 1
        # And it still supervises it: killed, it is restarted.
        import os

        os.kill(pid, signal.SIGKILL)
        wait_for(lambda: BrokerNode.objects.get(pk=node.pk).process.get("pid") not in (None, pid), 30,
                 "the adopted broker restarted", stack)
        wait_for(lambda: _ready(world, cluster_id) and _condition(_ready(world, cluster_id) or {}, "Degraded")
                 .get("status") == "False", 60, "Ready again", stack,
                lambda: _status(world, cluster_id)["status"])
    finally:
        _delete_and_wait(world, cluster_id, stack)
    assert not stack.broker_pids()


@pytest.mark.django_db(transaction=True)
def test_a_broker_whose_port_is_taken_moves_to_another_port(stack: Stack) -> None:
    import socket

    squatters = []
    for first, _ in stack.pools.values():  # the port placement picks first, on either host
        sock = socket.socket()
        sock.bind(("127.0.0.1", first))
        sock.listen()
        squatters.append(sock)
    world = make_world(f"p{uuid.uuid4().hex[:6]}")
    cluster_id = _create(world, "squatted", plan="basic")
    try:
        body = wait_for(lambda: _ready(world, cluster_id), 90, "Ready on another port", stack,
                        lambda: _status(world, cluster_id)["status"])
        port = body["status"]["brokers"][0]["port"]
        assert port not in {first for first, _ in stack.pools.values()}
        assert body["status"]["bootstrap_servers"].endswith(f":{port}")
    finally:
        for sock in squatters:
            sock.close()
        _delete_and_wait(world, cluster_id, stack)


@pytest.mark.django_db(transaction=True)
def test_a_worker_killed_mid_provisioning_resumes_to_ready(stack: Stack) -> None:
    from controlplane.clusters.tasks import resync_all

    world = make_world(f"w{uuid.uuid4().hex[:6]}")
    cluster_id = _create(world, "resumed", plan="dedicated", broker_count=3)
    try:
        wait_for(lambda: BrokerNode.objects.filter(cluster_id=cluster_id).exists(), 60, "the first placement", stack)
        stack.worker.stop(signal.SIGKILL)
        stack.worker.start()

        def resumed() -> dict[str, Any] | None:
            resync_all.delay()  # what beat does every few seconds
            return _ready(world, cluster_id)

        body = wait_for(resumed, 120, "Ready after the worker restart", stack)
        assert len(body["status"]["brokers"]) == 3
        assert BrokerNode.objects.filter(cluster_id=cluster_id).count() == 3
        assert len(stack.broker_pids()) == 3
    finally:
        _delete_and_wait(world, cluster_id, stack)


@pytest.mark.django_db(transaction=True)
def test_scale_out_approve_the_proposal_then_scale_in_while_producing(stack: Stack) -> None:
    from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource, ResourceType

    world = make_world(f"s{uuid.uuid4().hex[:6]}")
    admin = world.client(Role.ADMIN)
    cluster_id = _create(world, "elastic", plan="dedicated", broker_count=3)
    base = f"{world.base}/clusters/{cluster_id}"
    try:
        body = wait_for(lambda: _ready(world, cluster_id), 90, "Ready with 3", stack,
                        lambda: _status(world, cluster_id)["status"])
        bootstrap = body["status"]["bootstrap_servers"]
        made = admin.post(f"{base}/topics", {"name": "spread", "partitions": 8, "replication_factor": 3},
                          format="json")
        assert made.status_code == 201, made.content
        wait_for(lambda: _condition(admin.get(f"{base}/topics/spread").json(), "Ready").get("status") == "True",
                 60, "the topic", stack)

        def replicas_on_4() -> int:
            topics = AdminClient(world.kafka(bootstrap)).list_topics(timeout=10).topics
            return sum(4 in p.replicas for t in topics.values() for p in t.partitions.values())

        acked: list[bytes] = []
        failed: list[str] = []
        stop = threading.Event()

        def produce() -> None:
            producer = Producer({**world.kafka(bootstrap), "acks": "all", "enable.idempotence": True,
                                 "linger.ms": 5, "message.timeout.ms": 120000})
            n = 0
            while not stop.is_set():
                producer.produce("spread", value=f"v{n}".encode(), on_delivery=lambda err, msg: (
                    failed.append(str(err)) if err else acked.append(msg.value())))
                n += 1
                producer.poll(0.003)
            producer.flush(120)

        writer = threading.Thread(target=produce)
        writer.start()
        try:
            wait_for(lambda: len(acked) > 100, 60, "records before scaling", stack)
            # Scale out: a fourth broker, and a proposal to move load onto it, waiting for approval.
            assert admin.patch(base, {"broker_count": 4}, format="json").status_code == 200
            wait_for(lambda: (b := _ready(world, cluster_id)) and len(b["status"]["brokers"]) == 4, 90,
                     "Ready with 4", stack, lambda: _status(world, cluster_id)["status"])

            def proposal() -> dict[str, Any] | None:
                found = admin.get(f"{base}/rebalances").json()["results"]
                return next((r for r in found if r["state"] == "ProposalReady"), None)

            ready = wait_for(proposal, 60, "the scale-out proposal", stack)
            assert ready["reason"] == "scale-out" and ready["proposal"]["summary"]["replica_moves"] > 0
            assert all(4 in m["target"] for m in ready["proposal"]["moves"] if m["current"] != m["target"]
                       and set(m["target"]) != set(m["current"]))
            assert replicas_on_4() == 0
            approved = admin.post(f"{base}/rebalances/{ready['id']}/approve")
            assert approved.status_code == 200, approved.content
            twice = admin.post(f"{base}/rebalances/{ready['id']}/approve")
            assert twice.status_code == 409 and twice.json()["code"] == "already_approved"
            done = wait_for(lambda: (r := admin.get(f"{base}/rebalances/{ready['id']}").json())["state"] == "Ready"
                            and r, 180, "the rebalance to finish", stack,
                            lambda: admin.get(f"{base}/rebalances/{ready['id']}").json())
            assert set(done["progress"].values()) == {"done"}
            assert done["replication_throttle"] == 50 * 1024 * 1024
            assert replicas_on_4() > 0
            # The moves ran under the replication throttle, which is gone once the rebalance is Ready.
            describer = AdminClient(world.kafka(bootstrap))  # the owner: ALL on the cluster
            for node in (1, 2, 3, 4):
                resource = ConfigResource(ResourceType.BROKER, str(node))
                entry = describer.describe_configs([resource])[resource].result(30)[
                    "follower.replication.throttled.rate"]
                assert entry.source == ConfigSource.STATIC_BROKER_CONFIG.value, (node, entry)
            # Scale in: the fourth broker's replicas move off before it stops.
            assert admin.patch(base, {"broker_count": 3}, format="json").status_code == 200
            body = wait_for(lambda: (b := _ready(world, cluster_id)) and len(b["status"]["brokers"]) == 3 and b,
                            180, "Ready with 3 again", stack, lambda: _status(world, cluster_id)["status"])
            before = len(acked)
            wait_for(lambda: len(acked) > before + 100, 60, "records after the scale-in", stack)
        finally:
            stop.set()
            writer.join(150)
        assert not failed, failed[:5]
        assert sorted(b["node_id"] for b in body["status"]["brokers"]) == [1, 2, 3]
        assert replicas_on_4() == 0
        assert len(stack.broker_pids()) == 3
        _assert_all_present(world.kafka(body["status"]["bootstrap_servers"]), "spread", set(acked))
    finally:
        _delete_and_wait(world, cluster_id, stack)
    assert not Cluster.objects.filter(pk=cluster_id).exists()


@pytest.mark.django_db(transaction=True)
def test_a_worker_killed_mid_rebalance_resumes_to_the_same_end_state(stack: Stack) -> None:
    from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource, NewTopic, ResourceType

    from controlplane.clusters.tasks import resync_all
    from dataplane.client.admin import ClusterAdmin

    world = make_world(f"r{uuid.uuid4().hex[:6]}")
    admin = world.client(Role.ADMIN)
    cluster_id = _create(world, "moving", plan="dedicated", broker_count=3)
    base = f"{world.base}/clusters/{cluster_id}"
    try:
        body = wait_for(lambda: _ready(world, cluster_id), 90, "Ready with 3", stack)
        bootstrap = body["status"]["bootstrap_servers"]
        client = world.kafka(bootstrap)  # the owner's key: ALL on the cluster
        kafka = AdminClient(client)
        kafka.create_topics([NewTopic("lopsided", 6, replica_assignment=[[1]] * 6)])["lopsided"].result(30)
        producer = Producer({**client, "acks": "all", "linger.ms": 20})
        values = [f"{i:06d}".encode() + b"x" * 65_000 for i in range(6 * 48)]  # ~3 MB a partition
        for i, value in enumerate(values):
            producer.produce("lopsided", value=value, partition=i % 6)
        assert producer.flush(60) == 0
        # A slow throttle keeps the moves running long enough to kill the worker in the middle of them.
        made = admin.post(f"{base}/rebalances", {"replication_throttle": 1024 * 1024}, format="json")
        assert made.status_code == 201, made.content
        rid = made.json()["id"]
        ready = wait_for(lambda: (r := admin.get(f"{base}/rebalances/{rid}").json())["state"] == "ProposalReady"
                         and r, 60, "the proposal", stack)
        targets = {(m["topic"], m["partition"]): m["target"] for m in ready["proposal"]["moves"]}
        assert sum(1 for (t, _), target in targets.items() if t == "lopsided" and target != [1]) >= 3
        assert admin.post(f"{base}/rebalances/{rid}/approve").status_code == 200
        wait_for(lambda: admin.get(f"{base}/rebalances/{rid}").json()["state"] == "Rebalancing", 60,
                 "the moves to start", stack)
        with ClusterAdmin(bootstrap, timeout=30, config=client) as moves:
            assert moves.list_reassignments(), "the moves finished before the worker could be killed amid them"
        stack.worker.stop(signal.SIGKILL)
        stack.worker.start()

        def finished() -> dict[str, Any] | None:
            resync_all.delay()  # what beat does every few seconds
            found = admin.get(f"{base}/rebalances/{rid}").json()
            return found if found["state"] == "Ready" else None

        done = wait_for(finished, 180, "the rebalance to finish after the worker restart", stack)
        assert set(done["progress"].values()) == {"done"}
        placed = kafka.list_topics("lopsided", timeout=10).topics["lopsided"].partitions
        assert {p: sorted(placed[p].replicas) for p in placed} == {
            p: sorted(targets.get(("lopsided", p), [1])) for p in placed}  # moves name only what changes
        for node in (1, 2, 3):  # the throttle went with the rebalance
            resource = ConfigResource(ResourceType.BROKER, str(node))
            entry = kafka.describe_configs([resource])[resource].result(30)["follower.replication.throttled.rate"]
            assert entry.source == ConfigSource.STATIC_BROKER_CONFIG.value, (node, entry)
        _assert_all_present(client, "lopsided", set(values))
    finally:
        _delete_and_wait(world, cluster_id, stack)
