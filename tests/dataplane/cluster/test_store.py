"""The metadata store against real Postgres: topics, errors as Kafka codes, notifications, producer ids."""

from __future__ import annotations

import os
import random
import uuid
from collections.abc import Iterator

import psycopg
import pytest
from psycopg import sql

from dataplane.cluster.migrations import migrate
from dataplane.cluster.store import MetadataStore, notify_channel
from dataplane.protocol.errors import ErrorCode, KafkaError


@pytest.fixture
def store() -> Iterator[MetadataStore]:
    url = os.environ["DATABASE_URL"]
    schema = f"meta_{uuid.uuid4().hex[:12]}"
    migrate(url, schema)
    conn = psycopg.connect(url)
    # A cluster id of its own: NOTIFY channels are named by cluster id and shared by the whole database, so
    # tests on other workers writing to a "c1" of their own schema were heard by this one's listener.
    metadata = MetadataStore(conn, f"c-{uuid.uuid4().hex[:8]}", schema)
    metadata.ensure_cluster()
    try:
        yield metadata
    finally:
        conn.close()
        with psycopg.connect(url, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))


def test_create_topic_spreads_replicas_and_leaders(store: MetadataStore) -> None:
    topic = store.create_topic("orders", 6, 3, [1, 2, 3], configs={"retention.ms": 1000}, rng=random.Random(7))
    assert isinstance(topic.topic_id, uuid.UUID)
    assert topic.configs == {"retention.ms": "1000"}
    assert [p.partition for p in topic.partitions] == list(range(6))
    for p in topic.partitions:
        assert len(set(p.replicas)) == 3 and p.isr == p.replicas and p.leader == p.replicas[0]
        assert p.leader_epoch == 0
    leaders = sorted(p.leader for p in topic.partitions)
    assert leaders == [1, 1, 2, 2, 3, 3]
    assert store.topic("orders") == topic


@pytest.mark.parametrize(("args", "code"), [
    (("bad name", 1, 1), ErrorCode.INVALID_TOPIC_EXCEPTION),
    (("ok", 0, 1), ErrorCode.INVALID_PARTITIONS),
    (("ok", 1, 4), ErrorCode.INVALID_REPLICATION_FACTOR),
    (("ok", 1, 0), ErrorCode.INVALID_REPLICATION_FACTOR),
])
def test_bad_requests_map_to_kafka_codes_and_change_nothing(store: MetadataStore, args: tuple[str, int, int],
                                                            code: ErrorCode) -> None:
    version = store.metadata_version()
    with pytest.raises(KafkaError) as caught:
        store.create_topic(*args, brokers=[1, 2, 3])
    assert caught.value.code == code
    assert store.topics() == [] and store.metadata_version() == version


def test_bad_configs_are_invalid_config(store: MetadataStore) -> None:
    with pytest.raises(KafkaError) as caught:
        store.create_topic("t", 1, 1, [1], configs={"retention.ms": "soon"})
    assert caught.value.code == ErrorCode.INVALID_CONFIG


def test_duplicates_and_collisions_are_topic_already_exists(store: MetadataStore) -> None:
    store.create_topic("a.b", 1, 1, [1])
    for name in ("a.b", "a_b"):
        with pytest.raises(KafkaError) as caught:
            store.create_topic(name, 1, 1, [1])
        assert caught.value.code == ErrorCode.TOPIC_ALREADY_EXISTS


def test_delete_and_unknown_topic(store: MetadataStore) -> None:
    created = store.create_topic("gone", 2, 1, [1])
    assert store.delete_topic("gone") == created
    assert store.topics() == []
    with pytest.raises(KafkaError) as caught:
        store.delete_topic("gone")
    assert caught.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_changes_bump_the_version_and_notify_listeners(store: MetadataStore) -> None:
    with psycopg.connect(os.environ["DATABASE_URL"], autocommit=True) as listener:
        listener.execute(sql.SQL("LISTEN {}").format(sql.Identifier(notify_channel(store.cluster_id))))
        before = store.metadata_version()
        store.create_topic("t", 1, 1, [1])
        assert store.metadata_version() == before + 1
        notes = list(listener.notifies(timeout=10, stop_after=1))
        assert [n.channel for n in notes] == [notify_channel(store.cluster_id)]


def test_producer_id_blocks_never_overlap(store: MetadataStore) -> None:
    other = MetadataStore(psycopg.connect(os.environ["DATABASE_URL"]), store.cluster_id, store.schema)
    try:
        blocks = [store.allocate_producer_ids(10), other.allocate_producer_ids(5), store.allocate_producer_ids(10)]
    finally:
        other.conn.close()
    ids = [pid for block in blocks for pid in block]
    assert len(ids) == len(set(ids)) == 25 and min(ids) == 0


def test_delete_by_id_and_internal_topics_are_refused(store: MetadataStore) -> None:
    created = store.create_topic("by-id", 1, 1, [1])
    assert store.delete_topic(topic_id=created.topic_id).name == "by-id"
    with pytest.raises(KafkaError) as caught:
        store.delete_topic(topic_id=created.topic_id)
    assert caught.value.code == ErrorCode.UNKNOWN_TOPIC_ID
    store.create_topic("__consumer_offsets", 1, 1, [1], internal=True)
    with pytest.raises(KafkaError) as caught:
        store.delete_topic("__consumer_offsets")
    assert caught.value.code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    assert [t.name for t in store.topics()] == ["__consumer_offsets"]


def test_create_partitions_only_grows(store: MetadataStore) -> None:
    store.create_topic("grow", 2, 2, [1, 2, 3])
    version = store.metadata_version()
    assert len(store.create_partitions("grow", 5, [1, 2, 3], dry_run=True).partitions) == 5
    assert store.metadata_version() == version and len(store.topic("grow").partitions) == 2  # type: ignore[union-attr]
    grown = store.create_partitions("grow", 5, [1, 2, 3], rng=random.Random(1))
    assert store.topic("grow") == grown and store.metadata_version() == version + 1
    assert [p.partition for p in grown.partitions] == list(range(5))
    assert all(len(set(p.replicas)) == 2 and p.leader == p.replicas[0] for p in grown.partitions)
    for count in (5, 3):
        with pytest.raises(KafkaError) as caught:
            store.create_partitions("grow", count, [1, 2, 3])
        assert caught.value.code == ErrorCode.INVALID_PARTITIONS
    manual = store.create_partitions("grow", 6, [1, 2, 3], assignments=[[3, 1]])
    assert manual.partitions[5].replicas == (3, 1)
    for bad in ([[1]], [[1, 1]], [[1, 9]], [[1, 2], [2, 3]]):
        with pytest.raises(KafkaError) as caught:
            store.create_partitions("grow", 7, [1, 2, 3], assignments=bad)
        assert caught.value.code == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    with pytest.raises(KafkaError) as caught:
        store.create_partitions("absent", 2, [1])
    assert caught.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_alter_topic_configs_validates_persists_and_notifies(store: MetadataStore) -> None:
    store.create_topic("cfg", 1, 1, [1], configs={"retention.ms": 1000})
    version = store.metadata_version()
    assert store.alter_topic_configs("cfg", lambda cur: {**cur, "cleanup.policy": "compact"},
                                     dry_run=True) == {"retention.ms": "1000", "cleanup.policy": "compact"}
    assert store.metadata_version() == version
    assert store.alter_topic_configs("cfg", lambda cur: {"max.message.bytes": 100}) == {"max.message.bytes": "100"}
    assert store.topic("cfg").configs == {"max.message.bytes": "100"}  # type: ignore[union-attr]
    assert store.metadata_version() == version + 1
    for bad in ({"no.such": "1"}, {"retention.ms": "soon"}):
        with pytest.raises(KafkaError) as caught:
            store.alter_topic_configs("cfg", lambda cur, bad=bad: bad)  # type: ignore[misc]
        assert caught.value.code == ErrorCode.INVALID_CONFIG
    assert store.topic("cfg").configs == {"max.message.bytes": "100"}  # type: ignore[union-attr]
    with pytest.raises(KafkaError) as caught:
        store.alter_topic_configs("absent", dict)
    assert caught.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_cluster_configs_replace_and_validate(store: MetadataStore) -> None:
    assert store.cluster_configs() == {}
    version = store.metadata_version()
    assert store.alter_cluster_configs(lambda cur: {"retention.ms": 5}) == {"retention.ms": "5"}
    assert store.alter_cluster_configs(lambda cur: {**cur, "segment.bytes": "1000"}) == {
        "retention.ms": "5", "segment.bytes": "1000"}
    assert store.cluster_configs() == {"retention.ms": "5", "segment.bytes": "1000"}
    assert store.metadata_version() == version + 2
    with pytest.raises(KafkaError) as caught:
        store.alter_cluster_configs(lambda cur: {"segment.bytes": "1"})
    assert caught.value.code == ErrorCode.INVALID_CONFIG
    assert store.alter_cluster_configs(lambda cur: {}) == {} and store.cluster_configs() == {}


def test_controller_lease_is_taken_kept_and_fenced(store: MetadataStore) -> None:
    assert store.acquire_controller(1, 30) == (1, 1)
    assert store.acquire_controller(2, 30) == (1, 1)   # held by 1
    assert store.acquire_controller(1, 30) == (1, 1)   # renewed, same epoch
    store.conn.execute("UPDATE controller SET lease_expires_at = now() - interval '1 second'")
    assert store.acquire_controller(2, 30) == (2, 2)   # lapsed: the next epoch
    topic = store.create_topic("fenced", 1, 1, [1])
    state = topic.partitions[0]
    from dataplane.cluster.store import PartitionChange
    change = PartitionChange(topic.topic_id, 0, state.partition_epoch, -1, state.isr, True)
    with pytest.raises(KafkaError) as stale:
        store.apply_partition_changes(1, 1, [change])      # the ex-controller's write
    assert stale.value.code == ErrorCode.STALE_CONTROLLER_EPOCH
    assert store.apply_partition_changes(2, 2, [change]) == 1
    assert store.apply_partition_changes(2, 2, [change]) == 0   # made from an old partition epoch: skipped
    after = store.topic("fenced")
    assert after is not None and after.partitions[0].leader == -1 and after.partitions[0].leader_epoch == 1


def test_isr_change_is_a_compare_and_set_on_leader_and_epochs(store: MetadataStore) -> None:
    topic = store.create_topic("isr", 1, 3, [1, 2, 3])
    state = topic.partitions[0]
    leader = state.leader
    rest = tuple(r for r in state.replicas if r != leader)
    shrunk = store.alter_isr(topic.topic_id, 0, leader=leader, leader_epoch=0, partition_epoch=0,
                             isr=(leader, rest[0]))
    assert shrunk is not None and shrunk.isr == (leader, rest[0]) and shrunk.partition_epoch == 1
    # A stale partition epoch, a wrong leader, or a broker outside the replicas: nothing changes.
    assert store.alter_isr(topic.topic_id, 0, leader=leader, leader_epoch=0, partition_epoch=0, isr=(leader,)) is None
    assert store.alter_isr(topic.topic_id, 0, leader=rest[0], leader_epoch=0, partition_epoch=1,
                           isr=(rest[0],)) is None
    assert store.alter_isr(topic.topic_id, 0, leader=leader, leader_epoch=0, partition_epoch=1,
                           isr=(leader, 99)) is None
    after = store.topic("isr")
    assert after is not None and after.partitions[0].isr == (leader, rest[0])


def test_reassignment_is_recorded_validated_and_cancelled(store: MetadataStore) -> None:
    from dataplane.cluster.store import BrokerRegistration

    for node in (1, 2, 3):
        store.register_broker(BrokerRegistration(node, "127.0.0.1", 9000 + node, None, uuid.uuid4()), 30)
    _, epoch = store.acquire_controller(1, 30)
    store.create_topic("moving", 1, 2, [1, 2], rng=random.Random(0))
    before = store.topic("moving")
    assert before is not None
    original = before.partitions[0].replicas
    with pytest.raises(KafkaError) as refused:
        store.reassign(1, epoch, "moving", 0, [1, 99])
    assert refused.value.code == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    store.reassign(1, epoch, "moving", 0, [3, original[1]])
    during = store.topic("moving")
    assert during is not None
    part = during.partitions[0]
    assert part.replicas == (3, original[1], original[0]) and part.adding == (3,) and part.removing == (original[0],)
    store.reassign(1, epoch, "moving", 0, None)  # cancel: back to the original replicas
    after = store.topic("moving")
    assert after is not None and sorted(after.partitions[0].replicas) == sorted(original)
    assert after.partitions[0].adding == after.partitions[0].removing == ()
    with pytest.raises(KafkaError) as none:
        store.reassign(1, epoch, "moving", 0, None)
    assert none.value.code == ErrorCode.NO_REASSIGNMENT_IN_PROGRESS
