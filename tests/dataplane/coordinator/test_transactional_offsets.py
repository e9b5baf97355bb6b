"""Transactional offset commits (KIP-98/KIP-447) in the group coordinator, over a real log on disk.

The host appends to a real ``Log`` as the broker's leader would; markers are the
control batches the transaction coordinator's WriteTxnMarkers would append. A
"reload" is a fresh coordinator replaying the same log, as after a failover.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import pytest

from dataplane.coordinator.manager import (
    CommitRequest,
    CoordinatorError,
    CoordinatorSettings,
    FetchedOffset,
    GroupCoordinator,
    TxnCommitRequest,
)
from dataplane.coordinator.markers import build_end_txn_marker
from dataplane.coordinator.records import (
    GroupKey,
    GroupValue,
    MemberValue,
    OffsetValue,
    encode_group_value,
    encode_key,
)
from dataplane.protocol.errors import ErrorCode
from dataplane.protocol.records import Record, build_batch
from dataplane.storage import Log
from tests.dataplane.conftest import Clock

T = TypeVar("T")
OpenLog = Callable[..., Log]
TP = ("orders", 0)
TP2 = ("orders", 1)


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


class LogHost:
    """One-partition ``__consumer_offsets`` whose leader is this process: appends go straight to the log."""

    def __init__(self, log: Log) -> None:
        self.log = log

    def offsets_partition_count(self) -> int | None:
        return 1

    def leads_offsets_partition(self, partition: int) -> bool:
        return partition == 0

    def offsets_log(self, partition: int) -> Log:
        return self.log

    async def append_offsets(self, partition: int, batch: bytes) -> None:
        self.log.append_as_leader(batch, leader_epoch=0)


class Harness:
    def __init__(self, log: Log, clock: Clock) -> None:
        self.log, self.clock = log, clock
        self.coordinator = self.fresh()

    def fresh(self) -> GroupCoordinator:
        return GroupCoordinator(CoordinatorSettings(offsets_topic_partitions=1), LogHost(self.log), clock=self.clock)

    async def txn(self, producer_id: int, offsets: dict[tuple[str, int], int], *, group: str = "g", epoch: int = 0,
                  generation: int = -1, member_id: str = "", instance: str | None = None) -> dict[Any, ErrorCode]:
        return await self.coordinator.txn_commit(TxnCommitRequest(
            group, producer_id, epoch, generation, member_id, instance,
            {tp: (offset, -1, None) for tp, offset in offsets.items()}))

    async def commit(self, offsets: dict[tuple[str, int], int], group: str = "g") -> None:
        errors = await self.coordinator.commit(CommitRequest(group, -1, "", None,
                                                             {tp: (o, -1, None) for tp, o in offsets.items()}))
        assert set(errors.values()) == {ErrorCode.NONE}

    async def end(self, producer_id: int, commit: bool, *, epoch: int = 0) -> None:
        """What WriteTxnMarkers does: the marker into the partition, then the coordinator is told."""
        self.log.append_as_leader(build_end_txn_marker(producer_id, epoch, commit=commit,
                                                       timestamp=self.clock.now), leader_epoch=0, control=True)
        await self.coordinator.complete_transaction(0, producer_id, commit)

    async def seen(self, *tps: tuple[str, int], group: str = "g",
                   coordinator: GroupCoordinator | None = None) -> dict[tuple[str, int], int | str | None]:
        """Per partition: the offset OffsetFetch v7+ with require_stable answers, its error's name, or None."""
        found = await (coordinator or self.coordinator).fetch_committed(group, list(tps), require_stable=True)
        return {tp: _shown(f) for tp, f in found.items()}

    async def plain(self, *tps: tuple[str, int], group: str = "g") -> dict[tuple[str, int], int | None]:
        """What OffsetFetch without require_stable answers."""
        found = await self.coordinator.fetch_offsets(group, list(tps))
        return {tp: None if v is None else v.offset for tp, v in found.items()}

    async def reloaded(self, *tps: tuple[str, int], group: str = "g") -> dict[tuple[str, int], int | str | None]:
        return await self.seen(*tps, group=group, coordinator=self.fresh())


def _shown(fetched: FetchedOffset) -> int | str | None:
    if fetched.error is not ErrorCode.NONE:
        return fetched.error.name
    return None if fetched.value is None else fetched.value.offset


@pytest.fixture
def h(open_log: OpenLog, clock: Clock) -> Harness:
    return Harness(open_log(name="__consumer_offsets-0"), clock)


def test_pending_offsets_are_invisible_until_the_commit_marker(h: Harness) -> None:
    async def scenario() -> None:
        await h.commit({TP: 5})
        assert await h.txn(1, {TP: 10, TP2: 20}) == {TP: ErrorCode.NONE, TP2: ErrorCode.NONE}
        assert await h.plain(TP, TP2) == {TP: 5, TP2: None}
        assert await h.seen(TP, TP2) == {TP: "UNSTABLE_OFFSET_COMMIT", TP2: "UNSTABLE_OFFSET_COMMIT"}
        await h.end(1, commit=True)
        assert await h.plain(TP, TP2) == {TP: 10, TP2: 20}
        assert await h.seen(TP, TP2) == {TP: 10, TP2: 20}
    run(scenario())


def test_the_offsets_are_one_transactional_batch_of_the_producer(h: Harness) -> None:
    run(h.txn(42, {TP: 10, TP2: 20}, epoch=7))
    [batch] = h.log.read_batches(0)
    header = batch.header
    assert (header.is_transactional, header.is_control, header.producer_id, header.producer_epoch,
            header.base_sequence, header.record_count) == (True, False, 42, 7, -1, 2)


def test_an_abort_drops_the_pending_offsets(h: Harness) -> None:
    async def scenario() -> None:
        await h.commit({TP: 5})
        await h.txn(1, {TP: 10, TP2: 20})
        await h.end(1, commit=False)
        assert await h.seen(TP, TP2) == {TP: 5, TP2: None}
    run(scenario())


def test_all_committed_partitions_with_require_stable(h: Harness) -> None:
    """Fetching every partition lists the committed ones; a pending-only partition is not listed (Kafka)."""
    async def scenario() -> None:
        await h.commit({TP: 5})
        await h.txn(1, {TP: 10, TP2: 20})
        found = await h.coordinator.fetch_committed("g", None, require_stable=True)
        assert {tp: _shown(f) for tp, f in found.items()} == {TP: "UNSTABLE_OFFSET_COMMIT"}
        assert {tp: v and v.offset for tp, v in (await h.coordinator.fetch_offsets("g", None)).items()} == {TP: 5}
    run(scenario())


def test_interleaved_producers_each_end_their_own_transaction(h: Harness) -> None:
    async def scenario() -> None:
        await h.txn(1, {TP: 10, TP2: 11})
        await h.txn(2, {TP: 20})
        await h.txn(1, {TP2: 12})  # the same transaction again: the last offset per partition counts
        await h.end(2, commit=True)
        assert await h.seen(TP, TP2) == {TP: "UNSTABLE_OFFSET_COMMIT", TP2: "UNSTABLE_OFFSET_COMMIT"}
        assert await h.plain(TP, TP2) == {TP: 20, TP2: None}
        # Producer 1 wrote TP before producer 2 did: producer 2's later record stays the committed one.
        await h.end(1, commit=True)
        assert await h.seen(TP, TP2) == {TP: 20, TP2: 12}
        assert await h.reloaded(TP, TP2) == {TP: 20, TP2: 12}
    run(scenario())


@pytest.mark.parametrize("plain_first, expected", [(True, 10), (False, 7)])
def test_a_plain_commit_and_a_pending_one_the_later_record_wins(h: Harness, plain_first: bool,
                                                                expected: int) -> None:
    async def scenario() -> None:
        if plain_first:
            await h.commit({TP: 7})
            await h.txn(1, {TP: 10})
        else:
            await h.txn(1, {TP: 10})
            await h.commit({TP: 7})  # written after the transactional offset, before its marker
        assert await h.plain(TP) == {TP: 7}
        assert await h.seen(TP) == {TP: "UNSTABLE_OFFSET_COMMIT"}
        await h.end(1, commit=True)
        assert await h.seen(TP) == {TP: expected}
        assert await h.reloaded(TP) == {TP: expected}
    run(scenario())


@pytest.mark.parametrize("steps, expected", [
    # (producer, offsets) writes a transactional commit, ("commit"/"abort", producer) a marker,
    # ("plain", offsets) a plain commit.
    ([(1, {TP: 10}), ("commit", 1)], {TP: 10, TP2: None}),
    ([(1, {TP: 10}), ("abort", 1)], {TP: None, TP2: None}),
    ([(1, {TP: 10})], {TP: "UNSTABLE_OFFSET_COMMIT", TP2: None}),
    ([("plain", {TP: 3}), (1, {TP: 10, TP2: 4})], {TP: "UNSTABLE_OFFSET_COMMIT", TP2: "UNSTABLE_OFFSET_COMMIT"}),
    ([("plain", {TP: 3}), (1, {TP: 10}), ("abort", 1), (2, {TP2: 8}), ("commit", 2)], {TP: 3, TP2: 8}),
    ([(1, {TP: 10}), (2, {TP: 11}), ("abort", 2), ("commit", 1), (1, {TP2: 9})],
     {TP: 10, TP2: "UNSTABLE_OFFSET_COMMIT"}),
    ([(1, {TP: 10}), ("plain", {TP: 2}), ("commit", 1)], {TP: 2, TP2: None}),
], ids=["committed", "aborted", "open", "open-over-plain", "abort-then-commit", "mixed", "plain-after-txn"])
def test_reload_honours_the_transactions_in_the_log(h: Harness, steps: list[tuple[Any, Any]],
                                                   expected: dict[tuple[str, int], int | str | None]) -> None:
    async def scenario() -> None:
        for what, arg in steps:
            if what == "plain":
                await h.commit(arg)
            elif what in ("commit", "abort"):
                await h.end(arg, commit=what == "commit")
            else:
                assert set((await h.txn(what, arg)).values()) == {ErrorCode.NONE}
        assert await h.seen(TP, TP2) == expected
        assert await h.reloaded(TP, TP2) == expected
    run(scenario())


def test_a_transaction_open_at_reload_completes_on_the_new_coordinator(h: Harness) -> None:
    async def scenario() -> None:
        await h.txn(1, {TP: 10})
        h.coordinator = h.fresh()  # failover: the new leader replays the open transaction
        assert await h.seen(TP) == {TP: "UNSTABLE_OFFSET_COMMIT"}
        await h.end(1, commit=True)
        assert await h.seen(TP) == {TP: 10}
        await h.txn(1, {TP: 11})  # the producer's next transaction: its batch is not taken for a duplicate
        await h.end(1, commit=True)
        assert await h.seen(TP) == {TP: 11}
        assert await h.reloaded(TP) == {TP: 11}
    run(scenario())


def _stable_group(h: Harness) -> None:
    """A group with generation 3, member m1 (static instance i1) and m2, written as Kafka would."""
    members = tuple(MemberValue(m, i, "client", "/127.0.0.1", 60_000, 30_000, b"", b"")
                    for m, i in (("m1", "i1"), ("m2", None)))
    value = GroupValue("consumer", 3, "range", "m1", h.clock.now, members)
    h.log.append_as_leader(build_batch([Record(0, h.clock.now, encode_key(GroupKey("g")),
                                               encode_group_value(value))]), leader_epoch=0)


@pytest.mark.parametrize("generation, member_id, instance, error", [
    (3, "m1", "i1", ErrorCode.NONE),
    (3, "m2", None, ErrorCode.NONE),
    (-1, "", None, ErrorCode.NONE),  # before v3: no member to check
    (2, "m1", "i1", ErrorCode.ILLEGAL_GENERATION),
    (-1, "m2", None, ErrorCode.NONE),  # a member without a generation is not checked against one
    (3, "gone", None, ErrorCode.UNKNOWN_MEMBER_ID),
    (3, "m2", "i1", ErrorCode.FENCED_INSTANCE_ID),
    (3, "m1", "unknown-instance", ErrorCode.NONE),
])
def test_kip_447_member_checks(h: Harness, generation: int, member_id: str, instance: str | None,
                               error: ErrorCode) -> None:
    _stable_group(h)

    async def scenario() -> None:
        result = await h.txn(1, {TP: 10}, generation=generation, member_id=member_id, instance=instance)
        assert result == {TP: error}
        assert await h.seen(TP) == {TP: "UNSTABLE_OFFSET_COMMIT" if error is ErrorCode.NONE else None}
    run(scenario())


def test_a_refused_commit_to_an_unknown_group_leaves_no_group(h: Harness) -> None:
    async def scenario() -> None:
        assert await h.txn(1, {TP: 10}, group="new", generation=1, member_id="m") == {
            TP: ErrorCode.UNKNOWN_MEMBER_ID}
        assert await h.coordinator.describe("new") is None
        assert await h.txn(1, {TP: 10}, group="new") == {TP: ErrorCode.NONE}  # created, as Kafka does
        assert await h.coordinator.describe("new") is not None
    run(scenario())


def test_a_fenced_producer_epoch_is_refused_by_the_log(h: Harness) -> None:
    async def scenario() -> None:
        await h.txn(1, {TP: 10}, epoch=5)
        await h.end(1, commit=False, epoch=5)
        with pytest.raises(CoordinatorError) as refused:
            await h.txn(1, {TP: 11}, epoch=4)
        assert refused.value.code is ErrorCode.INVALID_PRODUCER_EPOCH
        assert await h.seen(TP) == {TP: None}
    run(scenario())


def test_deleting_a_group_drops_its_pending_offsets_for_good(h: Harness) -> None:
    async def scenario() -> None:
        await h.commit({TP: 5})
        await h.txn(1, {TP: 10, TP2: 20})
        assert await h.coordinator.delete_group("g") is ErrorCode.NONE  # Empty: Kafka deletes it
        await h.end(1, commit=True)  # the marker arrives after the tombstones
        assert await h.seen(TP, TP2) == {TP: None, TP2: None}
        assert await h.reloaded(TP, TP2) == {TP: None, TP2: None}
    run(scenario())


def test_delete_offsets_drops_the_partitions_pending_offsets(h: Harness) -> None:
    async def scenario() -> None:
        await h.commit({TP: 5})
        await h.txn(1, {TP: 10, TP2: 20})
        assert await h.coordinator.delete_offsets("g", [TP]) == {TP: ErrorCode.NONE}
        assert await h.seen(TP, TP2) == {TP: None, TP2: "UNSTABLE_OFFSET_COMMIT"}
        await h.end(1, commit=True)
        assert await h.seen(TP, TP2) == {TP: None, TP2: 20}
        assert await h.reloaded(TP, TP2) == {TP: None, TP2: 20}
    run(scenario())


def test_expiry_waits_for_an_open_transaction(h: Harness) -> None:
    retention = CoordinatorSettings().offsets_retention_ms

    async def scenario() -> None:
        await h.commit({TP: 5, TP2: 6})
        await h.txn(1, {TP: 10})
        h.clock.advance(retention + 1)
        assert await h.coordinator.expire_offsets() == 1  # TP2 only: TP has a pending offset
        assert await h.seen(TP, TP2) == {TP: "UNSTABLE_OFFSET_COMMIT", TP2: None}
        await h.end(1, commit=True)
        assert await h.seen(TP) == {TP: 10}
        # Its commit time is the TxnOffsetCommit's, as in Kafka: already past retention once committed.
        assert await h.coordinator.expire_offsets() == 1
        assert await h.seen(TP) == {TP: None}
    run(scenario())


def test_a_group_with_only_pending_offsets_is_not_expired(h: Harness) -> None:
    async def scenario() -> None:
        await h.txn(1, {TP: 10})
        h.clock.advance(CoordinatorSettings().offsets_retention_ms + 1)
        await h.coordinator.expire_offsets()
        assert await h.coordinator.describe("g") is not None
        await h.end(1, commit=True)
        assert await h.seen(TP) == {TP: 10}
    run(scenario())


def test_a_marker_for_a_partition_not_loaded_here_is_left_to_the_replay(h: Harness) -> None:
    async def scenario() -> None:
        await h.txn(1, {TP: 10})
        h.coordinator.unload(0)
        await h.end(1, commit=True)  # nothing loaded: nothing to do, the marker is in the log
        assert await h.seen(TP) == {TP: 10}
    run(scenario())


def test_the_committed_value_keeps_its_metadata_and_epoch(h: Harness) -> None:
    async def scenario() -> None:
        await h.coordinator.txn_commit(TxnCommitRequest("g", 1, 0, -1, "", None, {TP: (10, 4, "meta")}))
        await h.end(1, commit=True)
        for coordinator in (h.coordinator, h.fresh()):
            found = (await coordinator.fetch_offsets("g", [TP]))[TP]
            assert found == OffsetValue(10, 4, "meta", h.clock.now)
    run(scenario())
