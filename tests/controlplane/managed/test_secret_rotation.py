"""Rotating a managed cluster's internal secrets with real agents, brokers and clients.

Three brokers are rolled one at a time onto a new internal password and token key while an API key's producer
keeps writing (acks=all); afterwards the old password no longer logs in, a token signed with the old key is
refused, the new ones work, and everything the producer was told was written is read back.
"""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer

from controlplane.clusters.models import ClusterSecret
from controlplane.tenancy.models import Role
from dataplane.security.oauthbearer import mint
from tests.controlplane.conftest import make_world
from tests.controlplane.managed.conftest import Stack, wait_for
from tests.controlplane.managed.test_kafka_credentials import (
    QUIET,
    _acls_applied,
    _api,
    _config,
    _grant,
    _logs_in,
    _service_account_key,
    _wire,
)
from tests.controlplane.managed.test_lifecycle import _condition, _delete_and_wait, _status

pytestmark = [pytest.mark.xdist_group("heavy"), pytest.mark.timeout(600)]


def _token_accepted(bootstrap: str, key: bytes, principal: str, audience: str) -> bool:
    """An OAUTHBEARER login with a fresh token signed by ``key``: whether the brokers (all alike) accept it."""
    token, _ = mint(key, principal_name=principal.removeprefix("User:"), audience=audience, lifetime_seconds=300)
    results = set()
    for server in bootstrap.split(","):
        with _wire(server) as wire:
            try:
                wire.authenticate_token(token)
                results.add(True)
            except PermissionError:
                results.add(False)
    assert len(results) == 1, "brokers disagree about the token"
    return results.pop()


def _internal_logs_in(bootstrap: str, username: str, password: str) -> bool:
    results = {_logs_in(server, username, password, "SCRAM-SHA-512") for server in bootstrap.split(",")}
    assert len(results) == 1, f"brokers disagree about {username}"
    return results.pop()


@pytest.mark.django_db(transaction=True)
def test_rotation_rolls_the_brokers_and_retires_the_old_secrets(stack: Stack) -> None:
    world = make_world(f"r{uuid.uuid4().hex[:6]}")
    created = world.client(Role.ADMIN).post(f"{world.base}/clusters", {"name": "rot", "plan": "standard"},
                                            format="json")
    assert created.status_code == 201, created.content
    cluster_id, kafka_id = created.json()["id"], created.json()["kafka_cluster_id"]
    try:
        def ready_with_secrets() -> dict[str, Any] | None:
            body = _status(world, cluster_id)
            return body if _condition(body, "Ready").get("status") == "True" and "secrets" in body["status"] \
                else None

        body = wait_for(ready_with_secrets, 120, "the cluster Ready", stack,
                        lambda: _status(world, cluster_id)["status"])
        bootstrap = body["status"]["bootstrap_servers"]
        assert body["status"]["secrets"] == {"version": 1, "rotating": False}
        principal, key_id, secret = _service_account_key(world)
        _api(world, "post", f"/clusters/{cluster_id}/topics",
             {"name": "events", "partitions": 3, "replication_factor": 3, "configs": {"min.insync.replicas": "2"}})
        _grant(world, cluster_id, principal, "events")
        client = _config(bootstrap, key_id, secret)
        old = ClusterSecret.objects.get(cluster_id=cluster_id)
        old_key = bytes.fromhex(old.token_key)
        wait_for(lambda: _ready_topic(world, cluster_id), 60, "the topic Ready", stack)
        wait_for(lambda: _acls_applied(cluster_id, principal, 3), 60, "the key's ACLs on the cluster", stack)
        assert _internal_logs_in(bootstrap, "__sluice", old.internal_password)
        assert _token_accepted(bootstrap, old_key, principal, kafka_id)

        acked: list[bytes] = []
        failed: list[str] = []
        stop = threading.Event()

        def produce() -> None:
            producer = Producer({**client, "acks": "all", "enable.idempotence": True, "linger.ms": 5,
                                 "message.timeout.ms": 120000})

            def report(err: Any, msg: Any) -> None:
                (failed.append(str(err)) if err else acked.append(msg.value()))

            n = 0
            while not stop.is_set():
                producer.produce("events", value=f"v{n}".encode(), on_delivery=report)
                n += 1
                producer.poll(0.005)
            assert producer.flush(120) == 0

        writer = threading.Thread(target=produce)
        writer.start()
        try:
            wait_for(lambda: len(acked) > 100, 60, "records acknowledged before the rotation", stack)
            asked_at = time.time()
            rotated = world.client(Role.ADMIN).post(f"{world.base}/clusters/{cluster_id}/rotate-secrets")
            assert rotated.status_code == 202, rotated.content
            wait_for(lambda: _status(world, cluster_id)["status"].get("secrets", {}).get("rotating"), 30,
                     "the roll to start", stack)
            done = wait_for(lambda: (lambda b: b if b["status"].get("secrets") == {"version": 2, "rotating": False}
                                     and _condition(b, "Ready").get("status") == "True" else None)(
                _status(world, cluster_id)), 240, "every broker on the new secrets", stack,
                lambda: _status(world, cluster_id)["status"])
            count = len(acked)
            wait_for(lambda: len(acked) > count + 100, 60, "records acknowledged after the rotation", stack)
        finally:
            stop.set()
            writer.join(180)
        assert not failed, failed[:5]
        assert done["status"]["observed_generation"] == done["generation"]
        assert {b["process"]["secrets_version"] for b in done["status"]["brokers"]} == {2}
        assert all(b["process"]["started"] > asked_at for b in done["status"]["brokers"]), "each broker restarted"

        new = ClusterSecret.objects.get(cluster_id=cluster_id)
        assert new.version == 2 and not new.next_internal_password
        assert new.internal_password != old.internal_password and new.token_key != old.token_key
        assert not _internal_logs_in(bootstrap, "__sluice", old.internal_password)
        assert not _internal_logs_in(bootstrap, "__sluice-2", old.internal_password)
        assert _internal_logs_in(bootstrap, "__sluice-2", new.internal_password)
        assert not _token_accepted(bootstrap, old_key, principal, kafka_id)
        assert _token_accepted(bootstrap, bytes.fromhex(new.token_key), principal, kafka_id)

        # Nothing acknowledged was lost across the roll.
        consumer = Consumer({**client, "group.id": f"g-{uuid.uuid4().hex[:6]}", "auto.offset.reset": "earliest",
                             **QUIET})
        consumer.subscribe(["events"])
        seen: set[bytes] = set()
        want = set(acked)
        try:
            wait_for(lambda: _drain(consumer, seen) >= want, 90, "every acknowledged record read back", stack,
                     lambda: f"{len(want - seen)} missing")
        finally:
            consumer.close()
    finally:
        _delete_and_wait(world, cluster_id, stack)


def _drain(consumer: Consumer, seen: set[bytes]) -> set[bytes]:
    for message in consumer.consume(500, 1):
        if message.error() is None:
            seen.add(message.value())
    return seen


def _ready_topic(world: Any, cluster_id: str) -> bool:
    topic = world.client(Role.ADMIN).get(f"{world.base}/clusters/{cluster_id}/topics/events").json()
    return _condition(topic, "Ready").get("status") == "True"
