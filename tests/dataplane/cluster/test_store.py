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
    metadata = MetadataStore(conn, "c1", schema)
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
    assert store.delete_topic("gone") == created.topic_id
    assert store.topics() == []
    with pytest.raises(KafkaError) as caught:
        store.delete_topic("gone")
    assert caught.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_changes_bump_the_version_and_notify_listeners(store: MetadataStore) -> None:
    with psycopg.connect(os.environ["DATABASE_URL"], autocommit=True) as listener:
        listener.execute(sql.SQL("LISTEN {}").format(sql.Identifier(notify_channel("c1"))))
        before = store.metadata_version()
        store.create_topic("t", 1, 1, [1])
        assert store.metadata_version() == before + 1
        notes = list(listener.notifies(timeout=10, stop_after=1))
        assert [n.channel for n in notes] == [notify_channel("c1")]


def test_producer_id_blocks_never_overlap(store: MetadataStore) -> None:
    other = MetadataStore(psycopg.connect(os.environ["DATABASE_URL"]), "c1", store.schema)
    try:
        blocks = [store.allocate_producer_ids(10), other.allocate_producer_ids(5), store.allocate_producer_ids(10)]
    finally:
        other.conn.close()
    ids = [pid for block in blocks for pid in block]
    assert len(ids) == len(set(ids)) == 25 and min(ids) == 0
