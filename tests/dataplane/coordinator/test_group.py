"""The group state machine alone: a fake clock, waiters as plain objects, results read from the outbox."""

from __future__ import annotations

import itertools

import pytest

from dataplane.coordinator.group import (
    Group,
    GroupSettings,
    GroupState,
    JoinRequest,
    JoinResult,
    Result,
    SyncResult,
    consumer_subscription_topics,
)
from dataplane.coordinator.records import OffsetValue
from dataplane.protocol.errors import ErrorCode

SETTINGS = GroupSettings(min_session_timeout_ms=100, max_session_timeout_ms=60_000, initial_rebalance_delay_ms=300)
SESSION, REBALANCE = 1_000, 5_000


def subscription(*topics: str) -> bytes:
    out = b"\x00\x01" + len(topics).to_bytes(4, "big")
    for t in topics:
        out += len(t).to_bytes(2, "big") + t.encode()
    return out + b"\xff\xff\xff\xff"  # null user data


class Harness:
    def __init__(self, settings: GroupSettings = SETTINGS) -> None:
        ids = itertools.count(1)
        self.group = Group("g", settings, lambda prefix: f"{prefix}-{next(ids)}")
        self.now = 1_000_000
        self.waiters = itertools.count()

    def results(self) -> dict[object, Result]:
        out = dict(self.group.outbox)
        self.group.outbox.clear()
        return out

    def join(self, member_id: str = "", *, client: str = "c", instance: str | None = None,
             protocols: tuple[tuple[str, bytes], ...] = (("range", subscription("t")),),
             session: int = SESSION, v4: bool = True) -> object:
        waiter = f"join-{next(self.waiters)}"
        self.group.join(self.now, JoinRequest(member_id, instance, client, "/127.0.0.1", session, REBALANCE,
                                              "consumer", protocols, v4), waiter)
        return waiter

    def join_now(self, member_id: str = "", **kwargs: object) -> JoinResult:
        waiter = self.join(member_id, **kwargs)  # type: ignore[arg-type]
        result = self.results()[waiter]
        assert isinstance(result, JoinResult)
        return result

    def new_member(self, client: str = "c", **kwargs: object) -> str:
        """A v4 member's first round trip: MEMBER_ID_REQUIRED with the id to come back with."""
        first = self.join_now(client=client, **kwargs)
        assert first.error is ErrorCode.MEMBER_ID_REQUIRED
        return first.member_id

    def sync(self, member_id: str, generation: int, assignments: dict[str, bytes] | None = None,
             instance: str | None = None) -> object:
        waiter = f"sync-{next(self.waiters)}"
        self.group.sync(self.now, generation=generation, member_id=member_id, group_instance_id=instance,
                        protocol_type="consumer", protocol_name=None, assignments=assignments or {}, waiter=waiter)
        return waiter

    def advance(self, ms: int) -> None:
        self.now += ms
        self.group.tick(self.now)

    def stable_pair(self) -> tuple[str, str, int]:
        """Two members through join and sync; (leader, follower, generation)."""
        a, b = self.new_member("a"), self.new_member("b")
        wa, wb = self.join(a), self.join(b)
        self.advance(SETTINGS.initial_rebalance_delay_ms)
        joined = self.results()
        ra, rb = joined[wa], joined[wb]
        assert isinstance(ra, JoinResult) and isinstance(rb, JoinResult)
        leader, follower = (a, b) if ra.leader == a else (b, a)
        sf = self.sync(follower, ra.generation)
        sl = self.sync(leader, ra.generation, {leader: b"L", follower: b"F"})
        synced = self.results()
        assert synced[sf] == SyncResult(ErrorCode.NONE, "consumer", "range", b"F")
        assert synced[sl] == SyncResult(ErrorCode.NONE, "consumer", "range", b"L")
        assert self.group.state is GroupState.STABLE
        return leader, follower, ra.generation


def test_kip394_first_join_hands_out_a_member_id_then_the_rejoin_completes_after_the_initial_delay() -> None:
    h = Harness()
    member = h.new_member()
    assert member.startswith("c-") and h.group.state is GroupState.EMPTY
    waiter = h.join(member)
    assert h.group.state is GroupState.PREPARING_REBALANCE and not h.results()
    h.advance(SETTINGS.initial_rebalance_delay_ms - 1)
    assert not h.results()
    h.advance(1)
    result = h.results()[waiter]
    assert isinstance(result, JoinResult)
    assert (result.error, result.generation, result.leader, result.protocol_name) == \
        (ErrorCode.NONE, 1, member, "range")
    assert [m.member_id for m in result.members] == [member]
    assert h.group.state is GroupState.COMPLETING_REBALANCE and h.group.dirty


def test_before_v4_a_new_member_joins_at_once_and_a_forgotten_member_id_expires() -> None:
    h = Harness()
    waiter = h.join(v4=False)
    h.advance(SETTINGS.initial_rebalance_delay_ms)
    result = h.results()[waiter]
    assert isinstance(result, JoinResult) and result.error is ErrorCode.NONE
    lost = h.new_member("lost")
    assert lost in h.group.pending_members
    h.advance(SESSION)
    assert lost not in h.group.pending_members


def test_the_leader_gets_every_members_metadata_and_followers_get_their_assignment_from_its_sync() -> None:
    h = Harness()
    _leader, follower, generation = h.stable_pair()
    assert generation == 1
    assert h.group.members[follower].assignment == b"F"


def test_each_newcomer_extends_the_initial_delay() -> None:
    h = Harness()
    first = h.join(h.new_member("a"))
    h.advance(200)
    second = h.join(h.new_member("b"))
    h.advance(200)  # 400 ms after the first join: past the first delay, inside the extended one
    assert not h.results()
    h.advance(100)
    assert set(h.results()) == {first, second}


def test_stale_generation_and_unknown_members_are_refused() -> None:
    h = Harness()
    leader, _follower, generation = h.stable_pair()
    kw = {"group_instance_id": None}
    assert h.group.heartbeat(h.now, generation=generation, member_id=leader, **kw) is ErrorCode.NONE
    assert h.group.heartbeat(h.now, generation=generation - 1, member_id=leader, **kw) is ErrorCode.ILLEGAL_GENERATION
    assert h.group.heartbeat(h.now, generation=generation, member_id="ghost", **kw) is ErrorCode.UNKNOWN_MEMBER_ID
    assert h.group.commit_error(h.now, generation=generation - 1, member_id=leader, **kw) \
        is ErrorCode.ILLEGAL_GENERATION
    assert h.group.commit_error(h.now, generation=generation, member_id="ghost", **kw) is ErrorCode.UNKNOWN_MEMBER_ID
    assert h.group.commit_error(h.now, generation=generation, member_id=leader, **kw) is None
    # A commit from outside group management is refused while the group has members.
    assert h.group.commit_error(h.now, generation=-1, member_id="", **kw) is ErrorCode.UNKNOWN_MEMBER_ID
    waiter = h.sync(leader, generation + 5)
    assert h.results()[waiter] == SyncResult(ErrorCode.ILLEGAL_GENERATION)


def test_a_silent_member_expires_after_the_session_timeout_and_the_rest_rebalance() -> None:
    h = Harness()
    leader, follower, generation = h.stable_pair()
    h.advance(SESSION // 2)
    assert h.group.heartbeat(h.now, generation=generation, member_id=leader, group_instance_id=None) \
        is ErrorCode.NONE
    h.advance(SESSION // 2)  # the follower's session ends; the leader's was renewed
    assert follower not in h.group.members and h.group.state is GroupState.PREPARING_REBALANCE
    assert h.group.heartbeat(h.now, generation=generation, member_id=leader, group_instance_id=None) \
        is ErrorCode.REBALANCE_IN_PROGRESS
    waiter = h.join(leader)  # everyone left has rejoined: no need to wait
    result = h.results()[waiter]
    assert isinstance(result, JoinResult) and result.generation == generation + 1
    assert [m.member_id for m in result.members] == [leader]


def test_a_member_that_does_not_rejoin_within_the_rebalance_timeout_is_removed() -> None:
    h = Harness()
    leader, follower, generation = h.stable_pair()
    waiter = h.join(leader, protocols=(("range", subscription("t", "u")),))  # new subscription: rebalance
    assert h.group.state is GroupState.PREPARING_REBALANCE
    for _ in range(REBALANCE // 500 - 1):  # the follower keeps heartbeating but never rejoins (stuck in poll)
        h.advance(500)
        assert h.group.heartbeat(h.now, generation=generation, member_id=follower, group_instance_id=None) \
            is ErrorCode.REBALANCE_IN_PROGRESS
        assert waiter not in h.results()
    h.advance(500)
    result = h.results()[waiter]
    assert isinstance(result, JoinResult) and [m.member_id for m in result.members] == [leader]
    assert follower not in h.group.members


def test_a_static_member_restarting_within_its_session_causes_no_rebalance_and_fences_the_old_id() -> None:
    h = Harness()
    waiters = [h.join(client="a", instance="i-a"), h.join(client="b", instance="i-b")]
    h.advance(SETTINGS.initial_rebalance_delay_ms)
    results = h.results()
    first = [r for w, r in results.items() if w in waiters]
    assert all(isinstance(r, JoinResult) and r.error is ErrorCode.NONE for r in first)
    generation = h.group.generation
    leader = h.group.leader_id
    assert leader is not None
    old_b = h.group.static_members["i-b"]
    h.sync(old_b, generation)
    h.sync(leader, generation, {leader: b"A", old_b: b"B"})
    h.results()
    again = h.join_now(client="b", instance="i-b")  # restarted: no member id, same instance id
    assert again.error is ErrorCode.NONE and again.generation == generation and again.member_id != old_b
    assert h.group.state is GroupState.STABLE
    assert h.group.heartbeat(h.now, generation=generation, member_id=old_b, group_instance_id="i-b") \
        is ErrorCode.FENCED_INSTANCE_ID
    waiter = h.sync(again.member_id, generation, instance="i-b")
    assert h.results()[waiter] == SyncResult(ErrorCode.NONE, "consumer", "range", b"B")


def test_a_static_leader_rejoining_learns_the_members_without_reassigning() -> None:
    h = Harness()
    h.join(client="a", instance="i-a")
    h.advance(SETTINGS.initial_rebalance_delay_ms)
    h.results()
    member = h.group.static_members["i-a"]
    h.sync(member, h.group.generation, {member: b"A"})
    h.results()
    again = h.join_now(client="a", instance="i-a")
    assert again.leader == again.member_id and again.skip_assignment and len(again.members) == 1


def test_leave_removes_a_member_and_rebalances_the_rest() -> None:
    h = Harness()
    leader, follower, generation = h.stable_pair()
    assert h.group.leave(h.now, member_id=follower, group_instance_id=None) is ErrorCode.NONE
    assert h.group.state is GroupState.PREPARING_REBALANCE
    assert h.group.leave(h.now, member_id="ghost", group_instance_id=None) is ErrorCode.UNKNOWN_MEMBER_ID
    assert h.group.leave(h.now, member_id="", group_instance_id="nobody") is ErrorCode.UNKNOWN_MEMBER_ID
    assert h.group.leave(h.now, member_id=leader, group_instance_id=None) is ErrorCode.NONE
    assert h.group.state is GroupState.EMPTY and h.group.generation == generation + 1


def test_a_stable_group_whose_last_member_leaves_is_empty_at_once() -> None:
    """Kafka completes the rebalance at once when nobody is left to join: Empty, generation bumped."""
    h = Harness()
    member = h.new_member("solo")
    waiter = h.join(member)
    h.advance(SETTINGS.initial_rebalance_delay_ms)
    joined = h.results()[waiter]
    assert isinstance(joined, JoinResult) and joined.leader == member
    h.sync(member, joined.generation, {member: b"all"})
    h.results()
    assert h.group.state is GroupState.STABLE
    assert h.group.leave(h.now, member_id=member, group_instance_id=None) is ErrorCode.NONE
    assert h.group.state is GroupState.EMPTY and h.group.generation == joined.generation + 1


def test_a_leader_that_never_syncs_is_dropped_after_the_rebalance_timeout() -> None:
    h = Harness()
    a, b = h.new_member("a"), h.new_member("b")
    h.join(a)
    h.join(b)
    h.advance(SETTINGS.initial_rebalance_delay_ms)
    h.results()
    leader = h.group.leader_id
    assert leader is not None
    follower = b if leader == a else a
    waiter = h.sync(follower, 1)
    for _ in range(REBALANCE // 500):  # the leader heartbeats (its session holds) but never sends SyncGroup
        for member in (leader, follower):
            assert h.group.heartbeat(h.now, generation=1, member_id=member, group_instance_id=None) is ErrorCode.NONE
        h.advance(500)
    assert h.results()[waiter] == SyncResult(ErrorCode.REBALANCE_IN_PROGRESS)
    assert leader not in h.group.members and h.group.state is GroupState.PREPARING_REBALANCE


def test_protocols_are_chosen_by_vote_and_a_member_sharing_none_is_refused() -> None:
    h = Harness()
    a = h.new_member("a", protocols=(("range", b""), ("roundrobin", b"")))
    b = h.new_member("b", protocols=(("roundrobin", b""), ("range", b"")))
    c = h.new_member("c", protocols=(("roundrobin", b""),))
    for member, protocols in ((a, (("range", b""), ("roundrobin", b""))), (b, (("roundrobin", b""), ("range", b""))),
                              (c, (("roundrobin", b""),))):
        h.join(member, protocols=protocols)
    h.advance(SETTINGS.initial_rebalance_delay_ms)
    assert h.group.protocol_name == "roundrobin"
    h.results()
    refused = h.join_now(protocols=(("sticky", b""),))
    assert refused.error is ErrorCode.INCONSISTENT_GROUP_PROTOCOL


def test_bad_session_timeouts_and_empty_protocol_lists_are_refused() -> None:
    h = Harness()
    assert h.join_now(session=50).error is ErrorCode.INVALID_SESSION_TIMEOUT
    assert h.join_now(session=120_000).error is ErrorCode.INVALID_SESSION_TIMEOUT
    assert h.join_now(protocols=()).error is ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    assert h.join_now("never-issued").error is ErrorCode.UNKNOWN_MEMBER_ID


def test_group_max_size_refuses_the_member_too_many() -> None:
    h = Harness(GroupSettings(100, 60_000, 0, max_size=1))
    h.new_member("a")
    assert h.join_now(client="b").error is ErrorCode.GROUP_MAX_SIZE_REACHED


def test_membership_record_round_trip_restores_a_stable_group() -> None:
    h = Harness()
    leader, follower, generation = h.stable_pair()
    value = h.group.to_value()
    restored = Group("g", SETTINGS, lambda p: p)
    restored.restore(h.now, value)
    assert restored.state is GroupState.STABLE and restored.generation == generation
    assert restored.leader_id == leader and restored.members[follower].assignment == b"F"
    assert restored.heartbeat(h.now, generation=generation, member_id=follower, group_instance_id=None) \
        is ErrorCode.NONE


def test_offsets_expire_after_retention_once_the_group_is_empty() -> None:
    h = Harness()
    leader, follower, _generation = h.stable_pair()
    h.group.offsets[("t", 0)] = OffsetValue(5, -1, "", h.now - 10_000)
    h.group.offsets[("other", 0)] = OffsetValue(5, -1, "", h.now - 10_000)
    assert h.group.expired_offsets(h.now, 1_000) == [("other", 0)]  # live group: unsubscribed topics only
    h.group.leave(h.now, member_id=leader, group_instance_id=None)
    h.group.leave(h.now, member_id=follower, group_instance_id=None)
    assert h.group.state is GroupState.EMPTY
    assert h.group.expired_offsets(h.now + 999, 1_000) == []
    assert sorted(h.group.expired_offsets(h.now + 1_000, 1_000)) == [("other", 0), ("t", 0)]
    standalone = Harness().group
    standalone.offsets[("t", 0)] = OffsetValue(5, -1, "", 0)
    standalone.offsets[("t", 1)] = OffsetValue(5, -1, "", 500)
    assert standalone.expired_offsets(1_000, 1_000) == [("t", 0)]


@pytest.mark.parametrize("data", [b"", b"\x00", b"\x00\x01\x7f\xff\xff\xff", b"\x00\x01\x00\x00\x00\x01\x00\x09ab"])
def test_unreadable_subscriptions_are_none(data: bytes) -> None:
    assert consumer_subscription_topics(data) is None


def test_subscriptions_are_read() -> None:
    assert consumer_subscription_topics(subscription("a", "bb")) == ["a", "bb"]
