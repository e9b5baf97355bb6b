"""The transaction coordinator over a real ``__transaction_state`` log: marker writes that fail and are retried,
a failover that finishes an interrupted commit, timeouts and id expiry, each checked against what the log holds.

The host appends to a real ``Log`` as the partition's leader would; its marker writer answers the way partition
leaders do (NOT_LEADER_OR_FOLLOWER while one is moving) for as many attempts as a test asks, then writes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from dataplane.coordinator.txn_manager import TransactionCoordinator, TxnSettings, _read_partition
from dataplane.coordinator.txn_state import Markers, TopicPartition, TxnState
from dataplane.protocol.errors import ErrorCode
from dataplane.storage import Log
from tests.dataplane.conftest import Clock

T = TypeVar("T")
OpenLog = Callable[..., Log]
TP = ("orders", 0)


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


class LogHost:
    """A one-partition ``__transaction_state`` this process leads, and partition leaders that refuse markers
    ``failures`` times before taking them."""

    def __init__(self, log: Log, *, failures: int = 0, epoch: int = 0) -> None:
        self.log, self.failures, self.epoch = log, failures, epoch
        self.written: list[tuple[Markers, int]] = []  # (markers, coordinator epoch) that were taken
        self.attempts = 0
        self._next_id = 1000

    def txn_partition_count(self) -> int | None:
        return 1

    def leads_txn_partition(self, partition: int) -> bool:
        return partition == 0

    def txn_log(self, partition: int) -> Log:
        return self.log

    def txn_coordinator_epoch(self, partition: int) -> int:
        return self.epoch

    async def append_txn(self, partition: int, batch: bytes) -> None:
        self.log.append_as_leader(batch, leader_epoch=self.epoch)

    async def next_producer_id(self) -> int:
        self._next_id += 1
        return self._next_id

    async def write_markers(self, markers: Markers, coordinator_epoch: int) -> dict[TopicPartition, ErrorCode]:
        self.attempts += 1
        if self.attempts <= self.failures:
            return dict.fromkeys(markers.partitions, ErrorCode.NOT_LEADER_OR_FOLLOWER)
        self.written.append((markers, coordinator_epoch))
        return dict.fromkeys(markers.partitions, ErrorCode.NONE)


def coordinator(host: LogHost, clock: Clock, **settings: int) -> TransactionCoordinator:
    return TransactionCoordinator(TxnSettings(**settings), host, clock=clock)


async def settled(coord: TransactionCoordinator, transactional_id: str) -> None:
    """Until the id's markers are written and its end persisted (the coordinator's own task)."""
    part = coord.partitions[0]
    task = part.completing.get(transactional_id)
    if task is not None:
        await task


async def open_transaction(coord: TransactionCoordinator, transactional_id: str = "tx") -> tuple[int, int]:
    started = await coord.init_producer_id(transactional_id, timeout_ms=60_000)
    assert started.error == ErrorCode.NONE
    assert await coord.add_partitions(transactional_id, started.producer_id, started.producer_epoch, [TP]) \
        == ErrorCode.NONE
    return started.producer_id, started.producer_epoch


def test_failed_marker_writes_are_retried_until_the_commit_completes(open_log: OpenLog, clock: Clock) -> None:
    log = open_log(name="__transaction_state-0")
    host = LogHost(log, failures=2)

    async def scenario() -> None:
        coord = coordinator(host, clock)
        pid, epoch = await open_transaction(coord)
        ended = await coord.end_txn("tx", pid, epoch, commit=True, bump=False)
        assert ended.error == ErrorCode.NONE  # decided once PrepareCommit is in the log, written or not
        await settled(coord, "tx")
        assert host.attempts == 3 and host.written == [(Markers(pid, epoch, True, frozenset({TP})), 0)]
        assert coord.partitions[0].txns["tx"].state == TxnState.COMPLETE_COMMIT
        await coord.stop()
    run(scenario())
    assert _read_partition(log)["tx"].state == TxnState.COMPLETE_COMMIT  # what a reload would find


def test_a_new_coordinator_finishes_a_commit_the_old_one_could_not(open_log: OpenLog, clock: Clock) -> None:
    log = open_log(name="__transaction_state-0")

    async def scenario() -> None:
        stuck = LogHost(log, failures=10**6)  # its partition leaders never take the markers
        old = coordinator(stuck, clock)
        pid, epoch = await open_transaction(old)
        await old.end_txn("tx", pid, epoch, commit=True, bump=False)
        assert _read_partition(log)["tx"].state == TxnState.PREPARE_COMMIT
        await old.stop()  # it lost the partition with the markers unwritten

        fresh_host = LogHost(log, epoch=1)
        new = coordinator(fresh_host, clock)
        new.leadership_changed(0, True)  # load, then resume the interrupted end
        described = await new.describe("tx")
        assert described is not None
        await settled(new, "tx")
        assert fresh_host.written == [(Markers(pid, epoch, True, frozenset({TP})), 1)]  # the new coordinator epoch
        assert new.partitions[0].txns["tx"].state == TxnState.COMPLETE_COMMIT
        # the producer's retried EndTxn is answered as done, not refused
        assert (await new.end_txn("tx", pid, epoch, commit=True, bump=False)).error == ErrorCode.NONE
        await new.stop()
    run(scenario())


def test_a_transaction_past_its_timeout_is_aborted_with_a_bumped_epoch(open_log: OpenLog, clock: Clock) -> None:
    log = open_log(name="__transaction_state-0")
    host = LogHost(log)

    async def scenario() -> None:
        coord = coordinator(host, clock)
        pid, epoch = await open_transaction(coord)
        assert await coord.abort_timed_out() == 0
        clock.advance(60_001)
        assert await coord.abort_timed_out() == 1
        await settled(coord, "tx")
        assert host.written == [(Markers(pid, epoch + 1, False, frozenset({TP})), 0)]  # the zombie is fenced
        assert (await coord.end_txn("tx", pid, epoch, commit=True, bump=False)).error == ErrorCode.PRODUCER_FENCED
        await coord.stop()
    run(scenario())


def test_an_idle_id_expires_with_a_tombstone_and_an_open_one_stays(open_log: OpenLog, clock: Clock) -> None:
    log = open_log(name="__transaction_state-0")
    host = LogHost(log)

    async def scenario() -> None:
        coord = coordinator(host, clock, id_expiration_ms=1000)
        assert (await coord.init_producer_id("idle", timeout_ms=600_000)).error == ErrorCode.NONE
        await open_transaction(coord, "busy")
        clock.advance(999)
        assert await coord.expire_ids() == 0
        clock.advance(1)
        assert await coord.expire_ids() == 1
        assert await coord.describe("idle") is None
        assert await coord.describe("busy") is not None  # open: it times out, it never expires
        await coord.stop()
    run(scenario())
    assert set(_read_partition(log)) == {"busy"}  # a reload forgets the expired id too
