"""Request handlers called in process: no broker subprocess and no socket, only the owners a handler is given.

The broker's parts are real (its metadata store on Postgres, its logs on disk, the
replica manager, the admin manager, the authorizer); only the network in front of the
handlers is left out. These check the seams the handlers now depend on: Produce's
acks=all through ``ReplicaManager.wait_for_acks``, Fetch's long poll through
``ReplicaManager.delayed_fetch``, and every admin write through ``AdminManager``.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import os
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest
from kio.index import load_request_schema
from psycopg import sql

from dataplane.protocol.build import build
from dataplane.protocol.errors import ErrorCode
from dataplane.protocol.messages import Deferred, Request
from dataplane.protocol.records import Record, build_batch, decode_batches
from dataplane.server.apis import REGISTRY, Later, RequestContext
from dataplane.server.broker import Broker
from dataplane.server.config import BrokerConfig
from tests.support.polling import wait_until_async

ADMIN = RequestContext(principal="User:admin", client_id="in-process", peer="127.0.0.1:1", listener="PLAINTEXT")
ALICE = RequestContext(principal="User:alice", client_id="in-process", peer="127.0.0.1:2", listener="PLAINTEXT")
SECONDS = datetime.timedelta(seconds=1)


@contextlib.asynccontextmanager
async def running(tmp_path: Path, **settings: Any) -> AsyncIterator[Broker]:
    """A broker's objects started on this event loop against a metadata schema of its own (dropped after).

    Nothing listens: the advertised port is only what the registration records.
    """
    url = os.environ["DATABASE_URL"]
    schema = f"meta_{uuid.uuid4().hex[:12]}"
    config = BrokerConfig(node_id=1, host="127.0.0.1", port=0, advertised_port=9, data_dir=tmp_path / "data",
                          metadata_url=url, cluster_id=f"c-{uuid.uuid4().hex[:8]}", metadata_schema=schema,
                          offsets_topic_replication_factor=1, transaction_state_replication_factor=1, **settings)
    broker = Broker(config)
    await broker.start()
    try:
        yield broker
    finally:
        await broker.begin_shutdown()
        await broker.stop()
        with psycopg.connect(url, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))


def in_process(test: Callable[[Broker], Awaitable[None]], tmp_path: Path, **settings: Any) -> None:
    async def scenario() -> None:
        async with running(tmp_path, **settings) as broker:
            await test(broker)
    asyncio.run(scenario())


async def call(broker: Broker, key: int, version: int, values: dict[str, Any],
               context: RequestContext = ADMIN) -> Any:
    """One request straight into its handler with the broker's owners (never the Broker itself)."""
    request = Request(key, version, 1, context.client_id, build(load_request_schema(key, version), values))
    answer = await REGISTRY[key].handler(broker.owners, request, context)
    return await answer.response if isinstance(answer, Later) else answer


def create(name: str, partitions: int = 1, *, validate_only: bool = False) -> dict[str, Any]:
    return {"topics": [{"name": name, "num_partitions": partitions, "replication_factor": 1, "assignments": (),
                        "configs": ()}], "timeout": 30 * SECONDS, "validate_only": validate_only}


def produce(topic: str, values: list[bytes], *, acks: int = -1, partition: int = 0) -> dict[str, Any]:
    batch = build_batch([Record(offset=i, timestamp=1000 + i, key=None, value=v, headers=())
                         for i, v in enumerate(values)])
    return {"transactional_id": None, "acks": acks, "timeout": 10 * SECONDS, "topic_data": [
        {"name": topic, "partition_data": [{"index": partition, "records": batch}]}]}


def fetch(topic: str, offset: int, *, min_bytes: int = 1, max_wait: float = 0.0) -> dict[str, Any]:
    return {"replica_id": -1, "max_wait": datetime.timedelta(seconds=max_wait), "min_bytes": min_bytes,
            "max_bytes": 1 << 20, "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": topic, "partitions": [{"partition": 0, "current_leader_epoch": -1,
                                                        "fetch_offset": offset, "last_fetched_epoch": -1,
                                                        "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}],
            "forgotten_topics_data": (), "rack_id": ""}


async def watched(broker: Broker, topic: str) -> None:
    """Until a long poll watches the partition (its first pass found nothing)."""
    partition = broker.replicas.leader_partition(topic, 0)
    await wait_until_async(lambda: bool(partition._consumer_watchers), "a long poll watching the partition")


def fetched_values(response: Any) -> list[bytes | None]:
    records = response.responses[0].partitions[0].records
    data = records.source.read_bytes() if isinstance(records, Deferred) else bytes(records or b"")
    return [r.value for batch in decode_batches(data) for r in batch.records]


def test_produce_acks_all_then_fetch_reads_it_back(tmp_path: Path) -> None:
    async def test(broker: Broker) -> None:
        created = await call(broker, 19, 7, create("orders", 2))
        assert created.topics[0].error_code.value == 0 and created.topics[0].num_partitions == 2
        answer = await call(broker, 0, 9, produce("orders", [b"a", b"b", b"c"]))
        part = answer.responses[0].partition_responses[0]
        assert (part.error_code.value, part.base_offset) == (0, 0)
        again = await call(broker, 0, 9, produce("orders", [b"d"]))
        assert again.responses[0].partition_responses[0].base_offset == 3
        got = await call(broker, 1, 12, fetch("orders", 1))
        entry = got.responses[0].partitions[0]
        assert (entry.error_code.value, entry.high_watermark) == (0, 4)
        assert fetched_values(got) == [b"a", b"b", b"c", b"d"]  # whole batches, from the one holding offset 1
    in_process(test, tmp_path)


def test_a_long_poll_waits_in_the_replica_manager_and_a_write_wakes_it(tmp_path: Path) -> None:
    async def test(broker: Broker) -> None:
        await call(broker, 19, 7, create("events"))
        # A minute's max wait: if it answers, the write woke it (its deadline never came).
        poll = asyncio.create_task(call(broker, 1, 12, fetch("events", 0, max_wait=60.0)))
        await watched(broker, "events")  # the first pass read nothing and watches the partition
        assert not poll.done()
        await call(broker, 0, 9, produce("events", [b"late"], acks=1))
        got = await asyncio.wait_for(poll, 30)
        assert fetched_values(got) == [b"late"]
    in_process(test, tmp_path)


def test_a_stopping_broker_ends_long_polls(tmp_path: Path) -> None:
    async def test(broker: Broker) -> None:
        await call(broker, 19, 7, create("quiet"))
        poll = asyncio.create_task(call(broker, 1, 12, fetch("quiet", 0, max_wait=60.0)))
        await watched(broker, "quiet")
        assert not poll.done()
        await broker.begin_shutdown()
        got = await asyncio.wait_for(poll, 30)
        assert fetched_values(got) == []
    in_process(test, tmp_path)


@pytest.mark.parametrize(("values", "code"), [
    (produce("orders", [b"x"], acks=2), ErrorCode.INVALID_REQUIRED_ACKS),
    (produce("nowhere", [b"x"]), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    (produce("orders", [b"x"], partition=5), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    ({**produce("orders", []), "topic_data": [{"name": "orders", "partition_data": [{"index": 0, "records": b""}]}]},
     ErrorCode.INVALID_RECORD),
])
def test_bad_produce_requests_get_kafka_codes(tmp_path: Path, values: dict[str, Any], code: ErrorCode) -> None:
    async def test(broker: Broker) -> None:
        await call(broker, 19, 7, create("orders"))
        answer = await call(broker, 0, 9, values)
        assert answer.responses[0].partition_responses[0].error_code.value == code
        got = await call(broker, 1, 12, fetch("orders", 0))
        assert fetched_values(got) == []  # nothing written
    in_process(test, tmp_path, auto_create_topics=False)


def test_topic_admin_writes_go_through_the_admin_manager(tmp_path: Path) -> None:
    async def test(broker: Broker) -> None:
        dry = await call(broker, 19, 7, create("logs", 3, validate_only=True))
        assert dry.topics[0].error_code.value == 0 and broker.metadata.topic("logs") is None
        await call(broker, 19, 7, create("logs", 3))
        assert len(broker.metadata.topics["logs"].partitions) == 3  # visible here at once: the manager refreshed
        duplicate = await call(broker, 19, 7, create("logs", 3))
        assert duplicate.topics[0].error_code.value == ErrorCode.TOPIC_ALREADY_EXISTS
        grown = await call(broker, 37, 3, {"topics": [{"name": "logs", "count": 5, "assignments": None}],
                                           "timeout": 30 * SECONDS, "validate_only": False})
        assert grown.results[0].error_code.value == 0 and len(broker.metadata.topics["logs"].partitions) == 5
        shrink = await call(broker, 37, 3, {"topics": [{"name": "logs", "count": 2, "assignments": None}],
                                            "timeout": 30 * SECONDS, "validate_only": False})
        assert shrink.results[0].error_code.value == ErrorCode.INVALID_PARTITIONS
        altered = await call(broker, 44, 1, {"resources": [{"resource_type": 2, "resource_name": "logs", "configs": [
            {"name": "retention.ms", "config_operation": 0, "value": "60000"}]}], "validate_only": False})
        assert altered.responses[0].error_code.value == 0
        assert broker.metadata.topics["logs"].configs["retention.ms"] == "60000"
        assert broker.replicas.leader_partition("logs", 0).log.config.retention_ms == 60000  # reached the log
        directory = broker.config.data_dir / "logs-0"
        assert directory.is_dir()
        deleted = await call(broker, 20, 6, {"topics": [{"name": "logs", "topic_id": None}],
                                             "timeout": 30 * SECONDS})
        assert deleted.responses[0].error_code.value == 0
        assert broker.metadata.topic("logs") is None and not directory.exists()  # the replica manager removed it
    in_process(test, tmp_path)


def test_acl_writes_reach_the_authorizer_through_the_admin_manager(tmp_path: Path) -> None:
    async def test(broker: Broker) -> None:
        await call(broker, 19, 7, create("private"))
        denied = await call(broker, 0, 9, produce("private", [b"x"]), context=ALICE)
        assert denied.responses[0].partition_responses[0].error_code.value == ErrorCode.TOPIC_AUTHORIZATION_FAILED
        created = await call(broker, 30, 3, {"creations": [{
            "resource_type": 2, "resource_name": "private", "resource_pattern_type": 3, "principal": "User:alice",
            "host": "*", "operation": 4, "permission_type": 3}]})  # TOPIC, LITERAL, WRITE, ALLOW
        assert created.results[0].error_code.value == 0
        allowed = await call(broker, 0, 9, produce("private", [b"x"]), context=ALICE)
        assert allowed.responses[0].partition_responses[0].error_code.value == 0
        gone = await call(broker, 31, 3, {"filters": [{
            "resource_type_filter": 2, "resource_name_filter": "private", "pattern_type_filter": 3,
            "principal_filter": "User:alice", "host_filter": None, "operation": 4, "permission_type": 3}]})
        assert len(gone.filter_results[0].matching_acls) == 1
        again = await call(broker, 0, 9, produce("private", [b"y"]), context=ALICE)
        assert again.responses[0].partition_responses[0].error_code.value == ErrorCode.TOPIC_AUTHORIZATION_FAILED
        # The registry's SUBJECT resource type is Sluice's own: never stored or filtered on by a broker.
        subject = await call(broker, 30, 3, {"creations": [{
            "resource_type": 100, "resource_name": "orders-value", "resource_pattern_type": 3,
            "principal": "User:alice", "host": "*", "operation": 3, "permission_type": 3}]})
        assert subject.results[0].error_code.value == ErrorCode.INVALID_REQUEST
        assert "not a Kafka resource" in subject.results[0].error_message
        described = await call(broker, 29, 3, {"resource_type_filter": 100, "resource_name_filter": None,
                                               "pattern_type_filter": 1, "principal_filter": None,
                                               "host_filter": None, "operation": 1, "permission_type": 1})
        assert described.error_code.value == ErrorCode.INVALID_REQUEST
    in_process(test, tmp_path, authorizer_enabled=True, super_users=("User:admin",))


def test_a_transactional_write_the_coordinator_cannot_confirm_is_retriable(tmp_path: Path) -> None:
    """KIP-890 verification with no coordinator to ask (``__transaction_state`` not made yet): the producer is told
    NOT_ENOUGH_REPLICAS, a code every client retries, and nothing is written."""
    async def test(broker: Broker) -> None:
        await call(broker, 19, 7, create("orders"))
        batch = build_batch([Record(offset=0, timestamp=1000, key=None, value=b"t", headers=())], producer_id=1000,
                            producer_epoch=0, base_sequence=0, is_transactional=True)
        values = {**produce("orders", []), "transactional_id": "never-initialised",
                  "topic_data": [{"name": "orders", "partition_data": [{"index": 0, "records": batch}]}]}
        answer = await call(broker, 0, 9, values)
        assert answer.responses[0].partition_responses[0].error_code.value == ErrorCode.NOT_ENOUGH_REPLICAS
        assert fetched_values(await call(broker, 1, 12, fetch("orders", 0))) == []
    in_process(test, tmp_path)
