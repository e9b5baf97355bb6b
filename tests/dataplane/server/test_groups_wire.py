"""The group coordinator over the wire, with exact requests (kafka-python's protocol classes encode them).

Client libraries never send a stale generation or an unknown member on purpose; these tests do, and check
each refusal's error code, plus the batched and admin forms no single client exercises.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from kafka.protocol.admin.groups import (
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    ListGroupsRequest,
    ListGroupsResponse,
)
from kafka.protocol.consumer.group import (
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)
from kafka.protocol.metadata import FindCoordinatorRequest, FindCoordinatorResponse

from dataplane.protocol.errors import ErrorCode
from tests.dataplane.server.wire import WireClient
from tests.support.broker import BrokerProcess, logged_broker

_CommitTopic = OffsetCommitRequest.OffsetCommitRequestTopic
_CommitPartition = _CommitTopic.OffsetCommitRequestPartition
GROUP_ARGS = ["--group-min-session-timeout-ms", "100", "--group-initial-rebalance-delay-ms", "0"]


def subscription(*topics: str) -> bytes:
    out = b"\x00\x00" + len(topics).to_bytes(4, "big")
    for t in topics:
        out += len(t).to_bytes(2, "big") + t.encode()
    return out + b"\xff\xff\xff\xff"


@pytest.fixture
def group_broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    broker = logged_broker(tmp_path, extra_args=GROUP_ARGS)
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()


class GroupClient(WireClient):
    """One member's view: join (with the KIP-394 round trip), sync, heartbeat, commit."""

    def find_coordinator(self, *keys: str, version: int = 4, key_type: int = 0) -> Any:
        if version >= 4:
            request = FindCoordinatorRequest[version](key_type=key_type, coordinator_keys=list(keys))
        else:
            request = FindCoordinatorRequest[version](key=keys[0], key_type=key_type)
        return self.call(request, FindCoordinatorResponse, version)

    def join(self, group: str, member_id: str = "", *, instance: str | None = None, session_ms: int = 10_000,
             topics: tuple[str, ...] = ("t",), version: int = 9) -> Any:
        request = JoinGroupRequest[version](
            group_id=group, session_timeout_ms=session_ms, rebalance_timeout_ms=10_000, member_id=member_id,
            group_instance_id=instance, protocol_type="consumer",
            protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=subscription(*topics))])
        return self.call(request, JoinGroupResponse, version)

    def join_fully(self, group: str, **kwargs: Any) -> Any:
        assert self.find_coordinator(group).coordinators[0].error_code == 0  # creates __consumer_offsets
        first = self.join(group, **kwargs)
        if first.error_code == ErrorCode.MEMBER_ID_REQUIRED:
            return self.join(group, first.member_id, **kwargs)
        return first

    def sync(self, group: str, generation: int, member_id: str, assignments: dict[str, bytes] | None = None,
             version: int = 5) -> Any:
        request = SyncGroupRequest[version](
            group_id=group, generation_id=generation, member_id=member_id, group_instance_id=None,
            protocol_type="consumer", protocol_name="range",
            assignments=[SyncGroupRequest.SyncGroupRequestAssignment(member_id=m, assignment=a)
                         for m, a in (assignments or {}).items()])
        return self.call(request, SyncGroupResponse, version)

    def heartbeat(self, group: str, generation: int, member_id: str, version: int = 4) -> int:
        request = HeartbeatRequest[version](group_id=group, generation_id=generation, member_id=member_id,
                                            group_instance_id=None)
        return int(self.call(request, HeartbeatResponse, version).error_code)

    def commit(self, group: str, generation: int, member_id: str, offsets: dict[tuple[str, int], tuple[int, str]],
               version: int = 8) -> dict[tuple[str, int], int]:
        topics: dict[str, list[Any]] = {}
        for (topic, partition), (offset, metadata) in offsets.items():
            topics.setdefault(topic, []).append(_CommitPartition(
                partition_index=partition, committed_offset=offset, committed_leader_epoch=-1,
                committed_metadata=metadata))
        request = OffsetCommitRequest[version](
            group_id=group, generation_id_or_member_epoch=generation, member_id=member_id, group_instance_id=None,
            topics=[_CommitTopic(name=t, partitions=p) for t, p in topics.items()])
        response = self.call(request, OffsetCommitResponse, version)
        return {(t.name, p.partition_index): int(p.error_code) for t in response.topics for p in t.partitions}

    def fetch(self, groups: dict[str, list[tuple[str, int]] | None], version: int = 8) -> Any:
        def topics_of(wanted: list[tuple[str, int]] | None, kind: Any) -> Any:
            if wanted is None:
                return None
            by_topic: dict[str, list[int]] = {}
            for t, p in wanted:
                by_topic.setdefault(t, []).append(p)
            return [kind(name=t, partition_indexes=ps) for t, ps in by_topic.items()]
        if version >= 8:
            group_kind = OffsetFetchRequest.OffsetFetchRequestGroup
            request = OffsetFetchRequest[version](groups=[
                group_kind(group_id=g, topics=topics_of(w, group_kind.OffsetFetchRequestTopics))
                for g, w in groups.items()], require_stable=False)
        else:
            ((group, wanted),) = groups.items()
            request = OffsetFetchRequest[version](
                group_id=group, topics=topics_of(wanted, OffsetFetchRequest.OffsetFetchRequestTopic))
        return self.call(request, OffsetFetchResponse, version)


def create_topic(broker: BrokerProcess, name: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)


def stable_member(client: GroupClient, group: str) -> tuple[str, int]:
    joined = client.join_fully(group)
    assert joined.error_code == 0, joined
    synced = client.sync(group, joined.generation_id, joined.member_id, {joined.member_id: b"a"})
    assert synced.error_code == 0 and synced.assignment == b"a"
    return joined.member_id, joined.generation_id


def test_find_coordinator_names_this_broker_single_and_batched(group_broker: BrokerProcess) -> None:
    with GroupClient(group_broker.port) as client:
        single = client.find_coordinator("g1", version=3)
        assert (single.error_code, single.node_id, single.port) == (0, 1, group_broker.port)
        batched = client.find_coordinator("g1", "g2", "g3", version=4)
        assert [(c.key, c.error_code, c.node_id, c.port) for c in batched.coordinators] == \
            [(g, 0, 1, group_broker.port) for g in ("g1", "g2", "g3")]
        refused = client.find_coordinator("", version=4).coordinators[0]
        assert refused.error_code == ErrorCode.INVALID_REQUEST and refused.error_message
        transactional = client.find_coordinator("tx", version=4, key_type=1).coordinators[0]
        assert (transactional.error_code, transactional.node_id) == (ErrorCode.NONE, 1)  # __transaction_state made


def test_the_offsets_topic_is_internal_compacted_with_fifty_partitions(group_broker: BrokerProcess) -> None:
    from confluent_kafka.admin import AdminClient, ConfigResource

    with GroupClient(group_broker.port) as client:
        client.find_coordinator("g")
    admin = AdminClient({"bootstrap.servers": group_broker.bootstrap})
    topic = admin.list_topics(timeout=10).topics["__consumer_offsets"]
    assert len(topic.partitions) == 50
    resource = ConfigResource(ConfigResource.Type.TOPIC, "__consumer_offsets")
    configs = admin.describe_configs([resource])[resource].result(10)
    assert configs["cleanup.policy"].value == "compact"


def test_stale_generations_and_unknown_members_are_refused(group_broker: BrokerProcess) -> None:
    create_topic(group_broker, "t", 2)
    with GroupClient(group_broker.port) as client:
        member, generation = stable_member(client, "g")
        assert client.heartbeat("g", generation, member) == 0
        assert client.heartbeat("g", generation - 1, member) == ErrorCode.ILLEGAL_GENERATION
        assert client.heartbeat("g", generation, "nobody") == ErrorCode.UNKNOWN_MEMBER_ID
        stale = client.commit("g", generation - 1, member, {("t", 0): (5, "")})
        assert stale == {("t", 0): ErrorCode.ILLEGAL_GENERATION}
        unknown = client.commit("g", generation, "nobody", {("t", 0): (5, "")})
        assert unknown == {("t", 0): ErrorCode.UNKNOWN_MEMBER_ID}
        assert client.sync("g", generation + 1, member).error_code == ErrorCode.ILLEGAL_GENERATION
        assert client.sync("g", generation, "nobody").error_code == ErrorCode.UNKNOWN_MEMBER_ID
        assert client.join("g", "nobody").error_code == ErrorCode.UNKNOWN_MEMBER_ID
        # Nothing was stored by the refused commits.
        fetched = client.fetch({"g": [("t", 0)]})
        assert fetched.groups[0].topics[0].partitions[0].committed_offset == -1
        # A second member joins: the first learns of the rebalance from its heartbeat, rejoins, and its
        # old generation is stale from then on.
        with GroupClient(group_broker.port) as other, ThreadPoolExecutor(1) as pool:
            second = pool.submit(other.join_fully, "g")
            deadline = time.monotonic() + 30
            while client.heartbeat("g", generation, member) != ErrorCode.REBALANCE_IN_PROGRESS:
                assert time.monotonic() < deadline, "the second member's join never started a rebalance"
            rejoined = client.join("g", member)
            assert rejoined.error_code == 0 and rejoined.generation_id == generation + 1
            assert second.result(30).generation_id == generation + 1
            assert client.commit("g", generation, member, {("t", 0): (5, "")}) == \
                {("t", 0): ErrorCode.ILLEGAL_GENERATION}
            assert client.sync("g", generation, member).error_code == ErrorCode.ILLEGAL_GENERATION


def test_commits_round_trip_with_metadata_and_batched_fetch(group_broker: BrokerProcess) -> None:
    create_topic(group_broker, "t", 3)
    with GroupClient(group_broker.port) as client:
        member, generation = stable_member(client, "g1")
        assert client.commit("g1", generation, member, {("t", 0): (10, "meta-ü"), ("t", 2): (7, "")}) == \
            {("t", 0): 0, ("t", 2): 0}
        # Outside group management (generation -1, no member id): an admin tool resetting an empty group.
        assert client.commit("g2", -1, "", {("t", 1): (3, "reset")}) == {("t", 1): 0}
        assert client.commit("g2", -1, "", {("nope", 0): (3, "")}) == \
            {("nope", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
        assert client.commit("g2", -1, "", {("t", 0): (1, "x" * 5000)}) == \
            {("t", 0): ErrorCode.OFFSET_METADATA_TOO_LARGE}
        response = client.fetch({"g1": [("t", 0), ("t", 1)], "g2": None, "g3": None})
        by_group = {g.group_id: {(t.name, p.partition_index): (p.committed_offset, p.metadata, p.error_code)
                                 for t in g.topics for p in t.partitions} for g in response.groups}
        assert by_group == {"g1": {("t", 0): (10, "meta-ü", 0), ("t", 1): (-1, "", 0)},
                            "g2": {("t", 1): (3, "reset", 0)}, "g3": {}}
        single = client.fetch({"g1": None}, version=7)
        assert single.error_code == 0
        assert {(t.name, p.partition_index): p.committed_offset for t in single.topics for p in t.partitions} == \
            {("t", 0): 10, ("t", 2): 7}


def test_bad_group_requests_get_error_codes_not_a_closed_connection(group_broker: BrokerProcess) -> None:
    with GroupClient(group_broker.port) as client:
        assert client.join("g").error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE  # no __consumer_offsets yet
        client.find_coordinator("g")
        assert client.join("").error_code == ErrorCode.INVALID_GROUP_ID
        assert client.join("g", session_ms=50).error_code == ErrorCode.INVALID_SESSION_TIMEOUT
        assert client.join("g", session_ms=10**8).error_code == ErrorCode.INVALID_SESSION_TIMEOUT
        assert client.heartbeat("", 1, "m") == ErrorCode.INVALID_GROUP_ID
        assert client.heartbeat("never-seen", 1, "m") == ErrorCode.UNKNOWN_MEMBER_ID
        assert client.sync("never-seen", 1, "m").error_code == ErrorCode.UNKNOWN_MEMBER_ID
        leave = client.call(LeaveGroupRequest[5](group_id="never-seen", members=[
            LeaveGroupRequest.MemberIdentity(member_id="m", group_instance_id=None, reason=None)]),
            LeaveGroupResponse, 5)
        assert leave.error_code == 0 and leave.members[0].error_code == ErrorCode.UNKNOWN_MEMBER_ID
        # Still serving on the same connection.
        assert client.find_coordinator("g").coordinators[0].error_code == 0


def test_describe_list_leave_and_delete_groups(group_broker: BrokerProcess) -> None:
    create_topic(group_broker, "t", 1)
    with GroupClient(group_broker.port) as client:
        member, generation = stable_member(client, "busy")
        client.commit("idle", -1, "", {("t", 0): (1, "")})
        described = client.call(DescribeGroupsRequest[5](groups=["busy", "idle", "ghost"],
                                                         include_authorized_operations=False),
                                DescribeGroupsResponse, 5)
        states = {g.group_id: (g.error_code, g.group_state, g.protocol_data) for g in described.groups}
        assert states == {"busy": (0, "Stable", "range"), "idle": (0, "Empty", ""), "ghost": (0, "Dead", "")}
        busy = next(g for g in described.groups if g.group_id == "busy")
        assert busy.members[0].member_id == member and busy.members[0].client_host == "/127.0.0.1"
        assert busy.members[0].member_assignment == b"a" and busy.members[0].client_id == "wire-test"
        v6 = client.call(DescribeGroupsRequest[6](groups=["ghost"], include_authorized_operations=False),
                         DescribeGroupsResponse, 6)
        assert v6.groups[0].error_code == ErrorCode.GROUP_ID_NOT_FOUND
        listed = client.call(ListGroupsRequest[5](states_filter=[], types_filter=[]), ListGroupsResponse, 5)
        assert {(g.group_id, g.group_state, g.group_type) for g in listed.groups} >= \
            {("busy", "Stable", "classic"), ("idle", "Empty", "classic")}
        stable_only = client.call(ListGroupsRequest[4](states_filter=["Stable"]), ListGroupsResponse, 4)
        assert [g.group_id for g in stable_only.groups] == ["busy"]
        deleted = client.call(DeleteGroupsRequest[2](groups_names=["busy", "idle", "ghost"]), DeleteGroupsResponse, 2)
        assert {r.group_id: r.error_code for r in deleted.results} == \
            {"busy": ErrorCode.NON_EMPTY_GROUP, "idle": 0, "ghost": ErrorCode.GROUP_ID_NOT_FOUND}
        assert client.fetch({"idle": None}).groups[0].topics == []
        left = client.call(LeaveGroupRequest[5](group_id="busy", members=[
            LeaveGroupRequest.MemberIdentity(member_id=member, group_instance_id=None, reason="done")]),
            LeaveGroupResponse, 5)
        assert left.error_code == 0 and left.members[0].error_code == 0
        assert client.heartbeat("busy", generation, member) == ErrorCode.UNKNOWN_MEMBER_ID


def test_offset_delete_refuses_subscribed_topics(group_broker: BrokerProcess) -> None:
    create_topic(group_broker, "t", 1)
    create_topic(group_broker, "u", 1)
    with GroupClient(group_broker.port) as client:
        member, generation = stable_member(client, "g")  # subscribes to "t"
        assert client.commit("g", generation, member, {("t", 0): (1, ""), ("u", 0): (2, "")}) == \
            {("t", 0): 0, ("u", 0): 0}

        def delete(group: str) -> Any:
            kind = OffsetDeleteRequest.OffsetDeleteRequestTopic
            return client.call(OffsetDeleteRequest[0](group_id=group, topics=[
                kind(name=name, partitions=[kind.OffsetDeleteRequestPartition(partition_index=0)])
                for name in ("t", "u")]), OffsetDeleteResponse, 0)

        response = delete("g")
        assert response.error_code == 0
        assert {(t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions} == \
            {("t", 0): ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC, ("u", 0): 0}
        remaining = client.fetch({"g": None}).groups[0]
        assert [(t.name, p.partition_index) for t in remaining.topics for p in t.partitions] == [("t", 0)]
        assert delete("ghost").error_code == ErrorCode.GROUP_ID_NOT_FOUND


def test_a_member_that_stops_heartbeating_is_expired(group_broker: BrokerProcess) -> None:
    create_topic(group_broker, "t", 1)
    with GroupClient(group_broker.port) as client:
        joined = client.join_fully("g", session_ms=300)
        assert joined.error_code == 0
        client.sync("g", joined.generation_id, joined.member_id, {joined.member_id: b""})
        deadline = time.monotonic() + 30
        while client.heartbeat("g", joined.generation_id, joined.member_id) == 0:
            time.sleep(0.5)  # slower than the session: the broker's timer must expire the member
            assert time.monotonic() < deadline
        assert client.heartbeat("g", joined.generation_id, joined.member_id) == ErrorCode.UNKNOWN_MEMBER_ID


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_offsets_and_membership_survive_a_broker_restart(tmp_path: Path, sig: int) -> None:
    broker = logged_broker(tmp_path, extra_args=GROUP_ARGS)
    broker.start()
    try:
        create_topic(broker, "t", 2)
        with GroupClient(broker.port) as client:
            member, generation = stable_member(client, "g")
            assert client.commit("g", generation, member, {("t", 0): (41, "first")}) == {("t", 0): 0}
            assert client.commit("g", generation, member, {("t", 0): (42, "second"), ("t", 1): (7, "")}) == \
                {("t", 0): 0, ("t", 1): 0}
            assert client.commit("standalone", -1, "", {("t", 1): (3, "admin")}) == {("t", 1): 0}
        broker.stop(sig)
        broker.start()
        with GroupClient(broker.port) as client:
            fetched = client.fetch({"g": None, "standalone": None})
            offsets = {g.group_id: {(t.name, p.partition_index): (p.committed_offset, p.metadata)
                                    for t in g.topics for p in t.partitions} for g in fetched.groups}
            assert offsets == {"g": {("t", 0): (42, "second"), ("t", 1): (7, "")},
                               "standalone": {("t", 1): (3, "admin")}}
            # The member is restored with a fresh session: it carries on without rejoining.
            assert client.heartbeat("g", generation, member) == 0
            described = client.call(DescribeGroupsRequest[5](groups=["g"], include_authorized_operations=False),
                                    DescribeGroupsResponse, 5).groups[0]
            assert (described.group_state, described.members[0].member_id) == ("Stable", member)
    finally:
        broker.stop(signal.SIGKILL)


def test_offsets_of_an_empty_group_expire_after_the_retention(tmp_path: Path) -> None:
    broker = logged_broker(tmp_path, extra_args=[*GROUP_ARGS, "--offsets-retention-minutes", "0.01",
                                                 "--offsets-retention-check-interval-ms", "100"])
    broker.start()
    try:
        create_topic(broker, "t", 1)
        with GroupClient(broker.port) as client:
            client.find_coordinator("old")
            assert client.commit("old", -1, "", {("t", 0): (5, "")}) == {("t", 0): 0}
            broker.wait_for("expired 1 offsets")
            assert client.fetch({"old": None}).groups[0].topics == []
            listed = client.call(ListGroupsRequest[5](states_filter=[], types_filter=[]), ListGroupsResponse, 5)
            assert "old" not in {g.group_id for g in listed.groups}
        broker.stop(signal.SIGKILL)
        broker.start()  # the tombstones were stored: nothing comes back
        with GroupClient(broker.port) as client:
            assert client.fetch({"old": None}).groups[0].topics == []
    finally:
        broker.stop(signal.SIGKILL)
