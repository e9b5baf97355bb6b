"""The figures the console's lists show first, against a real broker secured as a managed cluster's: topics
(size, records, replication health, produce rate), clusters (brokers up, throughput, storage), consumer groups
(state, members, lag; unknown lag is null, never 0) and the offset-reset preview."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]
from django.utils import timezone

from controlplane.clusters import throughput
from controlplane.clusters.kafka_clients import admin_as_internal
from controlplane.clusters.models import Agent, BrokerNode, Cluster
from controlplane.tenancy.models import Role
from dataplane.client.admin import ClusterAdmin
from sluice.embedded import free_port_range
from tests.controlplane.conftest import TenantWorld
from tests.controlplane.factories import ClusterFactory, TopicFactory
from tests.support.broker import BrokerProcess
from tests.support.polling import wait_until
from tests.support.secured_broker import secured_broker, store_secrets, super_user_config

pytestmark = [pytest.mark.django_db, pytest.mark.xdist_group("console-figures")]


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with secured_broker(tmp_path_factory.mktemp("console-figures"), f"skc-{uuid.uuid4().hex[:16]}") as process:
        yield process


def _point_at(cluster: Cluster, bootstrap: str) -> Cluster:
    """An agent row and a broker node row for ``bootstrap``, as provisioning would write them."""
    host, port = bootstrap.rsplit(":", 1)
    now = timezone.now()
    agent = Agent.objects.create(host=f"cf-{uuid.uuid4().hex[:8]}", advertised_host=host, port_min=int(port),
                                 port_max=int(port), last_seen=now, started_at=now)
    BrokerNode.objects.create(cluster=cluster, node_id=1, agent=agent, port=int(port))
    return cluster


@pytest.fixture
def cluster(broker: BrokerProcess, world_a: TenantWorld) -> Iterator[Cluster]:
    """World A's cluster row on the module's broker (one row per test: the broker's Kafka id is unique)."""
    made: Cluster = ClusterFactory(tenant=world_a.tenant, kafka_cluster_id=broker.cluster_id)
    store_secrets(made)
    yield _point_at(made, broker.bootstrap)


def _kafka(broker: BrokerProcess) -> dict[str, str]:
    return super_user_config(broker.bootstrap, broker.cluster_id)


def _topic(broker: BrokerProcess, partitions: int = 1) -> str:
    name = f"t-{uuid.uuid4().hex[:8]}"
    _create(broker, [NewTopic(name, partitions, 1)])
    return name


def _create(broker: BrokerProcess, topics: list[NewTopic]) -> None:
    admin = AdminClient(_kafka(broker))  # held until the futures resolve (a collected client cancels them)
    for future in admin.create_topics(topics).values():
        future.result(30)


def _produce(broker: BrokerProcess, topic: str, counts: dict[int, int], size: int = 100) -> None:
    producer = Producer(_kafka(broker))
    for partition, count in counts.items():
        for i in range(count):
            producer.produce(topic, value=b"x" * size, key=str(i).encode(), partition=partition)
    assert producer.flush(30) == 0


def _rows(world: TenantWorld, cluster: Cluster, query: str = "") -> dict[str, dict[str, Any]]:
    response = world.client(Role.VIEWER).get(f"{world.base}/clusters/{cluster.pk}/topics{query}")
    assert response.status_code == 200, response.content
    return {row["name"]: row for row in response.json()["results"]}


FIGURES = ("size_bytes", "record_count", "under_replicated_partitions", "offline_partitions", "bytes_in_per_sec",
           "records_in_per_sec")


def test_topics_list_shows_size_records_health_and_rate(broker: BrokerProcess, cluster: Cluster,
                                                        world_a: TenantWorld) -> None:
    orders, quiet = _topic(broker, partitions=2), _topic(broker)
    _produce(broker, orders, {0: 10, 1: 5})
    with admin_as_internal(cluster, bootstrap=broker.bootstrap) as admin:
        admin.delete_records({(orders, 0): 3})  # the log starts at 3: 7 + 5 records left
    for name in (orders, quiet, "not-in-the-cluster"):
        TopicFactory(cluster=cluster, name=name, partitions=2 if name == orders else 1, replication_factor=1)
    rows = _rows(world_a, cluster)
    assert rows[orders]["record_count"] == 12
    assert rows[orders]["size_bytes"] > 15 * 100  # the values alone
    assert (rows[orders]["under_replicated_partitions"], rows[orders]["offline_partitions"]) == (0, 0)
    assert rows[quiet]["record_count"] == 0 and rows[quiet]["size_bytes"] == 0
    assert all(rows["not-in-the-cluster"][f] is None for f in FIGURES)  # unknown, not zero
    assert rows[orders]["bytes_in_per_sec"] is None  # no throughput sample yet: unknown
    detail = world_a.client(Role.VIEWER).get(f"{world_a.base}/clusters/{cluster.pk}/topics/{orders}").json()
    assert detail["record_count"] == 12 and detail["size_bytes"] == rows[orders]["size_bytes"]

    # Two samples a minute apart, with 20 records of 100 B between them: the rate is that minute's.
    with admin_as_internal(cluster, bootstrap=broker.bootstrap) as admin:
        throughput.record(cluster, timezone.now() - timedelta(seconds=60), throughput.measure(admin, {}))
        _produce(broker, orders, {0: 20})
        throughput.record(cluster, timezone.now(), throughput.measure(admin, {}))
    rates = _rows(world_a, cluster)[orders]
    assert rates["records_in_per_sec"] == pytest.approx(20 / 60, rel=0.05)
    assert rates["bytes_in_per_sec"] > 20 * 100 / 60
    assert _rows(world_a, cluster)[quiet]["bytes_in_per_sec"] == 0.0  # sampled, nothing produced: zero


def test_a_page_of_topics_is_one_batched_round_to_the_cluster_then_cached(
        broker: BrokerProcess, cluster: Cluster, world_a: TenantWorld, monkeypatch: pytest.MonkeyPatch) -> None:
    names = [f"page-{i:02d}-{uuid.uuid4().hex[:6]}" for i in range(12)]
    _create(broker, [NewTopic(n, 1, 1) for n in names])
    for name in names:
        TopicFactory(cluster=cluster, name=name, partitions=1, replication_factor=1)
    calls: dict[str, int] = {"describe_topics": 0, "offsets": 0, "partition_sizes": 0}
    for method in calls:
        real = getattr(ClusterAdmin, method)

        def counted(self: ClusterAdmin, *args: Any, _real: Any = real, _name: str = method, **kw: Any) -> Any:
            calls[_name] += 1
            return _real(self, *args, **kw)
        monkeypatch.setattr(ClusterAdmin, method, counted)
    rows = _rows(world_a, cluster, "?limit=10")
    assert len(rows) == 10 and all(row["record_count"] == 0 for row in rows.values())
    assert calls == {"describe_topics": 1, "offsets": 2, "partition_sizes": 1}  # earliest and latest
    _rows(world_a, cluster, "?limit=10")  # the same page again: from the cache
    assert calls == {"describe_topics": 1, "offsets": 2, "partition_sizes": 1}
    second = _rows(world_a, cluster, "?limit=10&offset=10")  # the next page: its two names only, one round
    assert len(second) == 2 and calls == {"describe_topics": 2, "offsets": 4, "partition_sizes": 2}


def test_an_unreachable_cluster_lists_its_topics_with_unknown_figures(world_a: TenantWorld) -> None:
    down = _point_at(ClusterFactory(tenant=world_a.tenant), f"127.0.0.1:{free_port_range(1)[0]}")
    store_secrets(down)
    TopicFactory(cluster=down, name="orders")
    rows = _rows(world_a, down)
    assert all(rows["orders"][f] is None for f in FIGURES)


def test_clusters_list_shows_brokers_up_throughput_and_storage(broker: BrokerProcess, cluster: Cluster,
                                                               world_a: TenantWorld) -> None:
    def listed() -> dict[str, Any]:
        response = world_a.client(Role.VIEWER).get(f"{world_a.base}/clusters")
        assert response.status_code == 200
        return {row["id"]: row for row in response.json()["results"]}[str(cluster.pk)]

    before = listed()
    assert before["brokers_total"] == 3 and before["brokers_up"] is None  # no reconcile has looked yet
    assert all(before[f] is None for f in ("bytes_in_per_sec", "bytes_out_per_sec", "records_in_per_sec",
                                          "records_out_per_sec", "storage_bytes"))
    Cluster.objects.filter(pk=cluster.pk).update(status={**cluster.status, "brokers": [
        {"node_id": 1, "registered": True, "retiring": False}, {"node_id": 2, "registered": False, "retiring": False},
        {"node_id": 3, "registered": True, "retiring": True}]})
    topic = _topic(broker)
    with admin_as_internal(cluster, bootstrap=broker.bootstrap) as admin:
        throughput.record(cluster, timezone.now() - timedelta(seconds=30), throughput.measure(admin, {}))
        _produce(broker, topic, {0: 30})
        throughput.record(cluster, timezone.now(), throughput.measure(admin, {1: {topic: 6000}}))
        on_disk = sum(s.size_bytes for s in admin.partition_sizes())
    after = listed()
    assert after["brokers_up"] == 1  # registered and not retiring
    assert after["records_in_per_sec"] == pytest.approx(30 / 30, rel=0.05)
    assert after["bytes_out_per_sec"] == pytest.approx(6000 / 30, rel=0.05)
    assert after["bytes_in_per_sec"] > 0 and after["records_out_per_sec"] == 0.0
    assert after["storage_bytes"] == on_disk > 30 * 100
    detail = world_a.client(Role.VIEWER).get(f"{world_a.base}/clusters/{cluster.pk}").json()
    assert detail["storage_bytes"] == on_disk and detail["brokers_up"] == 1


def test_another_tenants_cluster_and_topics_stay_404(cluster: Cluster, world_b: TenantWorld) -> None:
    TopicFactory(cluster=cluster, name="secret")
    client = world_b.client(Role.OWNER)
    for path in ("", "/topics", "/topics/secret", "/consumer-groups"):
        assert client.get(f"{world_b.base}/clusters/{cluster.pk}{path}").status_code == 404, path


def _member(broker: BrokerProcess, group: str, topic: str) -> Consumer:
    """A live member of ``group`` that owns ``topic``'s partitions and never commits."""
    consumer = Consumer({**_kafka(broker), "group.id": group, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    wait_until(lambda: consumer.poll(0.2) is not None or bool(consumer.assignment()), "an assignment", 60)
    return consumer


def test_a_group_that_never_committed_has_unknown_lag_not_zero(broker: BrokerProcess, cluster: Cluster,
                                                               world_a: TenantWorld) -> None:
    topic, group = _topic(broker, partitions=2), f"g-{uuid.uuid4().hex[:6]}"
    _produce(broker, topic, {0: 4, 1: 6})
    consumer = _member(broker, group, topic)
    base = f"{world_a.base}/clusters/{cluster.pk}/consumer-groups"
    client = world_a.client(Role.VIEWER)
    try:
        listed = {g["group_id"]: g for g in client.get(base).json()}[group]
        assert listed["total_lag"] is None and listed["members"] == 1
        assert (listed["partition_count"], listed["uncommitted_partitions"], listed["topics"]) == (2, 2, [topic])
        detail = client.get(f"{base}/{group}").json()
        assert [(p["partition"], p["committed_offset"], p["lag"]) for p in detail["partitions"]] == [
            (0, None, None), (1, None, None)]
        assert detail["total_lag"] is None and all(p["member_id"] for p in detail["partitions"])
        consumer.commit(offsets=[TopicPartition(topic, 1, 2)], asynchronous=False)
        listed = {g["group_id"]: g for g in client.get(base).json()}[group]
        assert (listed["total_lag"], listed["uncommitted_partitions"]) == (4, 1)  # partition 1: 6 - 2

        # The reset preview: per partition, where the group is and will be, and the lag each way.
        plan = world_a.client(Role.ADMIN).post(f"{base}/{group}/reset-offsets",
                                                {"to": "earliest", "topic": topic}, format="json")
        assert plan.status_code == 200, plan.content
        assert plan.json()["dry_run"] is True
        assert plan.json()["partitions"] == [
            {"topic": topic, "partition": 0, "current_offset": None, "new_offset": 0, "log_start_offset": 0,
             "log_end_offset": 4, "lag_before": None, "lag_after": 4, "lag_delta": None, "offset_delta": None},
            {"topic": topic, "partition": 1, "current_offset": 2, "new_offset": 0, "log_start_offset": 0,
             "log_end_offset": 6, "lag_before": 4, "lag_after": 6, "lag_delta": 2, "offset_delta": -2}]
        bad = world_a.client(Role.ADMIN).post(f"{base}/{group}/reset-offsets", {"to": "sideways"}, format="json")
        assert bad.status_code == 400 and "to" in bad.json()["extra"]["fields"]
    finally:
        consumer.close()
