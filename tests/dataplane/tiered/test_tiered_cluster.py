"""The remote tier across brokers and topic lifetimes: topic deletion removes its objects; a follower below its
leader's local log start rebuilds from the remote tier (KIP-405) and can then lead and serve everything."""

from __future__ import annotations

import signal
import uuid
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic

from dataplane.client.admin import ClusterAdmin
from sluice.objectstore import ObjectStoreServer
from tests.dataplane.tiered.conftest import (
    EARLIEST_LOCAL,
    LATEST_TIERED,
    consume_all,
    create_topic,
    list_offset,
    produce,
    remote_args,
    s3,
)
from tests.support.broker import BrokerProcess
from tests.support.polling import wait_until

TIERED = {"remote.storage.enable": "true", "segment.bytes": "16384", "local.retention.bytes": "32768"}


def test_deleting_a_topic_deletes_its_remote_objects(tiered_broker: BrokerProcess,
                                                     object_store: ObjectStoreServer, prefix: str) -> None:
    doomed, kept = f"doomed-{uuid.uuid4().hex[:8]}", f"kept-{uuid.uuid4().hex[:8]}"
    for topic in (doomed, kept):
        create_topic(tiered_broker.bootstrap, topic, TIERED)
        produce(tiered_broker.bootstrap, topic, 1000)
    store = s3(object_store)

    def objects(topic: str) -> list[str]:
        return [o.key for o in store.list_objects(f"{prefix}/") if f"/{topic}-" in o.key]
    wait_until(lambda: objects(doomed) and objects(kept), "uploads of both topics")
    admin = AdminClient({"bootstrap.servers": tiered_broker.bootstrap})
    admin.delete_topics([doomed])[doomed].result(30)
    wait_until(lambda: not objects(doomed), "the deleted topic's objects gone",
               detail=lambda: tiered_broker.output()[-3000:])
    assert objects(kept)  # another topic's objects stay


def test_follower_below_the_leaders_local_start_rebuilds_from_the_remote_tier(
        tmp_path: Path, object_store: ObjectStoreServer, prefix: str) -> None:
    cluster = f"tier-{uuid.uuid4().hex[:12]}"
    common = [*remote_args(object_store, prefix), "--broker-session-timeout-ms", "3000",
              "--replica-lag-time-max-ms", "2000"]
    one = BrokerProcess(tmp_path / "one", cluster, extra_args=common)
    two = BrokerProcess(tmp_path / "two", cluster, extra_args=[*common, "--node-id", "2"])
    one.start()
    two.start()
    try:
        topic = f"tiered-{uuid.uuid4().hex[:8]}"
        admin = AdminClient({"bootstrap.servers": one.bootstrap})
        admin.create_topics([NewTopic(topic, 1, replica_assignment=[[1, 2]],
                                      config={**TIERED, "min.insync.replicas": "1"})])[topic].result(30)
        sent = produce(one.bootstrap, topic, 200)
        two.stop(signal.SIGKILL)
        sent += produce(one.bootstrap, topic, 3000, start=200)
        wait_until(lambda: list_offset(one.port, topic, EARLIEST_LOCAL) > 2000, "the leader's local start past 2000")
        two.start()

        def in_sync() -> bool:
            isr = admin.list_topics(topic, timeout=10).topics[topic].partitions[0].isrs
            return sorted(isr) == [1, 2]
        wait_until(in_sync, "the follower back in the ISR", timeout=90, detail=lambda: two.output()[-4000:])
        assert "rebuilding" in two.output()
        assert not (two.data_dir / f"{topic}-0" / f"{0:020d}.log").exists()  # restarted above the old data

        one.stop(signal.SIGKILL)  # broker 2 leads now and serves the whole log, remote part included
        wait_until(lambda: list_offset(two.port, topic, LATEST_TIERED) >= 0, "broker 2 leading", timeout=60,
                   retry_on=(AssertionError,))
        got = consume_all(two.bootstrap, topic, 3200)
        assert [o for o, _, _ in got] == list(range(3200))
        assert [(k, v) for _, k, v in got] == sent
    finally:
        one.stop(signal.SIGKILL)
        two.stop(signal.SIGKILL)


def test_reassigning_a_tiered_partition_to_a_new_broker(tmp_path: Path, object_store: ObjectStoreServer,
                                                        prefix: str) -> None:
    """A new replica starts below the leader's local log start: it rebuilds from the remote tier, joins the ISR,
    the reassignment completes, and the new broker then serves the whole log alone."""
    cluster = f"tier-{uuid.uuid4().hex[:12]}"
    common = [*remote_args(object_store, prefix), "--broker-session-timeout-ms", "3000"]
    one = BrokerProcess(tmp_path / "one", cluster, extra_args=common)
    two = BrokerProcess(tmp_path / "two", cluster, extra_args=[*common, "--node-id", "2"])
    one.start()
    two.start()
    try:
        topic = f"tiered-{uuid.uuid4().hex[:8]}"
        admin = AdminClient({"bootstrap.servers": one.bootstrap})
        admin.create_topics([NewTopic(topic, 1, replica_assignment=[[1]], config=TIERED)])[topic].result(30)
        sent = produce(one.bootstrap, topic, 3000)
        wait_until(lambda: list_offset(one.port, topic, EARLIEST_LOCAL) > 2000, "the leader's local start past 2000")
        reassign = ClusterAdmin(one.bootstrap)
        assert reassign.alter_reassignments({(topic, 0): [2]}) == {(topic, 0): None}
        wait_until(lambda: not reassign.list_reassignments(), "the reassignment to finish", timeout=90,
                   detail=lambda: two.output()[-4000:])
        assert "rebuilding" in two.output()
        wait_until(lambda: admin.list_topics(topic, timeout=10).topics[topic].partitions[0].leader == 2,
                   "broker 2 leading")
        one.stop(signal.SIGKILL)
        got = consume_all(two.bootstrap, topic, 3000)
        assert [o for o, _, _ in got] == list(range(3000))
        assert [(k, v) for _, k, v in got] == sent
    finally:
        one.stop(signal.SIGKILL)
        two.stop(signal.SIGKILL)
