"""One partition's rules on a real log: role changes against in-flight appends, acks=all, long-poll wake-ups.

The first test is the KIP-101 failover the chaos scenario
``test_follower_restarts_as_leader_dies`` caught writing an idempotent
producer's record twice: a restarted follower is catching up with a large
replicated append (in a worker thread) when its leader dies and it is elected.
The append must either land before it leads (and its producer state with it)
or not at all; the producer's retry of the last acknowledged batch is then a
duplicate, not a second copy.
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from pathlib import Path

import pytest

from dataplane.cluster.store import PartitionState
from dataplane.protocol.errors import ErrorCode, KafkaError
from dataplane.protocol.records import Record, build_batch
from dataplane.replication.partition import INLINE_APPEND_BYTES, Partition, Role
from dataplane.storage import Log, LogConfig
from tests.support.polling import wait_until_async

PRODUCER = 4711
VALUE = b"x" * 1000


def idempotent(sequence: int, count: int, *, base_offset: int = 0, leader_epoch: int = -1) -> bytes:
    records = [Record(offset=base_offset + i, timestamp=1000 + i, key=b"k", value=VALUE, headers=())
               for i in range(count)]
    return build_batch(records, base_offset=base_offset, producer_id=PRODUCER, producer_epoch=0,
                       base_sequence=sequence, partition_leader_epoch=leader_epoch)


def state(leader: int, epoch: int, isr: tuple[int, ...] = (1, 2)) -> PartitionState:
    return PartitionState(0, (1, 2), isr, leader, epoch, epoch)


until = wait_until_async  # the name this module's tests use


@pytest.fixture
def log(tmp_path: Path) -> Log:
    opened = Log.open(tmp_path / "t-0", LogConfig())
    yield opened
    opened.close()


def test_a_replicated_append_in_flight_lands_before_the_follower_leads_and_the_retry_is_a_duplicate(
        log: Log) -> None:
    async def run() -> None:
        partition = Partition("t", 0, log, node_id=1)
        await partition.make_follower(leader=2, leader_epoch=3)
        batches = [idempotent(10 * i, 10, base_offset=10 * i, leader_epoch=3) for i in range(8)]
        replicated = b"".join(batches)
        assert len(replicated) > INLINE_APPEND_BYTES  # so it goes to a worker thread
        released, entered = threading.Event(), threading.Event()
        real_append = log.append_as_follower

        def slow_append(records: bytes) -> object:
            entered.set()
            assert released.wait(30)
            return real_append(records)
        log.append_as_follower = slow_append  # type: ignore[method-assign]
        appending = asyncio.create_task(partition.append_as_follower(replicated, 3))
        assert await asyncio.to_thread(entered.wait, 30)  # the append is in its worker thread now
        electing = asyncio.create_task(partition.make_leader(state(1, 4, isr=(1,)), now=0))
        try:
            # Until the election either finished (the bug) or queued behind the in-flight append.
            await until(lambda: electing.done() or bool(partition._lock._waiters))  # type: ignore[attr-defined]
            assert not electing.done(), "became leader while a replicated append was still landing"
        finally:
            released.set()
        assert await appending
        await electing
        assert partition.role is Role.LEADER and log.log_end_offset == 80
        retry = await partition.append_as_leader(idempotent(70, 10), acks_all=False)
        assert retry.duplicate and (retry.first_offset, retry.last_offset) == (70, 79)
        assert log.log_end_offset == 80
        following = await partition.append_as_leader(idempotent(80, 10), acks_all=False)
        assert not following.duplicate and following.first_offset == 80
    asyncio.run(run())


def test_a_follower_append_for_an_old_epoch_is_refused(log: Log) -> None:
    async def run() -> None:
        partition = Partition("t", 0, log, node_id=1)
        await partition.make_follower(leader=2, leader_epoch=3)
        assert await partition.append_as_follower(idempotent(0, 5, leader_epoch=3), 3)
        await partition.make_leader(state(1, 4, isr=(1,)), now=0)
        assert not await partition.append_as_follower(idempotent(5, 5, base_offset=5, leader_epoch=3), 3)
        assert not await partition.truncate(0, 3)
        assert log.log_end_offset == 5
    asyncio.run(run())


def test_acks_all_waits_for_the_isr_and_fails_when_leadership_moves(log: Log) -> None:
    async def run() -> None:
        partition = Partition("t", 0, log, node_id=1, min_insync_replicas=2)
        await partition.make_leader(state(1, 1, isr=(1,)), now=0)
        with pytest.raises(KafkaError) as caught:
            await partition.append_as_leader(idempotent(0, 1), acks_all=True)
        assert caught.value.code == ErrorCode.NOT_ENOUGH_REPLICAS
        partition.update_membership(dataclasses.replace(state(1, 1), partition_epoch=2), now=0)
        info = await partition.append_as_leader(idempotent(0, 1), acks_all=True)
        waiting = asyncio.create_task(partition.wait_for_replication(info.last_offset + 1, timeout=30))
        await until(lambda: bool(partition._waiters))  # the produce waits for the ISR
        assert not waiting.done()
        partition.on_follower_fetch(2, info.last_offset + 1, now=1)
        await waiting
        assert partition.high_watermark == 1
        info = await partition.append_as_leader(idempotent(1, 1), acks_all=True)
        waiting = asyncio.create_task(partition.wait_for_replication(info.last_offset + 1, timeout=30))
        await until(lambda: bool(partition._waiters))
        await partition.make_follower(leader=2, leader_epoch=2)
        with pytest.raises(KafkaError) as caught:
            await waiting
        assert caught.value.code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    asyncio.run(run())


def test_long_polls_wake_for_their_own_partition_only(tmp_path: Path) -> None:
    async def run() -> None:
        logs = [Log.open(tmp_path / f"t-{i}", LogConfig()) for i in range(2)]
        try:
            a, b = (Partition("t", i, logs[i], node_id=1) for i in range(2))
            for p in (a, b):
                await p.make_leader(state(1, 1, isr=(1,)), now=0)
            woken_a, woken_b, woken_replica = asyncio.Event(), asyncio.Event(), asyncio.Event()
            stop = [a.watch(woken_a, replica=False), b.watch(woken_b, replica=False),
                    b.watch(woken_replica, replica=True)]
            await b.append_as_leader(idempotent(0, 1), acks_all=False)
            assert woken_b.is_set() and woken_replica.is_set() and not woken_a.is_set()
            for done in stop:
                done()
            woken_b.clear()
            await b.append_as_leader(idempotent(1, 1), acks_all=False)
            assert not woken_b.is_set()  # no longer watching
        finally:
            for opened in logs:
                opened.close()
    asyncio.run(run())


def test_a_client_epoch_is_checked_against_the_leaders(log: Log) -> None:
    async def run() -> None:
        partition = Partition("t", 0, log, node_id=1)
        await partition.make_leader(state(1, 5, isr=(1,)), now=0)
        partition.require_leader(5)
        for epoch, code in ((4, ErrorCode.FENCED_LEADER_EPOCH), (6, ErrorCode.UNKNOWN_LEADER_EPOCH)):
            with pytest.raises(KafkaError) as caught:
                partition.require_leader(epoch)
            assert caught.value.code == code
        with pytest.raises(KafkaError) as caught:
            partition.require_leader(5, lease_ok=False)
        assert caught.value.code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    asyncio.run(run())
