"""Leader election rules, as pure functions of a partition's state and who is alive.

The controller applies these on every pass; keeping them free of I/O lets the
rules Kafka's controller follows be checked directly:

* a dead replica leaves the ISR, except the last one: the ISR never empties, so
  the replicas known to hold every acknowledged write stay known while they are
  down, and one of them can lead again when it returns;
* a new leader comes from the live ISR, in replica order (the preferred replica
  first); with ``unclean.leader.election.enable`` a live out-of-sync replica may
  lead when no ISR member lives (its ISR is then itself alone); otherwise the
  partition stays offline (leader -1);
* every leader change bumps the leader epoch; every change bumps the partition
  epoch, the token leaders' ISR updates compare against.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from dataplane.cluster.store import PartitionState
from dataplane.protocol.errors import ErrorCode

NO_LEADER = -1


@dataclass(frozen=True, slots=True)
class Election:
    """A partition's next leader and ISR, and whether the leader changed (the leader epoch moves)."""

    leader: int
    isr: tuple[int, ...]
    leader_changed: bool


def after_liveness_change(state: PartitionState, live: Collection[int], *, unclean: bool) -> Election | None:
    """The partition's leader and ISR once dead brokers are taken out; None when nothing changes."""
    isr = tuple(r for r in state.isr if r in live) or state.isr
    leader = state.leader
    if leader not in live or leader not in state.replicas:
        candidates = [r for r in state.replicas if r in isr and r in live]
        if candidates:
            leader = candidates[0]
        elif unclean and (out_of_sync := [r for r in state.replicas if r in live]):
            leader, isr = out_of_sync[0], (out_of_sync[0],)
        else:
            leader = NO_LEADER
    if leader == state.leader and isr == state.isr:
        return None
    return Election(leader, isr, leader != state.leader)


def preferred(state: PartitionState, live: Collection[int]) -> Election | ErrorCode:
    """ElectLeaders (PREFERRED): move leadership to the first replica if it is alive and in sync."""
    wanted = state.replicas[0]
    if state.leader == wanted:
        return ErrorCode.ELECTION_NOT_NEEDED
    if wanted not in live or wanted not in state.isr:
        return ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
    return Election(wanted, state.isr, True)


def unclean_now(state: PartitionState, live: Collection[int]) -> Election | ErrorCode:
    """ElectLeaders (UNCLEAN): a live ISR member if any, else any live replica; only for leaderless partitions."""
    if state.leader != NO_LEADER and state.leader in live:
        return ErrorCode.ELECTION_NOT_NEEDED
    found = after_liveness_change(state, live, unclean=True)
    if found is None or found.leader == NO_LEADER:
        return ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE
    return found


@dataclass(frozen=True, slots=True)
class Reassigned:
    """A finished reassignment: the target replicas, the ISR within them, and their leader."""

    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_changed: bool


def complete_reassignment(state: PartitionState, live: Collection[int]) -> Reassigned | None:
    """Finish a reassignment once every joining replica is in the ISR; None while it must wait.

    Leadership moves to the first live in-sync target replica if the leader is
    leaving; the leaving replicas drop out of the replica list and the ISR.
    """
    if not state.adding and not state.removing:
        return None
    if not set(state.adding) <= set(state.isr):
        return None
    target = state.target_replicas
    isr = tuple(r for r in state.isr if r in target)
    if not isr:
        return None
    leader = state.leader
    if leader not in target or leader not in live:
        candidates = [r for r in target if r in isr and r in live]
        if not candidates:
            return None
        leader = candidates[0]
    return Reassigned(target, isr, leader, leader != state.leader)
