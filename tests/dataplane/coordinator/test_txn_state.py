"""The transaction coordinator's rules as tables: every move of one transactional id and every refusal."""

from __future__ import annotations

from dataclasses import replace

import pytest

from dataplane.coordinator.txn_records import decode_key, decode_value, encode_key, encode_value
from dataplane.coordinator.txn_state import (
    MAX_EPOCH,
    Markers,
    TxnMetadata,
    TxnState,
    add_partitions,
    completed,
    end_txn,
    expired,
    init_producer_id,
    timed_out,
    verify_partitions,
)
from dataplane.protocol.errors import ErrorCode

T0 = frozenset({("t", 0)})
T01 = frozenset({("t", 0), ("t", 1)})


def txn(state: TxnState = TxnState.EMPTY, epoch: int = 3, partitions: frozenset[tuple[str, int]] = frozenset(),
        start: int = -1, **extra: object) -> TxnMetadata:
    return replace(TxnMetadata("tx", 7, epoch, 60_000, state, partitions, start, 100), **extra)  # type: ignore[arg-type]


def init(current: TxnMetadata | None, *, pid: int = -1, epoch: int = -1, timeout: int = 60_000):  # type: ignore[no-untyped-def]
    return init_producer_id(current, transactional_id="tx", timeout_ms=timeout, max_timeout_ms=900_000,
                            producer_id=pid, producer_epoch=epoch, now_ms=1000, fresh_producer_id=99)


@pytest.mark.parametrize(("current", "kwargs", "error", "pid", "epoch", "state"), [
    (None, {}, ErrorCode.NONE, 99, 0, TxnState.EMPTY),  # a new id: a fresh producer id at epoch 0
    (txn(), {}, ErrorCode.NONE, 7, 4, TxnState.EMPTY),  # a new instance: the epoch bumps
    (txn(TxnState.COMPLETE_COMMIT, partitions=frozenset()), {}, ErrorCode.NONE, 7, 4, TxnState.EMPTY),
    (txn(TxnState.COMPLETE_ABORT), {}, ErrorCode.NONE, 7, 4, TxnState.EMPTY),
    (txn(epoch=MAX_EPOCH - 1), {}, ErrorCode.NONE, 99, 0, TxnState.EMPTY),  # epoch exhausted: a new producer id
    # an open transaction is aborted first, with the epoch bumped (the zombie is fenced); the client retries
    (txn(TxnState.ONGOING, partitions=T0, start=10), {}, ErrorCode.CONCURRENT_TRANSACTIONS, 7, 4,
     TxnState.PREPARE_ABORT),
    (txn(TxnState.PREPARE_COMMIT, partitions=T0), {}, ErrorCode.CONCURRENT_TRANSACTIONS, None, None, None),
    (txn(TxnState.PREPARE_ABORT, partitions=T0), {}, ErrorCode.CONCURRENT_TRANSACTIONS, None, None, None),
    (txn(), {"timeout": 0}, ErrorCode.INVALID_TRANSACTION_TIMEOUT, None, None, None),
    (txn(), {"timeout": 900_001}, ErrorCode.INVALID_TRANSACTION_TIMEOUT, None, None, None),
    # KIP-360: the producer says who it was
    (txn(), {"pid": 7, "epoch": 3}, ErrorCode.NONE, 7, 4, TxnState.EMPTY),
    (txn(last_epoch=2), {"pid": 7, "epoch": 2}, ErrorCode.NONE, 7, 3, TxnState.EMPTY),  # a retried bump
    (txn(), {"pid": 8, "epoch": 3}, ErrorCode.INVALID_PRODUCER_ID_MAPPING, None, None, None),
    (txn(), {"pid": 7, "epoch": 1}, ErrorCode.PRODUCER_FENCED, None, None, None),
])
def test_init_producer_id(current: TxnMetadata | None, kwargs: dict[str, int], error: ErrorCode, pid: int | None,
                          epoch: int | None, state: TxnState | None) -> None:
    outcome = init(current, **kwargs)
    assert outcome.error == error
    if pid is None:
        assert outcome.write is None
    else:
        assert outcome.write is not None
        assert (outcome.write.producer_id, outcome.write.producer_epoch, outcome.write.state) == (pid, epoch, state)


def test_a_fence_writes_abort_markers_with_the_bumped_epoch() -> None:
    outcome = init(txn(TxnState.ONGOING, partitions=T01, start=10))
    assert outcome.markers == Markers(7, 4, False, T01)


@pytest.mark.parametrize(("current", "pid", "epoch", "error", "state", "partitions", "start"), [
    (txn(), 7, 3, ErrorCode.NONE, TxnState.ONGOING, T0, 1000),
    (txn(TxnState.COMPLETE_COMMIT), 7, 3, ErrorCode.NONE, TxnState.ONGOING, T0, 1000),
    (txn(TxnState.ONGOING, partitions=frozenset({("t", 1)}), start=50), 7, 3, ErrorCode.NONE, TxnState.ONGOING,
     T01, 50),
    (txn(TxnState.ONGOING, partitions=T01, start=50), 7, 3, ErrorCode.NONE, None, None, None),  # nothing new
    (txn(TxnState.PREPARE_COMMIT, partitions=T0), 7, 3, ErrorCode.CONCURRENT_TRANSACTIONS, None, None, None),
    (txn(), 7, 2, ErrorCode.PRODUCER_FENCED, None, None, None),
    (txn(), 8, 3, ErrorCode.INVALID_PRODUCER_ID_MAPPING, None, None, None),
    (None, 7, 3, ErrorCode.INVALID_PRODUCER_ID_MAPPING, None, None, None),
])
def test_add_partitions(current: TxnMetadata | None, pid: int, epoch: int, error: ErrorCode, state: TxnState | None,
                        partitions: frozenset[tuple[str, int]] | None, start: int | None) -> None:
    outcome = add_partitions(current, producer_id=pid, producer_epoch=epoch, partitions=T0, now_ms=1000)
    assert outcome.error == error
    if state is None:
        assert outcome.write is None
    else:
        assert outcome.write is not None
        assert (outcome.write.state, outcome.write.partitions, outcome.write.start_ms) == (state, partitions, start)


@pytest.mark.parametrize(("current", "pid", "epoch", "expected"), [
    (txn(TxnState.ONGOING, partitions=T0, start=1), 7, 3, {("t", 0): ErrorCode.NONE,
                                                          ("t", 1): ErrorCode.INVALID_TXN_STATE}),
    (txn(TxnState.COMPLETE_COMMIT), 7, 3, {("t", 0): ErrorCode.INVALID_TXN_STATE,
                                          ("t", 1): ErrorCode.INVALID_TXN_STATE}),
    (txn(TxnState.ONGOING, partitions=T0, start=1), 7, 2, {("t", 0): ErrorCode.PRODUCER_FENCED,
                                                          ("t", 1): ErrorCode.PRODUCER_FENCED}),
])
def test_verify_only_never_adds(current: TxnMetadata, pid: int, epoch: int,
                                expected: dict[tuple[str, int], ErrorCode]) -> None:
    assert verify_partitions(current, producer_id=pid, producer_epoch=epoch, partitions=sorted(T01)) == expected


ONGOING = txn(TxnState.ONGOING, partitions=T0, start=10)


@pytest.mark.parametrize(("current", "commit", "bump", "epoch", "error", "state", "markers"), [
    (ONGOING, True, False, 3, ErrorCode.NONE, TxnState.PREPARE_COMMIT, Markers(7, 3, True, T0)),
    (ONGOING, False, False, 3, ErrorCode.NONE, TxnState.PREPARE_ABORT, Markers(7, 3, False, T0)),
    # transaction version 2: the end bumps the epoch and the markers carry the new one (KIP-890 part 2)
    (ONGOING, True, True, 3, ErrorCode.NONE, TxnState.PREPARE_COMMIT, Markers(7, 4, True, T0)),
    (txn(TxnState.COMPLETE_COMMIT), True, False, 3, ErrorCode.NONE, None, None),  # a retry
    (txn(TxnState.COMPLETE_COMMIT), False, False, 3, ErrorCode.INVALID_TXN_STATE, None, None),
    (txn(TxnState.COMPLETE_ABORT, epoch=4), False, True, 3, ErrorCode.NONE, None, None),  # a TV2 retry
    (txn(TxnState.PREPARE_COMMIT, partitions=T0), True, False, 3, ErrorCode.CONCURRENT_TRANSACTIONS, None, None),
    (txn(TxnState.PREPARE_COMMIT, partitions=T0), False, False, 3, ErrorCode.INVALID_TXN_STATE, None, None),
    (txn(), True, False, 3, ErrorCode.INVALID_TXN_STATE, None, None),
    (txn(), False, True, 3, ErrorCode.NONE, None, None),  # TV2: aborting nothing is a no-op
    (ONGOING, True, False, 2, ErrorCode.PRODUCER_FENCED, None, None),
    (None, True, False, 3, ErrorCode.INVALID_PRODUCER_ID_MAPPING, None, None),
])
def test_end_txn(current: TxnMetadata | None, commit: bool, bump: bool, epoch: int, error: ErrorCode,
                 state: TxnState | None, markers: Markers | None) -> None:
    outcome = end_txn(current, producer_id=7, producer_epoch=epoch, commit=commit, now_ms=1000, bump=bump,
                      fresh_producer_id=99)
    assert outcome.error == error
    assert (outcome.write.state if outcome.write else None) == state
    assert outcome.markers == markers


def test_completion_and_timeouts() -> None:
    prepared = end_txn(ONGOING, producer_id=7, producer_epoch=3, commit=True, now_ms=1000, bump=False,
                       fresh_producer_id=None).write
    assert prepared is not None
    done = completed(prepared, 2000)
    assert (done.state, done.partitions) == (TxnState.COMPLETE_COMMIT, frozenset())
    assert timed_out(ONGOING, 10 + 60_000, None) is None  # at the limit, not past it
    aborted = timed_out(ONGOING, 10 + 60_001, None)
    assert aborted is not None and aborted.write is not None
    assert (aborted.write.state, aborted.write.producer_epoch) == (TxnState.PREPARE_ABORT, 4)
    assert aborted.markers == Markers(7, 4, False, T0)
    assert timed_out(txn(TxnState.PREPARE_COMMIT, partitions=T0, start=0), 10**9, None) is None


@pytest.mark.parametrize(("state", "idle_ms", "gone"), [
    (TxnState.EMPTY, 1000, True),  # idle exactly the expiration: forgotten
    (TxnState.EMPTY, 999, False),
    (TxnState.COMPLETE_COMMIT, 5000, True),
    (TxnState.COMPLETE_ABORT, 5000, True),
    (TxnState.ONGOING, 10**9, False),  # an open transaction is never forgotten (it times out instead)
    (TxnState.PREPARE_COMMIT, 10**9, False),  # nor one whose markers are still being written
    (TxnState.PREPARE_ABORT, 10**9, False),
])
def test_transactional_id_expiration(state: TxnState, idle_ms: int, gone: bool) -> None:
    assert expired(txn(state), 100 + idle_ms, expiration_ms=1000) is gone  # txn() was last updated at 100


@pytest.mark.parametrize("metadata", [
    txn(), txn(TxnState.ONGOING, partitions=T01, start=10),
    TxnMetadata("ünïcode-id", 2**40, 0, 1, TxnState.PREPARE_ABORT, frozenset({("a", 3), ("b", 0)}), 5, 6),
])
def test_records_round_trip(metadata: TxnMetadata) -> None:
    assert decode_key(encode_key(metadata.transactional_id)) == metadata.transactional_id
    assert decode_value(metadata.transactional_id, encode_value(metadata)) == metadata


def test_a_value_in_kafkas_v0_layout() -> None:
    """TransactionLogValue v0: version, producer id, epoch, timeout, status, partitions (null: none), times."""
    empty = encode_value(txn())
    assert empty == bytes.fromhex("0000" "0000000000000007" "0003" "0000ea60" "00" "ffffffff"
                                  "0000000000000064" "ffffffffffffffff")
    assert encode_key("tx") == bytes.fromhex("0000" "0002") + b"tx"
