"""The DRF produce paths in this process (Django's test client: no ASGI in front), against clusters whose broker
cannot be reached: a port nobody listens on, and one that accepts and never answers. The answer is the ASGI
paths' 503 with 50302, within the engine's metadata deadline -- the request thread never hangs. A revoked
key's producer leaves the produce loop's pool.
"""

from __future__ import annotations

import socket
import time
import uuid
from collections.abc import Iterator

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from controlplane.clusters.models import Agent, BrokerNode, Cluster
from controlplane.core.actors import SYSTEM_ACTOR
from controlplane.kafkarest.access import clear_caches
from controlplane.kafkarest.produce import engine
from controlplane.kafkarest.produce.loop import produce_loop
from controlplane.kafkarest.revocation import watcher
from controlplane.tenancy import services
from controlplane.tenancy.models import Role
from controlplane.tenancy.revocation import Revocation
from sluice.embedded import free_port
from tests.controlplane.conftest import TenantWorld, key_client, make_world
from tests.controlplane.factories import ClusterFactory
from tests.support.polling import wait_until
from tests.support.secured_broker import store_secrets

pytestmark = [pytest.mark.xdist_group("drf-produce"), pytest.mark.django_db(transaction=True)]

DEADLINE = engine.METADATA_WAIT_SECONDS + 5  # the metadata wait, and room for a loaded machine


def cluster_at(world: TenantWorld, port: int) -> Cluster:
    """A cluster of ``world`` whose one broker is at 127.0.0.1:``port``."""
    agent = Agent.objects.create(host=f"ext-{uuid.uuid4().hex[:6]}", advertised_host="127.0.0.1", port_min=port,
                                 port_max=port, last_seen=timezone.now(), started_at=timezone.now())
    cluster: Cluster = ClusterFactory(tenant=world.tenant, kafka_cluster_id=f"skc-{uuid.uuid4().hex[:16]}")
    store_secrets(cluster)
    BrokerNode.objects.create(cluster=cluster, node_id=1, agent=agent, port=port)
    return cluster


@pytest.fixture
def world() -> Iterator[TenantWorld]:
    clear_caches()
    try:
        yield make_world(f"d{uuid.uuid4().hex[:6]}")
    finally:
        # The loop's producers go, and with them their revocation holds: the watcher thread has nothing left to
        # sweep in a database the next test flushes.
        produce_loop.close()
        clear_caches()


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port that accepts connections and never answers (a broker that hangs)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    try:
        yield listener.getsockname()[1]
    finally:
        listener.close()


def _session(world: TenantWorld) -> APIClient:
    client = APIClient()
    client.force_login(world.users[Role.OWNER])  # type: ignore[arg-type]
    return client


@pytest.mark.parametrize("broker", ["closed", "silent"])
def test_an_unreachable_broker_is_50302_without_hanging(world: TenantWorld, broker: str,
                                                        request: pytest.FixtureRequest) -> None:
    port = free_port() if broker == "closed" else request.getfixturevalue("silent_port")
    cluster = cluster_at(world, port)
    client = _session(world)
    prefix = f"/kafka/v3/clusters/{cluster.kafka_cluster_id}/topics/t"
    calls = [
        (f"{prefix}/records", b'{"value": {"type": "STRING", "data": "x"}}', "application/json"),
        (f"{prefix}/records:batch", b'{"entries": [{"id": "1", "value": null}]}', "application/json"),
        (f"/kafka/v2/clusters/{cluster.kafka_cluster_id}/topics/t", b'{"records": [{"value": "eA=="}]}',
         "application/vnd.kafka.binary.v2+json"),
    ]
    for path, body, content_type in calls:
        started = time.monotonic()
        answer = client.post(path, body, content_type=content_type)
        took = time.monotonic() - started
        assert (answer.status_code, answer.json()["error_code"]) == (503, 50302), (path, answer.content)
        assert took < DEADLINE, (path, took)


def _pooled() -> int:
    async def count() -> int:
        return len(engine.pool())
    return produce_loop.run(count(), 10)


def test_a_revoked_key_is_refused_and_its_producer_closed(world: TenantWorld) -> None:
    cluster = cluster_at(world, free_port())
    api_key, secret = world.keys[Role.MEMBER]
    client = key_client(api_key.key_id, secret)
    path = f"/kafka/v3/clusters/{cluster.kafka_cluster_id}/topics/t/records"
    before = _pooled()
    answer = client.post(path, b'{"value": null}', content_type="application/json")
    assert answer.json()["error_code"] == 50302, answer.content  # the key's principal got a producer
    assert _pooled() == before + 1

    services.api_key_revoke(api_key=api_key, actor=SYSTEM_ACTOR)
    watcher.apply(Revocation(world.tenant.pk, (api_key.key_id,)))  # what the watcher's thread does on the news
    wait_until(lambda: _pooled() == before, "the revoked key's producer to leave the pool", timeout=10)
    refused = client.post(path, b'{"value": null}', content_type="application/json")
    assert (refused.status_code, refused.json()["error_code"]) == (401, 401), refused.content
