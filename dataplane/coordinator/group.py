"""One consumer group's state machine (Kafka's classic protocol), sans-IO.

The machine never waits and never reads a clock: every call takes ``now``
(milliseconds) and requests that must wait (JoinGroup until the rebalance
completes, SyncGroup until the leader hands out assignments) leave an opaque
*waiter* token with the group. Whatever the call decides for any waiter (its own
or another member's) lands in ``outbox`` as ``(waiter, result)`` pairs for the
caller to deliver; ``next_deadline()`` says when ``tick`` must run next for
session, rebalance, sync and initial-delay timeouts. ``dirty`` is set when the
group's membership record should be written to ``__consumer_offsets``.

States and transitions follow Kafka's ``GroupMetadata``:

    Empty ─join─▶ PreparingRebalance ─all joined / rebalance timeout─▶ CompletingRebalance
      ▲                ▲       │ nobody rejoined                              │ leader's SyncGroup
      └────────────────┼───────┘                                              ▼
                       └──── member joins, leaves, expires or changes ───── Stable

Not thread-safe: one event loop owns every group.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum

from dataplane.coordinator.pending import PendingOffsets
from dataplane.coordinator.records import GroupValue, MemberValue, OffsetValue
from dataplane.protocol.errors import ErrorCode

CONSUMER_PROTOCOL_TYPE = "consumer"


class GroupState(StrEnum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(frozen=True, slots=True)
class GroupSettings:
    """The broker's ``group.*`` settings, in milliseconds."""

    min_session_timeout_ms: int = 6_000
    max_session_timeout_ms: int = 1_800_000
    initial_rebalance_delay_ms: int = 3_000
    max_size: int = 2**31 - 1


@dataclass(frozen=True, slots=True)
class JoinRequest:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]
    require_known_member_id: bool  # JoinGroup v4+ (KIP-394): a new member first gets an id and rejoins with it


@dataclass(frozen=True, slots=True)
class JoinedMember:
    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True, slots=True)
class JoinResult:
    error: ErrorCode
    member_id: str
    generation: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    members: tuple[JoinedMember, ...] = ()
    skip_assignment: bool = False


@dataclass(frozen=True, slots=True)
class SyncResult:
    error: ErrorCode
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


Result = JoinResult | SyncResult


@dataclass(slots=True)
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]
    heartbeat_deadline_ms: int
    assignment: bytes = b""
    join_waiter: object | None = None
    sync_waiter: object | None = None

    def metadata(self, protocol: str | None) -> bytes:
        return next((data for name, data in self.protocols if name == protocol), b"")

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def kept_alive(self) -> bool:
        """A member waiting in JoinGroup or SyncGroup cannot heartbeat; the rebalance timers cover it."""
        return self.join_waiter is not None or self.sync_waiter is not None


@dataclass(slots=True)
class Group:
    """One consumer group's state machine (sans-IO: results go to ``outbox``, time comes in as arguments).

    Owned by the ``GroupCoordinator`` of the broker leading its offsets partition; used on that broker's event loop.
    """

    group_id: str
    settings: GroupSettings
    new_member_id: Callable[[str], str]  # prefix (client id or instance id) -> unique member id
    state: GroupState = GroupState.EMPTY
    generation: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    state_timestamp_ms: int = -1
    members: dict[str, Member] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # group.instance.id -> member id
    pending_members: dict[str, int] = field(default_factory=dict)  # KIP-394 ids handed out -> rejoin deadline
    pending_sync: set[str] = field(default_factory=set)
    rebalance_deadline_ms: int = 0
    initial_delay_until_ms: int = 0
    sync_deadline_ms: int = 0
    offsets: dict[tuple[str, int], OffsetValue] = field(default_factory=dict)
    txn: PendingOffsets = field(default_factory=PendingOffsets)  # transactional offsets awaiting their markers
    outbox: list[tuple[object, Result]] = field(default_factory=list)
    dirty: bool = False

    # ------------------------------------------------------------------ queries

    def is_empty(self) -> bool:
        return not self.members and not self.pending_members

    def subscribed_topics(self) -> set[str] | None:
        """Topics the members subscribe to (consumer protocol), None when they cannot be read."""
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE or self.protocol_name is None:
            return None if self.members else set()
        topics: set[str] = set()
        for member in self.members.values():
            found = consumer_subscription_topics(member.metadata(self.protocol_name))
            if found is None:
                return None
            topics.update(found)
        return topics

    def next_deadline(self) -> int | None:
        deadlines = [d for d in self.pending_members.values()]
        deadlines += [m.heartbeat_deadline_ms for m in self.members.values() if not m.kept_alive()]
        if self.state is GroupState.PREPARING_REBALANCE:
            deadlines.append(max(self.initial_delay_until_ms, self.rebalance_deadline_ms))
            if self.initial_delay_until_ms:
                deadlines.append(self.initial_delay_until_ms)
        if self.state is GroupState.COMPLETING_REBALANCE and self.pending_sync:
            deadlines.append(self.sync_deadline_ms)
        return min(deadlines) if deadlines else None

    # ------------------------------------------------------------------ JoinGroup

    def join(self, now: int, request: JoinRequest, waiter: object) -> None:
        error = self._join_error(request)
        if error is not None:
            self._reply(waiter, JoinResult(error, request.member_id))
        elif not request.member_id:
            self._join_unknown_member(now, request, waiter)
        else:
            self._join_known_member(now, request, waiter)
        self._maybe_complete_join(now)

    def _join_error(self, request: JoinRequest) -> ErrorCode | None:
        if self.state is GroupState.DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE  # deleted under the client: it looks the group up again
        if not (self.settings.min_session_timeout_ms <= request.session_timeout_ms
                <= self.settings.max_session_timeout_ms):
            return ErrorCode.INVALID_SESSION_TIMEOUT
        if not request.protocol_type or not request.protocols or not self._supports(request):
            return ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        return None

    def _supports(self, request: JoinRequest) -> bool:
        if not self.members:
            return True
        if request.protocol_type != self.protocol_type:
            return False
        others = [m for m in self.members.values() if m.member_id != request.member_id]
        return any(all(name in m.protocol_names() for m in others) for name, _ in request.protocols)

    def _join_unknown_member(self, now: int, request: JoinRequest, waiter: object) -> None:
        instance = request.group_instance_id
        if instance is not None and instance in self.static_members:
            self._replace_static_member(now, request, waiter)
            return
        if len(self.members) + len(self.pending_members) >= self.settings.max_size:
            self._reply(waiter, JoinResult(ErrorCode.GROUP_MAX_SIZE_REACHED, ""))
            return
        member_id = self.new_member_id(instance or request.client_id)
        if instance is None and request.require_known_member_id:
            self.pending_members[member_id] = now + request.session_timeout_ms
            self._reply(waiter, JoinResult(ErrorCode.MEMBER_ID_REQUIRED, member_id))
            return
        self._add_member(now, member_id, request, waiter)

    def _join_known_member(self, now: int, request: JoinRequest, waiter: object) -> None:
        member_id = request.member_id
        if member_id in self.pending_members:
            del self.pending_members[member_id]
            self._add_member(now, member_id, request, waiter)
            return
        member = self.members.get(member_id)
        error = self._member_error(member_id, request.group_instance_id)
        if error is not None or member is None:
            self._reply(waiter, JoinResult(error or ErrorCode.UNKNOWN_MEMBER_ID, member_id))
            return
        changed = member.protocols != request.protocols
        self._update_member(member, request)
        if self.state is GroupState.PREPARING_REBALANCE:
            self._set_join_waiter(member, waiter)
        elif not changed and self.state in (GroupState.COMPLETING_REBALANCE, GroupState.STABLE) \
                and (self.state is GroupState.COMPLETING_REBALANCE or member_id != self.leader_id):
            # A lost JoinGroup response, or a follower rejoining with nothing new: answer with what is current.
            self._reply(waiter, self._join_result(member))
        else:  # new metadata, or the leader asks for a new assignment
            self._set_join_waiter(member, waiter)
            self._prepare_rebalance(now)

    def _replace_static_member(self, now: int, request: JoinRequest, waiter: object) -> None:
        """A static member back with no member id: the old incarnation is fenced, no rebalance when nothing changed."""
        instance = request.group_instance_id
        assert instance is not None
        old = self.members.pop(self.static_members[instance])
        new_id = self.new_member_id(instance)
        for stale in (old.join_waiter, old.sync_waiter):
            if stale is not None:
                self._reply(stale, JoinResult(ErrorCode.FENCED_INSTANCE_ID, old.member_id)
                            if stale is old.join_waiter else SyncResult(ErrorCode.FENCED_INSTANCE_ID))
        old.join_waiter = old.sync_waiter = None
        changed = old.protocols != request.protocols
        if self.leader_id == old.member_id:
            self.leader_id = new_id
        self.pending_sync.discard(old.member_id)
        old.member_id = new_id
        self._update_member(old, request)
        self.members[new_id] = old
        self.static_members[instance] = new_id
        old.heartbeat_deadline_ms = now + old.session_timeout_ms
        if self.state is GroupState.STABLE and not changed:
            self.dirty = True  # the member id changed
            result = self._join_result(old)
            if new_id == self.leader_id:  # KIP-814: the leader learns its group without reassigning
                result = JoinResult(result.error, new_id, result.generation, result.protocol_type,
                                    result.protocol_name, result.leader, self._joined_members(), True)
            self._reply(waiter, result)
        else:
            self._set_join_waiter(old, waiter)
            if self.state is not GroupState.PREPARING_REBALANCE:
                self._prepare_rebalance(now)

    def _add_member(self, now: int, member_id: str, request: JoinRequest, waiter: object) -> None:
        member = Member(member_id, request.group_instance_id, request.client_id, request.client_host,
                        request.session_timeout_ms, request.rebalance_timeout_ms, request.protocol_type,
                        request.protocols, now + request.session_timeout_ms)
        if not self.members:
            self.protocol_type = request.protocol_type
        self.members[member_id] = member
        if request.group_instance_id is not None:
            self.static_members[request.group_instance_id] = member_id
        if self.leader_id is None:
            self.leader_id = member_id
        self._set_join_waiter(member, waiter)
        if self.state is GroupState.PREPARING_REBALANCE:
            if self.initial_delay_until_ms > now:  # Kafka's InitialDelayedJoin: each newcomer extends the wait
                self.initial_delay_until_ms = min(now + self.settings.initial_rebalance_delay_ms,
                                                  max(self.rebalance_deadline_ms, now))
            self.rebalance_deadline_ms = max(self.rebalance_deadline_ms, now + request.rebalance_timeout_ms)
        else:
            self._prepare_rebalance(now)

    def _update_member(self, member: Member, request: JoinRequest) -> None:
        member.client_id, member.client_host = request.client_id, request.client_host
        member.session_timeout_ms = request.session_timeout_ms
        member.rebalance_timeout_ms = request.rebalance_timeout_ms
        member.protocols = request.protocols

    def _set_join_waiter(self, member: Member, waiter: object) -> None:
        if member.join_waiter is not None and member.join_waiter is not waiter:
            # A second JoinGroup while the first still waits: the first is answered as superseded.
            self._reply(member.join_waiter, JoinResult(ErrorCode.REBALANCE_IN_PROGRESS, member.member_id))
        member.join_waiter = waiter

    # ------------------------------------------------------------------ SyncGroup

    def sync(self, now: int, *, generation: int, member_id: str, group_instance_id: str | None,
             protocol_type: str | None, protocol_name: str | None, assignments: dict[str, bytes],
             waiter: object) -> None:
        error = self._member_error(member_id, group_instance_id)
        member = self.members.get(member_id)
        if error is None and member is None:
            error = ErrorCode.UNKNOWN_MEMBER_ID
        if error is None and generation != self.generation:
            error = ErrorCode.ILLEGAL_GENERATION
        if error is None and ((protocol_type is not None and protocol_type != self.protocol_type)
                              or (protocol_name is not None and protocol_name != self.protocol_name)):
            error = ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        if error is None and self.state is GroupState.PREPARING_REBALANCE:
            error = ErrorCode.REBALANCE_IN_PROGRESS
        if error is not None or member is None:
            self._reply(waiter, SyncResult(error or ErrorCode.UNKNOWN_MEMBER_ID))
            return
        member.heartbeat_deadline_ms = now + member.session_timeout_ms
        if self.state is GroupState.STABLE:
            self._reply(waiter, self._sync_result(member))
            return
        # CompletingRebalance
        if member.sync_waiter is not None and member.sync_waiter is not waiter:
            self._reply(member.sync_waiter, SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))
        member.sync_waiter = waiter
        self.pending_sync.discard(member_id)
        if member_id == self.leader_id:
            for other in self.members.values():
                other.assignment = assignments.get(other.member_id, b"")
            self.state = GroupState.STABLE
            self.state_timestamp_ms = now
            self.pending_sync.clear()
            self.dirty = True
            for other in self.members.values():
                if other.sync_waiter is not None:
                    self._reply(other.sync_waiter, self._sync_result(other))
                    other.sync_waiter = None
                other.heartbeat_deadline_ms = now + other.session_timeout_ms

    def _sync_result(self, member: Member) -> SyncResult:
        return SyncResult(ErrorCode.NONE, self.protocol_type, self.protocol_name, member.assignment)

    # ------------------------------------------------------------------ Heartbeat, LeaveGroup, commits

    def heartbeat(self, now: int, *, generation: int, member_id: str, group_instance_id: str | None) -> ErrorCode:
        if self.state is GroupState.DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        error = self._member_error(member_id, group_instance_id)
        member = self.members.get(member_id)
        if error is not None or member is None:
            return error or ErrorCode.UNKNOWN_MEMBER_ID
        if generation != self.generation:
            return ErrorCode.ILLEGAL_GENERATION
        member.heartbeat_deadline_ms = now + member.session_timeout_ms
        if self.state is GroupState.PREPARING_REBALANCE:
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    def leave(self, now: int, *, member_id: str, group_instance_id: str | None) -> ErrorCode:
        """One member of a LeaveGroup; a static member may be named by its instance id alone."""
        if group_instance_id is not None:
            known = self.static_members.get(group_instance_id)
            if known is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            if member_id and member_id != known:
                return ErrorCode.FENCED_INSTANCE_ID
            member_id = known
        if member_id in self.pending_members:
            del self.pending_members[member_id]
            self._maybe_complete_join(now)
            return ErrorCode.NONE
        if member_id not in self.members:
            return ErrorCode.UNKNOWN_MEMBER_ID
        self._remove_member(now, member_id)
        return ErrorCode.NONE

    def commit_error(self, now: int, *, generation: int, member_id: str,
                     group_instance_id: str | None) -> ErrorCode | None:
        """Whether an OffsetCommit may write (None) or the error that refuses it (Kafka's rules).

        Generation -1 with no member id is a commit from outside group management
        (an admin tool, a consumer with manual assignment): allowed while the group
        has no members. A valid member's commit counts as a heartbeat.
        """
        if self.state is GroupState.DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if generation < 0 and not member_id and not self.members:
            return None
        error = self._member_error(member_id, group_instance_id)
        if error is not None:
            return error
        member = self.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if generation != self.generation:
            return ErrorCode.ILLEGAL_GENERATION
        if self.state is GroupState.COMPLETING_REBALANCE:
            return ErrorCode.REBALANCE_IN_PROGRESS
        member.heartbeat_deadline_ms = now + member.session_timeout_ms
        return None

    def txn_commit_error(self, *, generation: int, member_id: str, group_instance_id: str | None) -> ErrorCode | None:
        """Whether a TxnOffsetCommit may write (None) or the error that refuses it (Kafka's rules).

        Before v3 (KIP-447) the request names no member: it is accepted whatever the
        group's state. From v3 the member, instance and generation are checked when given.
        """
        if self.state is GroupState.DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if group_instance_id is not None:
            known = self.static_members.get(group_instance_id)
            if known is not None and known != member_id:
                return ErrorCode.FENCED_INSTANCE_ID
        if member_id and member_id not in self.members:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if generation >= 0 and generation != self.generation:
            return ErrorCode.ILLEGAL_GENERATION
        return None

    def _member_error(self, member_id: str, group_instance_id: str | None) -> ErrorCode | None:
        if group_instance_id is not None:
            known = self.static_members.get(group_instance_id)
            if known is not None and known != member_id:
                return ErrorCode.FENCED_INSTANCE_ID
        if member_id not in self.members:
            return ErrorCode.UNKNOWN_MEMBER_ID
        return None

    # ------------------------------------------------------------------ timers

    def tick(self, now: int) -> None:
        for member_id, deadline in list(self.pending_members.items()):
            if now >= deadline:
                del self.pending_members[member_id]
        for member in list(self.members.values()):
            if not member.kept_alive() and now >= member.heartbeat_deadline_ms and member.member_id in self.members:
                self._remove_member(now, member.member_id)
        if self.state is GroupState.COMPLETING_REBALANCE and self.pending_sync and now >= self.sync_deadline_ms:
            # Members that got a JoinGroup answer but never synced (a leader that died in between): drop them.
            for member_id in list(self.pending_sync):
                if member_id in self.members:
                    self._remove_member(now, member_id, rebalance=False)
            self.pending_sync.clear()
            self._prepare_rebalance(now)
        self._maybe_complete_join(now)

    # ------------------------------------------------------------------ rebalancing

    def _remove_member(self, now: int, member_id: str, *, rebalance: bool = True) -> None:
        member = self.members.pop(member_id)
        if member.group_instance_id is not None and self.static_members.get(member.group_instance_id) == member_id:
            del self.static_members[member.group_instance_id]
        if member.join_waiter is not None:
            self._reply(member.join_waiter, JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id))
        if member.sync_waiter is not None:
            self._reply(member.sync_waiter, SyncResult(ErrorCode.UNKNOWN_MEMBER_ID))
        self.pending_sync.discard(member_id)
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        if not rebalance:
            return
        if self.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._prepare_rebalance(now)
        if self.state is GroupState.PREPARING_REBALANCE:
            self._maybe_complete_join(now)  # with nobody left to wait for, Kafka completes it at once: Empty

    def _prepare_rebalance(self, now: int) -> None:
        if self.state is GroupState.COMPLETING_REBALANCE:
            for member in self.members.values():  # the assignment being handed out is void
                member.assignment = b""
                if member.sync_waiter is not None:
                    self._reply(member.sync_waiter, SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))
                    member.sync_waiter = None
        timeout = max((m.rebalance_timeout_ms for m in self.members.values()), default=0)
        self.initial_delay_until_ms = (now + min(self.settings.initial_rebalance_delay_ms, timeout)
                                       if self.state is GroupState.EMPTY else 0)
        self.rebalance_deadline_ms = now + timeout
        self.pending_sync.clear()
        self.state = GroupState.PREPARING_REBALANCE
        self.state_timestamp_ms = now

    def _maybe_complete_join(self, now: int) -> None:
        if self.state is not GroupState.PREPARING_REBALANCE or now < self.initial_delay_until_ms:
            return
        everyone = all(m.join_waiter is not None for m in self.members.values()) and not self.pending_members
        if everyone or now >= self.rebalance_deadline_ms:
            self._complete_join(now)

    def _complete_join(self, now: int) -> None:
        for member in [m for m in self.members.values() if m.join_waiter is None]:
            self._remove_member(now, member.member_id, rebalance=False)  # did not rejoin in time
        self.generation += 1
        self.state_timestamp_ms = now
        self.initial_delay_until_ms = 0
        self.dirty = True
        if not self.members:
            self.state = GroupState.EMPTY
            self.protocol_name = None
            self.leader_id = None
            return
        self.protocol_name = self._select_protocol()
        if self.leader_id not in self.members:
            self.leader_id = next(iter(self.members))
        self.state = GroupState.COMPLETING_REBALANCE
        timeout = max(m.rebalance_timeout_ms for m in self.members.values())
        self.sync_deadline_ms = now + timeout
        self.pending_sync = set(self.members)
        for member in self.members.values():
            waiter, member.join_waiter = member.join_waiter, None
            member.heartbeat_deadline_ms = now + member.session_timeout_ms
            assert waiter is not None
            self._reply(waiter, self._join_result(member))

    def _select_protocol(self) -> str:
        """Kafka's vote: among protocols every member supports, each member's first choice counts once."""
        members = list(self.members.values())
        candidates = [name for name in members[0].protocol_names()
                      if all(name in m.protocol_names() for m in members)]
        votes = {name: 0 for name in candidates}
        for member in members:
            choice = next(name for name in member.protocol_names() if name in votes)
            votes[choice] += 1
        return max(candidates, key=lambda name: votes[name])  # ties: the first member's preference order

    def _joined_members(self) -> tuple[JoinedMember, ...]:
        return tuple(JoinedMember(m.member_id, m.group_instance_id, m.metadata(self.protocol_name))
                     for m in self.members.values())

    def _join_result(self, member: Member) -> JoinResult:
        is_leader = member.member_id == self.leader_id
        return JoinResult(ErrorCode.NONE, member.member_id, self.generation, self.protocol_type, self.protocol_name,
                          self.leader_id or "", self._joined_members() if is_leader else ())

    def _reply(self, waiter: object, result: Result) -> None:
        self.outbox.append((waiter, result))

    # ------------------------------------------------------------------ lifecycle

    def fail_all(self, error: ErrorCode) -> None:
        """The coordinator is moving or stopping: answer everyone who waits."""
        for member in self.members.values():
            if member.join_waiter is not None:
                self._reply(member.join_waiter, JoinResult(error, member.member_id))
            if member.sync_waiter is not None:
                self._reply(member.sync_waiter, SyncResult(error))
            member.join_waiter = member.sync_waiter = None

    def mark_dead(self) -> None:
        self.fail_all(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        self.state = GroupState.DEAD
        self.members.clear()
        self.static_members.clear()
        self.pending_members.clear()
        self.offsets.clear()
        self.txn.clear()

    def to_value(self) -> GroupValue:
        """The membership record Kafka writes under the group's key."""
        return GroupValue(
            protocol_type=self.protocol_type or "", generation=self.generation, protocol=self.protocol_name,
            leader=self.leader_id, current_state_timestamp=self.state_timestamp_ms,
            members=tuple(MemberValue(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                                      m.rebalance_timeout_ms, m.session_timeout_ms,
                                      m.metadata(self.protocol_name), m.assignment)
                          for m in self.members.values()))

    def restore(self, now: int, value: GroupValue) -> None:
        """Load a membership record: a Stable group whose members get a fresh session to come back in."""
        self.protocol_type = value.protocol_type or None
        self.generation = value.generation
        self.protocol_name = value.protocol
        self.leader_id = value.leader
        self.state_timestamp_ms = value.current_state_timestamp
        self.members.clear()
        self.static_members.clear()
        for m in value.members:
            self.members[m.member_id] = Member(
                m.member_id, m.group_instance_id, m.client_id, m.client_host, m.session_timeout_ms,
                m.rebalance_timeout_ms, value.protocol_type, ((value.protocol or "", m.subscription),),
                now + m.session_timeout_ms, m.assignment)
            if m.group_instance_id is not None:
                self.static_members[m.group_instance_id] = m.member_id
        self.state = GroupState.STABLE if self.members and self.protocol_name else GroupState.EMPTY
        if self.leader_id not in self.members:
            self.leader_id = next(iter(self.members), None)

    def expired_offsets(self, now: int, retention_ms: int) -> list[tuple[str, int]]:
        """KIP-211: an empty group's offsets expire ``retention_ms`` after it became empty; a group
        outside group management (no protocol type) counts from each commit; a live consumer group
        keeps the offsets of topics it subscribes to. An offset with a pending transactional
        one waits for the transaction's end, as in Kafka."""
        return [tp for tp in self._expired_offsets(now, retention_ms) if not self.txn.has(tp)]

    def _expired_offsets(self, now: int, retention_ms: int) -> list[tuple[str, int]]:
        if self.state is GroupState.EMPTY:
            if self.protocol_type is None or self.state_timestamp_ms < 0:
                return [tp for tp, v in self.offsets.items() if v.commit_timestamp + retention_ms <= now]
            if self.state_timestamp_ms + retention_ms <= now:
                return list(self.offsets)
            return []
        subscribed = self.subscribed_topics() if self.state is GroupState.STABLE else None
        if subscribed is None:
            return []
        return [tp for tp, v in self.offsets.items()
                if tp[0] not in subscribed and v.commit_timestamp + retention_ms <= now]


_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


def consumer_subscription_topics(metadata: bytes) -> list[str] | None:
    """The topic list of a ConsumerProtocolSubscription (any version: it always comes first), or None."""
    try:
        pos = _I16.size  # version
        (count,) = _I32.unpack_from(metadata, pos)
        pos += _I32.size
        if count < 0 or count > len(metadata):
            return None
        topics = []
        for _ in range(count):
            (length,) = _I16.unpack_from(metadata, pos)
            pos += _I16.size
            if length < 0 or pos + length > len(metadata):
                return None
            topics.append(metadata[pos:pos + length].decode())
            pos += length
        return topics
    except (struct.error, UnicodeDecodeError):
        return None
