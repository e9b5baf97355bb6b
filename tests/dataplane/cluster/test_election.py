"""The controller's election rules, checked directly on partition states."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from dataplane.cluster.election import NO_LEADER, Election, after_liveness_change, preferred, unclean_now
from dataplane.cluster.store import PartitionState
from dataplane.protocol.errors import ErrorCode


def state(replicas: tuple[int, ...], isr: tuple[int, ...], leader: int) -> PartitionState:
    return PartitionState(0, replicas, isr, leader, 3, 7)


def test_a_live_leader_only_loses_dead_followers_from_the_isr() -> None:
    assert after_liveness_change(state((1, 2, 3), (1, 2, 3), 1), {1, 2, 3}, unclean=False) is None
    assert after_liveness_change(state((1, 2, 3), (1, 2, 3), 1), {1, 3}, unclean=False) == \
        Election(1, (1, 3), False)


def test_a_dead_leader_is_replaced_from_the_isr_in_replica_order() -> None:
    assert after_liveness_change(state((1, 2, 3), (3, 2, 1), 1), {2, 3}, unclean=False) == Election(2, (3, 2), True)


def test_no_live_isr_member_leaves_the_partition_offline_and_the_isr_as_it_was() -> None:
    found = after_liveness_change(state((1, 2, 3), (1,), 1), {2, 3}, unclean=False)
    assert found == Election(NO_LEADER, (1,), True)
    # The last in-sync replica returns: it leads again.
    assert after_liveness_change(state((1, 2, 3), (1,), NO_LEADER), {1, 2, 3}, unclean=False) == \
        Election(1, (1,), True)


def test_unclean_election_takes_a_live_out_of_sync_replica_only_when_allowed() -> None:
    assert after_liveness_change(state((1, 2, 3), (1,), 1), {2, 3}, unclean=True) == Election(2, (2,), True)


def test_preferred_election() -> None:
    assert preferred(state((1, 2, 3), (1, 2, 3), 2), {1, 2, 3}) == Election(1, (1, 2, 3), True)
    assert preferred(state((1, 2, 3), (1, 2, 3), 1), {1, 2, 3}) == ErrorCode.ELECTION_NOT_NEEDED
    assert preferred(state((1, 2, 3), (2, 3), 2), {1, 2, 3}) == ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
    assert preferred(state((1, 2, 3), (1, 2, 3), 2), {2, 3}) == ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE


def test_unclean_now() -> None:
    assert unclean_now(state((1, 2, 3), (1, 2, 3), 2), {1, 2, 3}) == ErrorCode.ELECTION_NOT_NEEDED
    assert unclean_now(state((1, 2, 3), (1,), NO_LEADER), {3}) == Election(3, (3,), True)
    assert unclean_now(state((1, 2, 3), (1,), NO_LEADER), set()) == ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE


@given(st.permutations([1, 2, 3, 4, 5]), st.integers(1, 5), st.sets(st.integers(1, 5)), st.booleans())
def test_a_clean_election_never_picks_a_replica_outside_the_isr(
        order: list[int], isr_size: int, live: set[int], unclean: bool) -> None:
    replicas = tuple(order)
    isr = replicas[:isr_size]
    found = after_liveness_change(state(replicas, isr, replicas[0]), live, unclean=unclean)
    if found is None:
        return
    assert found.isr and set(found.isr) <= set(replicas)
    if found.leader != NO_LEADER:
        assert found.leader in live and found.leader in found.isr
        if not unclean:
            assert found.leader in isr


def test_a_reassignment_completes_only_once_the_joiners_are_in_sync() -> None:
    from dataplane.cluster.election import Reassigned, complete_reassignment

    moving = PartitionState(0, (3, 2, 1), (1, 2), 1, 3, 7, adding=(3,), removing=(1,))
    assert complete_reassignment(moving, {1, 2, 3}) is None                      # 3 still catching up
    caught_up = PartitionState(0, (3, 2, 1), (1, 2, 3), 1, 3, 8, adding=(3,), removing=(1,))
    assert complete_reassignment(caught_up, {1, 2, 3}) == Reassigned((3, 2), (2, 3), 3, True)
    assert complete_reassignment(state((1, 2), (1, 2), 1), {1, 2}) is None      # nothing moving
