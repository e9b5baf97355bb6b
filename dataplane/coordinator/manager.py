"""The group coordinator: consumer groups and their committed offsets, kept in ``__consumer_offsets``.

Each group belongs to one partition of ``__consumer_offsets`` (Kafka's hash of
the group id) and is coordinated by that partition's leader. When this broker
leads a partition it loads the partition's records (offset commits and group
membership, Kafka's own formats) into ``Group`` state machines; every change is
appended to that partition before it is acknowledged, so a restarted broker
rebuilds the same state. The partition is compacted: the latest record per key
is all a reload needs.

This module is the asyncio adapter around the sans-IO ``Group``: it turns
JoinGroup/SyncGroup waits into futures, runs one timer for every group's
deadlines, and serialises writes per partition so records land in the order
their changes were made. It runs on the broker's event loop; log appends run in
worker threads.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from dataplane.coordinator.group import Group, GroupSettings, GroupState, JoinRequest, JoinResult, SyncResult
from dataplane.coordinator.records import (
    GroupKey,
    OffsetKey,
    OffsetValue,
    encode_group_value,
    encode_key,
    encode_offset_value,
    partition_for_group,
)
from dataplane.coordinator.replay import OffsetsReplay
from dataplane.protocol.errors import ErrorCode, KafkaError
from dataplane.protocol.records import NO_PRODUCER_EPOCH, NO_PRODUCER_ID, NO_SEQUENCE, Record, build_batch
from dataplane.storage import Log

log = logging.getLogger(__name__)

OFFSETS_TOPIC = "__consumer_offsets"
# Kafka's settings for the offsets topic: compacted, segments of 100 MiB.
OFFSETS_TOPIC_CONFIGS = {"cleanup.policy": "compact", "segment.bytes": str(100 * 1024 * 1024)}

TopicPartition = tuple[str, int]
_MOVED = {ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
_FENCED = {ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.PRODUCER_FENCED}


def now_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass(frozen=True, slots=True)
class CoordinatorSettings:
    group: GroupSettings = field(default_factory=GroupSettings)
    offsets_topic_partitions: int = 50
    offsets_topic_replication_factor: int = 3
    offsets_retention_ms: int = 7 * 24 * 3600 * 1000
    offsets_retention_check_interval_ms: int = 600_000
    offset_metadata_max_bytes: int = 4096


class OffsetsTopicHost(Protocol):
    """What the coordinator needs of its broker: the offsets topic's shape, leadership and logs."""

    def offsets_partition_count(self) -> int | None:
        """Partitions of ``__consumer_offsets``, None while the topic does not exist."""

    def leads_offsets_partition(self, partition: int) -> bool: ...

    def offsets_log(self, partition: int) -> Log:
        """The partition's log, to load groups from."""

    async def append_offsets(self, partition: int, batch: bytes) -> None:
        """Append as leader and wait until the whole ISR has it (acks=all); KafkaError if that fails."""


@dataclass(frozen=True, slots=True)
class CommitRequest:
    group_id: str
    generation: int
    member_id: str
    group_instance_id: str | None
    offsets: Mapping[TopicPartition, tuple[int, int, str | None]]  # offset, leader epoch, metadata


@dataclass(frozen=True, slots=True)
class TxnCommitRequest:
    """A TxnOffsetCommit: offsets written inside the producer's transaction.

    Before v3 (KIP-447) there is no member: generation -1, member id "", no instance id.
    """

    group_id: str
    producer_id: int
    producer_epoch: int
    generation: int
    member_id: str
    group_instance_id: str | None
    offsets: Mapping[TopicPartition, tuple[int, int, str | None]]  # offset, leader epoch, metadata


@dataclass(frozen=True, slots=True)
class FetchedOffset:
    """One partition of an OffsetFetch: the committed offset (None if none) or UNSTABLE_OFFSET_COMMIT."""

    value: OffsetValue | None
    error: ErrorCode = ErrorCode.NONE


class CoordinatorError(KafkaError):
    """A request for a group this broker cannot serve (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE...)."""


@dataclass
class _Partition:
    groups: dict[str, Group] = field(default_factory=dict)
    write_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    next_position: int = 0  # orders this broker's appends after the replayed records (see pending.py)


class GroupCoordinator:
    """The groups whose ``__consumer_offsets`` partitions this broker leads, loaded from and written to them.

    Owned by the broker (its ``OffsetsTopicHost``); runs on the broker's event loop.
    """

    def __init__(self, settings: CoordinatorSettings, host: OffsetsTopicHost, *,
                 clock: Callable[[], int] = now_ms) -> None:
        self.settings = settings
        self.host = host
        self.clock = clock
        self.partitions: dict[int, _Partition] = {}
        self._loading: dict[int, asyncio.Task[_Partition]] = {}
        self._wake = asyncio.Event()
        self._timer: asyncio.Task[None] | None = None
        self._expirer: asyncio.Task[None] | None = None

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._timer = loop.create_task(self._timer_loop(), name="group-timers")
        self._expirer = loop.create_task(self._expire_loop(), name="offset-expiry")

    async def stop(self) -> None:
        for task in (self._timer, self._expirer, *self._loading.values()):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        for partition in self.partitions.values():
            for group in partition.groups.values():
                group.fail_all(ErrorCode.NOT_COORDINATOR)
        self._deliver(self._all_groups())
        self.partitions.clear()

    def unload(self, partition: int) -> None:
        """Leadership of ``partition`` moved away: its groups answer NOT_COORDINATOR from now on."""
        found = self.partitions.pop(partition, None)
        if found is not None:
            for group in found.groups.values():
                group.fail_all(ErrorCode.NOT_COORDINATOR)
            self._deliver(found.groups.values())

    def leadership_changed(self, partition: int, leads: bool) -> None:
        """Follow ``__consumer_offsets`` leadership: load a partition this broker now leads, drop one it lost."""
        if not leads:
            self.unload(partition)
            return
        task = asyncio.get_running_loop().create_task(self._loaded(partition), name=f"load-offsets-{partition}")
        task.add_done_callback(_log_load_failure)

    # ------------------------------------------------------------------ routing

    def partition_for(self, group_id: str) -> int | None:
        count = self.host.offsets_partition_count()
        return None if count is None else partition_for_group(group_id, count)

    async def _partition(self, group_id: str) -> _Partition:
        partition = self.partition_for(group_id)
        if partition is None:
            raise CoordinatorError(f"{OFFSETS_TOPIC} does not exist yet", code=ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if not self.host.leads_offsets_partition(partition):
            self.unload(partition)
            raise CoordinatorError(f"this broker does not coordinate group {group_id!r}",
                                   code=ErrorCode.NOT_COORDINATOR)
        return await self._loaded(partition)

    async def _loaded(self, partition: int) -> _Partition:
        found = self.partitions.get(partition)
        if found is not None:
            return found
        task = self._loading.get(partition)
        if task is None:
            task = self._loading[partition] = asyncio.get_running_loop().create_task(self._load(partition))
        try:
            return await asyncio.shield(task)
        finally:
            if task.done():
                self._loading.pop(partition, None)

    async def _load(self, partition: int) -> _Partition:
        offsets_log = self.host.offsets_log(partition)
        started = time.monotonic()
        replayed = await asyncio.to_thread(_read_partition, offsets_log)
        now = self.clock()
        loaded = _Partition(next_position=replayed.end)
        for group_id, membership in replayed.groups.items():
            restored = self._new_group(group_id)
            restored.restore(now, membership)
            loaded.groups[group_id] = restored

        def group(group_id: str) -> Group:
            found = loaded.groups.get(group_id)
            if found is None:
                found = loaded.groups[group_id] = self._new_group(group_id)
            return found

        for (group_id, topic, part), committed in replayed.offsets.items():
            found = group(group_id)
            found.offsets[(topic, part)] = committed.value
            found.txn.positions[(topic, part)] = committed.position
        for producer_id, pending in replayed.pending.items():
            for (group_id, topic, part), offset in pending.items():
                group(group_id).txn.by_producer.setdefault(producer_id, {})[(topic, part)] = offset
        self.partitions[partition] = loaded
        log.info("loaded %d groups, %d offsets and %d open transactions from %s-%d in %.3fs", len(loaded.groups),
                 len(replayed.offsets), len(replayed.pending), OFFSETS_TOPIC, partition, time.monotonic() - started)
        self._wake.set()
        return loaded

    def _new_group(self, group_id: str) -> Group:
        return Group(group_id, self.settings.group, _new_member_id)

    async def _group(self, group_id: str, *, create: bool) -> tuple[_Partition, Group | None]:
        partition = await self._partition(group_id)
        group = partition.groups.get(group_id)
        if group is None and create:
            group = partition.groups[group_id] = self._new_group(group_id)
        elif group is not None:
            # Deadlines that passed before the timer ran are applied first: a heartbeat after the session
            # ended must not revive the member.
            deadline = group.next_deadline()
            if deadline is not None and deadline <= self.clock():
                group.tick(self.clock())
                await self._settle(partition, group)
        return partition, group

    # ------------------------------------------------------------------ membership

    async def join(self, group_id: str, request: JoinRequest) -> JoinResult:
        partition, group = await self._group(group_id, create=not request.member_id)
        if group is None:
            return JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, request.member_id)
        waiter: asyncio.Future[JoinResult | SyncResult] = asyncio.get_running_loop().create_future()
        group.join(self.clock(), request, waiter)
        if _unused(group):
            partition.groups.pop(group_id, None)  # a refused first join leaves no group behind
        await self._settle(partition, group)
        result = await waiter
        assert isinstance(result, JoinResult)
        return result

    async def sync(self, group_id: str, *, generation: int, member_id: str, group_instance_id: str | None,
                   protocol_type: str | None, protocol_name: str | None,
                   assignments: dict[str, bytes]) -> SyncResult:
        partition, group = await self._group(group_id, create=False)
        if group is None:
            return SyncResult(ErrorCode.UNKNOWN_MEMBER_ID)
        waiter: asyncio.Future[JoinResult | SyncResult] = asyncio.get_running_loop().create_future()
        group.sync(self.clock(), generation=generation, member_id=member_id, group_instance_id=group_instance_id,
                   protocol_type=protocol_type, protocol_name=protocol_name, assignments=assignments, waiter=waiter)
        await self._settle(partition, group)
        result = await waiter
        assert isinstance(result, SyncResult)
        return result

    async def heartbeat(self, group_id: str, *, generation: int, member_id: str,
                        group_instance_id: str | None) -> ErrorCode:
        partition, group = await self._group(group_id, create=False)
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        error = group.heartbeat(self.clock(), generation=generation, member_id=member_id,
                                group_instance_id=group_instance_id)
        await self._settle(partition, group)
        return error

    async def leave(self, group_id: str, members: Iterable[tuple[str, str | None]]) -> list[ErrorCode]:
        partition, group = await self._group(group_id, create=False)
        if group is None:
            return [ErrorCode.UNKNOWN_MEMBER_ID for _ in members]
        now = self.clock()
        errors = [group.leave(now, member_id=member_id, group_instance_id=instance) for member_id, instance in members]
        await self._settle(partition, group)
        return errors

    # ------------------------------------------------------------------ offsets

    async def commit(self, request: CommitRequest) -> dict[TopicPartition, ErrorCode]:
        create = request.generation < 0 and not request.member_id
        partition, group = await self._group(request.group_id, create=create)
        if group is None:
            return dict.fromkeys(request.offsets, ErrorCode.ILLEGAL_GENERATION)
        now = self.clock()
        error = group.commit_error(now, generation=request.generation, member_id=request.member_id,
                                   group_instance_id=request.group_instance_id)
        if error is not None:
            return dict.fromkeys(request.offsets, error)
        results: dict[TopicPartition, ErrorCode] = {}
        accepted: dict[TopicPartition, OffsetValue] = {}
        for tp, (offset, leader_epoch, metadata) in request.offsets.items():
            text = metadata or ""
            if len(text.encode()) > self.settings.offset_metadata_max_bytes:
                results[tp] = ErrorCode.OFFSET_METADATA_TOO_LARGE
            else:
                accepted[tp] = OffsetValue(offset, leader_epoch, text, now)
        if accepted:
            records = [(encode_key(OffsetKey(request.group_id, tp[0], tp[1])), encode_offset_value(value))
                       for tp, value in accepted.items()]
            async with partition.write_lock:
                position = await self._append(request.group_id, records)
                if group.state is not GroupState.DEAD:
                    group.offsets.update(accepted)
                    group.txn.committed(position, accepted)
            results.update(dict.fromkeys(accepted, ErrorCode.NONE))
        return results

    async def txn_commit(self, request: TxnCommitRequest) -> dict[TopicPartition, ErrorCode]:
        """TxnOffsetCommit: the offsets are written as one transactional batch of the producer and stay
        pending (invisible to OffsetFetch) until ``complete_transaction`` hears of the marker.

        The group is created if it does not exist, as Kafka does (a refused request leaves none behind).
        """
        partition, group = await self._group(request.group_id, create=True)
        assert group is not None
        error = group.txn_commit_error(generation=request.generation, member_id=request.member_id,
                                       group_instance_id=request.group_instance_id)
        if error is not None:
            if _unused(group):
                partition.groups.pop(request.group_id, None)
            return dict.fromkeys(request.offsets, error)
        now = self.clock()
        results: dict[TopicPartition, ErrorCode] = {}
        accepted: dict[TopicPartition, OffsetValue] = {}
        for tp, (offset, leader_epoch, metadata) in request.offsets.items():
            text = metadata or ""
            if len(text.encode()) > self.settings.offset_metadata_max_bytes:
                results[tp] = ErrorCode.OFFSET_METADATA_TOO_LARGE
            else:
                accepted[tp] = OffsetValue(offset, leader_epoch, text, now)
        if accepted:
            records = [(encode_key(OffsetKey(request.group_id, tp[0], tp[1])), encode_offset_value(value))
                       for tp, value in accepted.items()]
            async with partition.write_lock:
                try:
                    position = await self._append(request.group_id, records, producer_id=request.producer_id,
                                                  producer_epoch=request.producer_epoch)
                except CoordinatorError:
                    if _unused(group):
                        partition.groups.pop(request.group_id, None)
                    raise
                if group.state is not GroupState.DEAD:
                    group.txn.add(request.producer_id, position, accepted)
            results.update(dict.fromkeys(accepted, ErrorCode.NONE))
        elif _unused(group):
            partition.groups.pop(request.group_id, None)
        return results

    async def complete_transaction(self, offsets_partition: int, producer_id: int, commit: bool) -> None:
        """A commit or abort marker of ``producer_id`` was appended to ``offsets_partition``: its pending
        offsets there become committed (where no later commit of the partition was written) or are dropped.

        A partition this broker does not lead is left alone: whoever loads it replays the marker.
        """
        loaded = self.partitions.get(offsets_partition)
        if loaded is None:
            if offsets_partition not in self._loading:
                return
            loaded = await self._loaded(offsets_partition)
        async with loaded.write_lock:
            for group in loaded.groups.values():
                if producer_id in group.txn.by_producer:
                    group.txn.complete(producer_id, commit, group.offsets)

    async def fetch_offsets(self, group_id: str,
                            partitions: Iterable[TopicPartition] | None) -> dict[TopicPartition, OffsetValue | None]:
        """Committed offsets of the given partitions (None where none), or of every partition when None."""
        found = await self.fetch_committed(group_id, partitions, require_stable=False)
        return {tp: fetched.value for tp, fetched in found.items()}

    async def fetch_committed(self, group_id: str, partitions: Iterable[TopicPartition] | None, *,
                              require_stable: bool) -> dict[TopicPartition, FetchedOffset]:
        """OffsetFetch: committed offsets of the given partitions, or of every committed partition when None.

        With ``require_stable`` (v7+, KIP-447) a partition with a pending transactional offset answers
        UNSTABLE_OFFSET_COMMIT (the client retries); without it, the last committed value.
        """
        _, group = await self._group(group_id, create=False)
        committed = {} if group is None else group.offsets
        wanted = sorted(committed) if partitions is None else list(partitions)
        unstable = set() if group is None or not require_stable else group.txn.partitions()
        return {tp: FetchedOffset(None, ErrorCode.UNSTABLE_OFFSET_COMMIT) if tp in unstable
                else FetchedOffset(committed.get(tp)) for tp in wanted}

    async def delete_offsets(self, group_id: str,
                             partitions: Iterable[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
        """OffsetDelete: refused per partition while the group subscribes to the topic."""
        partition, group = await self._group(group_id, create=False)
        wanted = list(partitions)
        if group is None or group.state is GroupState.DEAD:
            raise CoordinatorError(f"group {group_id!r} does not exist", code=ErrorCode.GROUP_ID_NOT_FOUND)
        subscribed: set[str] | None = set() if group.state is GroupState.EMPTY else group.subscribed_topics()
        if subscribed is None:
            raise CoordinatorError(f"group {group_id!r} is not empty and its subscriptions cannot be read",
                                   code=ErrorCode.NON_EMPTY_GROUP)
        results = {tp: ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC if tp[0] in subscribed else ErrorCode.NONE
                   for tp in wanted}
        doomed = [tp for tp, error in results.items()
                  if error is ErrorCode.NONE and (tp in group.offsets or group.txn.has(tp))]
        await self._tombstone_offsets(partition, group, doomed)
        return results

    async def delete_group(self, group_id: str) -> ErrorCode:
        try:
            partition, group = await self._group(group_id, create=False)
        except CoordinatorError as exc:
            return exc.code
        if group is None or group.state is GroupState.DEAD:
            return ErrorCode.GROUP_ID_NOT_FOUND
        if group.state is not GroupState.EMPTY or not group.is_empty():
            return ErrorCode.NON_EMPTY_GROUP
        await self._remove_group(partition, group)
        return ErrorCode.NONE

    # ------------------------------------------------------------------ reads

    async def describe(self, group_id: str) -> Group | None:
        _, group = await self._group(group_id, create=False)
        return group if group is not None and group.state is not GroupState.DEAD else None

    async def list_groups(self) -> list[Group]:
        count = self.host.offsets_partition_count() or 0
        found: list[Group] = []
        for index in range(count):
            if self.host.leads_offsets_partition(index):
                found += [g for g in (await self._loaded(index)).groups.values() if g.state is not GroupState.DEAD]
        return found

    # ------------------------------------------------------------------ effects

    async def _settle(self, partition: _Partition, group: Group) -> None:
        """After a change: persist the membership record if it changed, then answer the waiters."""
        if group.dirty:
            async with partition.write_lock:
                if group.dirty:
                    group.dirty = False
                    value = group.to_value()
                    try:
                        await self._append(group.group_id, [(encode_key(GroupKey(group.group_id)),
                                                             encode_group_value(value))])
                    except KafkaError as exc:  # answered anyway: the members hold the truth until the next write
                        log.error("could not store group %r: %s", group.group_id, exc)
        self._deliver([group])
        self._wake.set()

    def _deliver(self, groups: Iterable[Group]) -> None:
        for group in groups:
            outbox, group.outbox = group.outbox, []
            for waiter, result in outbox:
                assert isinstance(waiter, asyncio.Future)
                if not waiter.done():
                    waiter.set_result(result)

    async def _append(self, group_id: str, records: Sequence[tuple[bytes, bytes | None]], *,
                      producer_id: int = NO_PRODUCER_ID, producer_epoch: int = NO_PRODUCER_EPOCH) -> int:
        """Append one batch (transactional when a producer id is given, as Kafka writes a TxnOffsetCommit:
        the producer's id and epoch, no sequence); returns its position. Called under the write lock."""
        partition = self.partition_for(group_id)
        if partition is None or not self.host.leads_offsets_partition(partition):
            raise CoordinatorError(f"this broker no longer coordinates group {group_id!r}",
                                   code=ErrorCode.NOT_COORDINATOR)
        loaded = self.partitions.get(partition)
        position = 0
        if loaded is not None:
            position, loaded.next_position = loaded.next_position, loaded.next_position + len(records)
        now = self.clock()
        transactional = producer_id != NO_PRODUCER_ID
        batch = build_batch([Record(i, now, key, value) for i, (key, value) in enumerate(records)],
                            producer_id=producer_id, producer_epoch=producer_epoch, base_sequence=NO_SEQUENCE,
                            is_transactional=transactional)
        try:
            await self.host.append_offsets(partition, batch)
        except CoordinatorError:
            raise
        except KafkaError as exc:  # Kafka's mapping of a failed offsets-topic write for the group's client
            if transactional and exc.code in _FENCED:
                code = exc.code
            elif exc.code in _MOVED:
                code = ErrorCode.NOT_COORDINATOR
            else:
                code = ErrorCode.COORDINATOR_NOT_AVAILABLE
            raise CoordinatorError(f"could not write to {OFFSETS_TOPIC}-{partition}: {exc}", code=code) from exc
        return position

    async def _tombstone_offsets(self, partition: _Partition, group: Group, doomed: list[TopicPartition]) -> None:
        if not doomed:
            return
        async with partition.write_lock:
            await self._append(group.group_id, [(encode_key(OffsetKey(group.group_id, t, p)), None)
                                                for t, p in doomed])
            for tp in doomed:
                group.offsets.pop(tp, None)
            group.txn.forget(doomed)

    async def _remove_group(self, partition: _Partition, group: Group) -> None:
        async with partition.write_lock:
            # Pending transactional offsets are tombstoned too (Kafka's deleteAllOffsets).
            keys = [encode_key(OffsetKey(group.group_id, t, p))
                    for t, p in [*group.offsets, *(group.txn.partitions() - set(group.offsets))]]
            await self._append(group.group_id, [(key, None) for key in [*keys, encode_key(GroupKey(group.group_id))]])
            group.mark_dead()
            partition.groups.pop(group.group_id, None)
        self._deliver([group])

    def _all_groups(self) -> list[Group]:
        return [g for p in self.partitions.values() for g in p.groups.values()]

    # ------------------------------------------------------------------ timers

    async def _timer_loop(self) -> None:
        """Session, rebalance, sync and initial-delay deadlines of every loaded group."""
        while True:
            deadlines = [d for g in self._all_groups() if (d := g.next_deadline()) is not None]
            self._wake.clear()
            timeout = None if not deadlines else max(0.0, (min(deadlines) - self.clock()) / 1000)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout)
            now = self.clock()
            for index, partition in list(self.partitions.items()):
                for group in list(partition.groups.values()):
                    deadline = group.next_deadline()
                    if deadline is not None and deadline <= now:
                        group.tick(now)
                        try:
                            await self._settle(partition, group)
                        except Exception:
                            log.exception("group %r in partition %d: timer step failed", group.group_id, index)

    async def _expire_loop(self) -> None:
        interval = self.settings.offsets_retention_check_interval_ms / 1000
        while True:
            await asyncio.sleep(interval)
            try:
                await self.expire_offsets()
            except Exception:
                log.exception("offset expiration failed (will retry)")

    async def expire_offsets(self) -> int:
        """Drop offsets past ``offsets.retention.minutes``; an empty group left with none is deleted."""
        now, dropped = self.clock(), 0
        for index, partition in list(self.partitions.items()):
            for group in list(partition.groups.values()):
                expired = group.expired_offsets(now, self.settings.offsets_retention_ms)
                if expired:
                    await self._tombstone_offsets(partition, group, expired)
                    dropped += len(expired)
                # A group with an open transaction stays until its marker (Kafka's cleanupExpiredOffsets).
                if group.state is GroupState.EMPTY and not group.offsets and not group.txn and group.is_empty() and (
                        expired or group.state_timestamp_ms + self.settings.offsets_retention_ms <= now):
                    await self._remove_group(partition, group)
            if dropped:
                log.info("expired %d offsets in %s-%d", dropped, OFFSETS_TOPIC, index)
        return dropped


def _log_load_failure(task: asyncio.Task[_Partition]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.warning("loading an offsets partition failed (the next request retries): %s", task.exception())


def _new_member_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4()}"


def _unused(group: Group) -> bool:
    """A group that exists only because a request just created it: nothing to keep."""
    return (group.generation == 0 and group.state is GroupState.EMPTY and group.is_empty() and not group.offsets
            and not group.txn)


def _read_partition(offsets_log: Log) -> OffsetsReplay:
    """Replay a whole partition, transaction markers included (see replay.py)."""
    replay = OffsetsReplay()
    position = offsets_log.log_start_offset
    end = offsets_log.log_end_offset
    while position < end:
        batches = offsets_log.read_batches(position, 1 << 20, end)
        if not batches:
            break
        for batch in batches:
            if batch.header.next_offset > position:
                replay.apply(batch)
            position = max(position, batch.header.next_offset)
    replay.end = max(replay.end, end)
    return replay
