"""Followers pull from their leader: one fetcher task per leader broker, all its partitions in one Fetch.

Before fetching a partition at a new leader epoch the follower truncates its log
to where it agrees with the leader, learned with OffsetForLeaderEpoch (KIP-101,
with KIP-279's rounds for epochs the two logs do not share), so replicas never
diverge. Fetches carry the follower's current leader epoch; a leader that
answers FENCED_LEADER_EPOCH / NOT_LEADER_OR_FOLLOWER / UNKNOWN_LEADER_EPOCH
disagrees with our metadata (or has not applied it yet), so the partition
pauses briefly while metadata is re-read, then tries again.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import logging
import ssl
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from kio.schema.errors import ErrorCode as WireError
from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.list_offsets.v8.request import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic
from kio.schema.offset_for_leader_epoch.v4.request import (
    OffsetForLeaderEpochRequest,
    OffsetForLeaderPartition,
    OffsetForLeaderTopic,
)
from kio.schema.types import BrokerId, TopicName
from kio.static.primitive import i32, i32Timedelta, i64

from dataplane.replication.peer import PeerConnection, PeerError
from dataplane.security.sasl import ClientCredentials
from dataplane.storage.epoch_cache import UNDEFINED_EPOCH

if TYPE_CHECKING:
    from dataplane.replication.partition import Partition

log = logging.getLogger(__name__)
_WAIT_FOR_METADATA = {WireError.fenced_leader_epoch, WireError.not_leader_or_follower,
                      WireError.unknown_leader_epoch, WireError.unknown_topic_or_partition}
MAX_TRUNCATION_ROUNDS = 16
EARLIEST_LOCAL_TIMESTAMP = -4  # ListOffsets: the leader's local log start (KIP-1005)


class FollowerHost(Protocol):
    """What a fetcher needs from its broker."""

    node_id: int

    def leader_address(self, leader: int) -> tuple[str, int] | None: ...

    def follower_partition(self, topic: str, index: int, leader_epoch: int) -> Partition | None:
        """The partition while this broker still follows it at ``leader_epoch``; None once that changed."""

    def request_metadata_refresh(self) -> None: ...

    async def restore_from_remote(self, replica: Partition, leader_local_start: int, leader_log_start: int,
                                  leader_epoch: int) -> bool:
        """Rebuild a follower below its leader's local log start from the remote tier (KIP-405); False when
        that cannot be done yet (the fetcher retries after a pause)."""


PARK_SECONDS = 0.25


@dataclass
class FetchTarget:
    leader_epoch: int
    truncated: bool = False
    parked_until: float = 0.0  # the leader disagreed with our metadata: retry after a metadata refresh

    @property
    def parked(self) -> bool:
        return time.monotonic() < self.parked_until

    def park(self) -> None:
        self.parked_until = time.monotonic() + PARK_SECONDS


@dataclass(frozen=True, slots=True)
class FetcherSettings:
    max_wait_ms: int = 500
    partition_max_bytes: int = 4 << 20
    response_max_bytes: int = 10 << 20
    request_timeout_s: float = 30.0
    # Paces a fetch of ``received`` bytes that started at ``started`` (monotonic) under the broker's
    # replication throttle; None: never throttled.
    throttle: Callable[[int, float], Awaitable[None]] | None = None
    sasl: ClientCredentials | None = None  # the cluster's broker credential on a SASL listener
    tls: ssl.SSLContext | None = None  # SSL and SASL_SSL listeners: how the leader's certificate is checked


class ReplicaFetcher:
    """Pulls every partition this broker follows from one leader. Owned by the replica manager; one task on
    the broker's event loop."""

    def __init__(self, host: FollowerHost, leader: int, settings: FetcherSettings) -> None:
        self.host = host
        self.leader = leader
        self.settings = settings
        self.targets: dict[tuple[str, int], FetchTarget] = {}
        self._wake = asyncio.Event()
        self._conn: PeerConnection | None = None
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name=f"fetcher-{self.leader}")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._conn is not None:
            self._conn.close()

    def follow(self, topic: str, partition: int, leader_epoch: int) -> None:
        current = self.targets.get((topic, partition))
        if current is None or current.leader_epoch != leader_epoch:
            self.targets[(topic, partition)] = FetchTarget(leader_epoch)
            self._wake.set()

    def unfollow(self, topic: str, partition: int) -> None:
        self.targets.pop((topic, partition), None)

    def _drop(self, key: tuple[str, int], target: FetchTarget) -> None:
        """Stop pulling ``key`` at ``target``'s epoch, unless it was re-targeted meanwhile (a newer epoch)."""
        if self.targets.get(key) is target:
            del self.targets[key]

    async def _run(self) -> None:
        backoff = 0.05
        while True:
            active = {k: t for k, t in self.targets.items() if not t.parked}
            if not active:
                self._wake.clear()
                parked = [t.parked_until for t in self.targets.values()]
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(),
                                           max(0.0, min(parked) - time.monotonic()) if parked else None)
                continue
            try:
                conn = await self._connection()
                for key, target in list(active.items()):
                    if not target.truncated:
                        await self._truncate(conn, key, target)
                await self._fetch(conn, {k: t for k, t in active.items() if t.truncated and not t.parked})
                backoff = 0.05
            except Exception as exc:  # the fetcher must outlive any one bad round
                if isinstance(exc, PeerError):
                    log.info("fetcher for leader %d: %s (retrying)", self.leader, exc)
                else:
                    log.exception("fetcher for leader %d failed a round (truncating again, then retrying)",
                                  self.leader)
                    for target in self.targets.values():
                        target.truncated = False
                if self._conn is not None:
                    self._conn.close()
                self._conn = None
                self._wake.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), backoff)
                backoff = min(backoff * 2, 1.0)
                self.host.request_metadata_refresh()

    async def _connection(self) -> PeerConnection:
        if self._conn is None:
            address = self.host.leader_address(self.leader)
            if address is None:
                raise PeerError(f"leader {self.leader} is not a live broker")
            conn = await PeerConnection.open(*address, f"sluice-replica-{self.host.node_id}",
                                             self.settings.request_timeout_s, tls=self.settings.tls)
            if self.settings.sasl is not None:
                try:
                    await conn.authenticate(self.settings.sasl, self.settings.request_timeout_s)
                except BaseException:
                    conn.close()
                    raise
            self._conn = conn
        return self._conn

    async def _truncate(self, conn: PeerConnection, key: tuple[str, int], target: FetchTarget) -> None:
        """Truncate to the last offset both logs agree on (KIP-101/279), asking as many rounds as needed."""
        topic, partition = key
        replica = self.host.follower_partition(topic, partition, target.leader_epoch)
        if replica is None:
            self._drop((topic, partition), target)
            return
        partition_log = replica.log
        asked = partition_log.latest_epoch
        point: int | None = None
        for _ in range(MAX_TRUNCATION_ROUNDS):
            if asked == UNDEFINED_EPOCH:
                point = partition_log.log_end_offset if partition_log.log_end_offset == partition_log.log_start_offset \
                    else partition_log.log_start_offset
                break
            answer = await self._end_offset_for(conn, topic, partition, target.leader_epoch, asked)
            if answer is None:
                target.park()
                self.host.request_metadata_refresh()
                return
            leader_epoch, leader_end = answer
            if leader_epoch == UNDEFINED_EPOCH:
                point = partition_log.log_start_offset  # the leader shares no epoch with us: refetch everything
                break
            local = partition_log.end_offset_for_epoch(leader_epoch)
            if local.epoch == leader_epoch:
                point = min(leader_end, local.end_offset)
                break
            asked = local.epoch  # we never had the leader's epoch: ask about our latest older one
        if point is None:
            raise PeerError(f"no agreement on {topic}-{partition} after {MAX_TRUNCATION_ROUNDS} rounds")
        if point < partition_log.log_end_offset:
            log.info("truncating %s-%d from %d to %d (leader %d, epoch %d)", topic, partition,
                     partition_log.log_end_offset, point, self.leader, target.leader_epoch)
            if not await replica.truncate(max(point, 0), target.leader_epoch,
                                          fully=point <= partition_log.log_start_offset):
                self._drop((topic, partition), target)
                return
        target.truncated = True

    async def _end_offset_for(self, conn: PeerConnection, topic: str, partition: int, current_epoch: int,
                              epoch: int) -> tuple[int, int] | None:
        request = OffsetForLeaderEpochRequest(replica_id=BrokerId(self.host.node_id), topics=(
            OffsetForLeaderTopic(topic=TopicName(topic), partitions=(OffsetForLeaderPartition(
                partition=i32(partition), current_leader_epoch=i32(current_epoch), leader_epoch=i32(epoch)),)),))
        response = await conn.call(request, 4, self.settings.request_timeout_s)
        for topic_result in response.topics:
            for result in topic_result.partitions:
                if result.error_code != WireError.none:
                    log.info("OffsetForLeaderEpoch %s-%d at leader %d: %s", topic, partition, self.leader,
                             result.error_code.name)
                    return None
                return int(result.leader_epoch), int(result.end_offset)
        raise PeerError("OffsetForLeaderEpoch answer without the partition asked for")

    async def _fetch(self, conn: PeerConnection, targets: dict[tuple[str, int], FetchTarget]) -> None:
        replicas: dict[tuple[str, int], Partition] = {}
        topics: dict[str, list[FetchPartition]] = {}
        for (topic, partition), target in targets.items():
            replica = self.host.follower_partition(topic, partition, target.leader_epoch)
            if replica is None:
                self._drop((topic, partition), target)
                continue
            replicas[(topic, partition)] = replica
            partition_log = replica.log
            topics.setdefault(topic, []).append(FetchPartition(
                partition=i32(partition), current_leader_epoch=i32(target.leader_epoch),
                fetch_offset=i64(partition_log.log_end_offset), last_fetched_epoch=i32(partition_log.latest_epoch),
                log_start_offset=i64(partition_log.log_start_offset),
                partition_max_bytes=i32(self.settings.partition_max_bytes)))
        if not topics:
            return
        request = FetchRequest(
            cluster_id=None, replica_id=BrokerId(self.host.node_id),
            max_wait=i32Timedelta.parse(datetime.timedelta(milliseconds=self.settings.max_wait_ms)),
            min_bytes=i32(1), max_bytes=i32(self.settings.response_max_bytes), isolation_level=0,  # type: ignore[arg-type]
            session_id=i32(0), session_epoch=i32(-1),
            topics=tuple(FetchTopic(topic=TopicName(t), partitions=tuple(p)) for t, p in topics.items()),
            forgotten_topics_data=(), rack_id="")
        started = time.monotonic()
        response = await conn.call(request, 12, self.settings.request_timeout_s + self.settings.max_wait_ms / 1000)
        received = 0
        for topic_response in response.responses:
            for data in topic_response.partitions:
                key = (str(topic_response.topic), int(data.partition_index))
                current = self.targets.get(key)
                replica = replicas.get(key)
                if current is None or replica is None or current is not targets.get(key):
                    continue  # unfollowed or re-targeted while the fetch was out
                received += await self._apply(key, current, replica, data)
        await self._throttle(received, started)

    async def _apply(self, key: tuple[str, int], target: FetchTarget, replica: Partition, data: object) -> int:
        topic, partition = key
        partition_log = replica.log
        error = data.error_code  # type: ignore[attr-defined]
        if error in _WAIT_FOR_METADATA:
            target.park()
            self.host.request_metadata_refresh()
            return 0
        if error == WireError.offset_moved_to_tiered_storage:
            await self._rebuild_from_remote(key, target, replica, int(data.log_start_offset))  # type: ignore[attr-defined]
            return 0
        if error == WireError.offset_out_of_range:
            leader_start = int(data.log_start_offset)  # type: ignore[attr-defined]
            if partition_log.log_end_offset < leader_start:
                if not await replica.truncate(leader_start, target.leader_epoch, fully=True):
                    self._drop((topic, partition), target)
            else:
                target.truncated = False
            return 0
        if error != WireError.none:
            log.warning("fetch of %s-%d from leader %d: %s", topic, partition, self.leader, error.name)
            return 0
        records = data.records  # type: ignore[attr-defined]
        if records and not await replica.append_as_follower(records, target.leader_epoch):
            self._drop((topic, partition), target)  # no longer following at this epoch: the data is not ours to take
            return 0
        await replica.follower_update(int(data.high_watermark),  # type: ignore[attr-defined]
                                      int(data.log_start_offset))  # type: ignore[attr-defined]
        return len(records) if records else 0

    async def _rebuild_from_remote(self, key: tuple[str, int], target: FetchTarget, replica: Partition,
                                   leader_log_start: int) -> None:
        """The leader keeps what we asked for only in its remote tier: learn its local log start (ListOffsets
        -4), take the epochs and producer state below it from the remote tier, and restart the log there."""
        topic, partition = key
        conn = await self._connection()
        request = ListOffsetsRequest(replica_id=BrokerId(self.host.node_id), isolation_level=0,  # type: ignore[arg-type]
                                     topics=(ListOffsetsTopic(name=TopicName(topic), partitions=(ListOffsetsPartition(
                                         partition_index=i32(partition), current_leader_epoch=i32(target.leader_epoch),
                                         timestamp=i64(EARLIEST_LOCAL_TIMESTAMP)),)),))
        response = await conn.call(request, 8, self.settings.request_timeout_s)
        local_start = -1
        for topic_result in response.topics:
            for result in topic_result.partitions:
                if result.error_code == WireError.none:
                    local_start = int(result.offset)
        if local_start < 0:
            target.park()
            return
        log.info("%s-%d is below leader %d's local log start %d: rebuilding from the remote tier", topic, partition,
                 self.leader, local_start)
        if not await self.host.restore_from_remote(replica, local_start, leader_log_start, target.leader_epoch):
            target.park()

    async def _throttle(self, received: int, started: float) -> None:
        if self.settings.throttle is not None and received:
            await self.settings.throttle(received, started)
