"""The transaction coordinator's rules for one transactional id, sans-IO (Kafka's ``TransactionCoordinator`` and
``TransactionMetadata``): each request is a pure function of the id's current metadata that answers with an error,
or with the metadata to persist to ``__transaction_state`` before answering and the markers to write after.

States and moves (KIP-98): Empty → Ongoing (AddPartitions/AddOffsets) → PrepareCommit | PrepareAbort (EndTxn, or
the transaction timing out, or a new producer instance fencing the old one) → CompleteCommit | CompleteAbort once
every partition has its marker → Ongoing (the next transaction) or Empty (InitProducerId). Epochs: every
InitProducerId bumps the epoch (a zombie with the old one is fenced); a timeout or a fence bumps it as it aborts
(so the old producer's next request fails); with transaction version 2 (EndTxn v5+, KIP-890 part 2) every end
bumps it and the markers carry the new one, so a late write of an earlier transaction can never join the next.
An epoch that would overflow moves the id to a new producer id.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass, replace

from dataplane.protocol.errors import ErrorCode

MAX_EPOCH = 32767  # Short.MAX_VALUE: an id at it moves to a new producer id


class TxnState(enum.IntEnum):
    """Kafka's ``TransactionState`` ids, as written to ``__transaction_state``."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        return _NAMES[self]


_NAMES = {TxnState.EMPTY: "Empty", TxnState.ONGOING: "Ongoing", TxnState.PREPARE_COMMIT: "PrepareCommit",
          TxnState.PREPARE_ABORT: "PrepareAbort", TxnState.COMPLETE_COMMIT: "CompleteCommit",
          TxnState.COMPLETE_ABORT: "CompleteAbort", TxnState.DEAD: "Dead",
          TxnState.PREPARE_EPOCH_FENCE: "PrepareEpochFence"}
PREPARING = (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT, TxnState.PREPARE_EPOCH_FENCE)
COMPLETE = (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)

TopicPartition = tuple[str, int]


@dataclass(frozen=True, slots=True)
class TxnMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: frozenset[TopicPartition]
    start_ms: int  # when the open transaction began; -1 when none is open
    update_ms: int
    last_epoch: int = -1  # the epoch before the last InitProducerId bump (KIP-360 retries); not persisted

    @property
    def commit(self) -> bool:
        return self.state in (TxnState.PREPARE_COMMIT, TxnState.COMPLETE_COMMIT)


@dataclass(frozen=True, slots=True)
class Markers:
    """Write these markers, then persist ``completed`` (Prepare* → Complete*)."""

    producer_id: int
    producer_epoch: int
    commit: bool
    partitions: frozenset[TopicPartition]


@dataclass(frozen=True, slots=True)
class Outcome:
    """A request's answer: ``error``, or persist ``write`` (None: nothing changes) then send ``markers``."""

    error: ErrorCode = ErrorCode.NONE
    write: TxnMetadata | None = None
    markers: Markers | None = None


def _fail(code: ErrorCode) -> Outcome:
    return Outcome(error=code)


def _bumped(txn: TxnMetadata, fresh_producer_id: int | None) -> tuple[int, int]:
    """(producer id, epoch) after a bump: a new id at epoch 0 when the epoch would overflow."""
    if txn.producer_epoch + 1 >= MAX_EPOCH:
        if fresh_producer_id is None:
            raise ValueError("the epoch overflows: a fresh producer id is needed")
        return fresh_producer_id, 0
    return txn.producer_id, txn.producer_epoch + 1


def needs_fresh_id(txn: TxnMetadata | None) -> bool:
    """Whether the next epoch bump of ``txn`` (or its creation) needs a new producer id."""
    return txn is None or txn.producer_epoch + 2 >= MAX_EPOCH


def _aborting(txn: TxnMetadata, now_ms: int, fresh_producer_id: int | None) -> Outcome:
    """Abort the open transaction with a bumped epoch (a fence or a timeout): the old epoch is fenced."""
    producer_id, epoch = _bumped(txn, fresh_producer_id)
    write = replace(txn, producer_id=producer_id, producer_epoch=epoch, state=TxnState.PREPARE_ABORT,
                    update_ms=now_ms, last_epoch=-1)
    return Outcome(write=write, markers=Markers(producer_id, epoch, False, txn.partitions))


def init_producer_id(txn: TxnMetadata | None, *, transactional_id: str, timeout_ms: int, max_timeout_ms: int,
                     producer_id: int, producer_epoch: int, now_ms: int,
                     fresh_producer_id: int | None) -> Outcome:
    """InitProducerId with a transactional id (KIP-98, KIP-360 when ``producer_id`` is given).

    An open transaction is aborted first (the answer is CONCURRENT_TRANSACTIONS until that is done; the client
    retries); otherwise the epoch is bumped and the id starts Empty.
    """
    if timeout_ms <= 0 or timeout_ms > max_timeout_ms:
        return _fail(ErrorCode.INVALID_TRANSACTION_TIMEOUT)
    if txn is None:
        if fresh_producer_id is None:
            raise ValueError("a new transactional id needs a fresh producer id")
        return Outcome(write=TxnMetadata(transactional_id, fresh_producer_id, 0, timeout_ms, TxnState.EMPTY,
                                         frozenset(), -1, now_ms))
    if producer_id >= 0:  # KIP-360: the client says which producer it was
        if producer_id != txn.producer_id:
            return _fail(ErrorCode.INVALID_PRODUCER_ID_MAPPING)
        if producer_epoch == txn.last_epoch and txn.state in (TxnState.EMPTY, *COMPLETE):
            return Outcome(write=txn)  # a retry of the bump that already happened
        if producer_epoch != txn.producer_epoch:
            return _fail(ErrorCode.PRODUCER_FENCED)
    if txn.state in PREPARING:
        return _fail(ErrorCode.CONCURRENT_TRANSACTIONS)
    if txn.state == TxnState.ONGOING:
        fenced = _aborting(txn, now_ms, fresh_producer_id)
        return Outcome(error=ErrorCode.CONCURRENT_TRANSACTIONS, write=fenced.write, markers=fenced.markers)
    new_id, epoch = _bumped(txn, fresh_producer_id)
    return Outcome(write=replace(txn, producer_id=new_id, producer_epoch=epoch, timeout_ms=timeout_ms,
                                 state=TxnState.EMPTY, partitions=frozenset(), start_ms=-1, update_ms=now_ms,
                                 last_epoch=txn.producer_epoch if new_id == txn.producer_id else -1))


def _check_producer(txn: TxnMetadata | None, producer_id: int, producer_epoch: int) -> ErrorCode:
    if txn is None or txn.producer_id != producer_id:
        return ErrorCode.INVALID_PRODUCER_ID_MAPPING
    if txn.producer_epoch != producer_epoch:
        return ErrorCode.PRODUCER_FENCED
    return ErrorCode.NONE


def add_partitions(txn: TxnMetadata | None, *, producer_id: int, producer_epoch: int,
                   partitions: Iterable[TopicPartition], now_ms: int) -> Outcome:
    """AddPartitionsToTxn / AddOffsetsToTxn: the partitions join the open transaction (which opens if none is)."""
    error = _check_producer(txn, producer_id, producer_epoch)
    if error != ErrorCode.NONE or txn is None:
        return _fail(error)
    if txn.state in PREPARING:
        return _fail(ErrorCode.CONCURRENT_TRANSACTIONS)
    wanted = frozenset(partitions)
    if txn.state == TxnState.ONGOING and wanted <= txn.partitions:
        return Outcome(write=None)
    start = txn.start_ms if txn.state == TxnState.ONGOING else now_ms
    return Outcome(write=replace(txn, state=TxnState.ONGOING, partitions=txn.partitions | wanted, start_ms=start,
                                 update_ms=now_ms))


def verify_partitions(txn: TxnMetadata | None, *, producer_id: int, producer_epoch: int,
                      partitions: Iterable[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
    """AddPartitionsToTxn v4+ verify-only (KIP-890 part 1): is each partition in the open transaction?"""
    error = _check_producer(txn, producer_id, producer_epoch)
    if error != ErrorCode.NONE or txn is None:
        return dict.fromkeys(partitions, error)
    return {tp: ErrorCode.NONE if txn.state == TxnState.ONGOING and tp in txn.partitions
            else ErrorCode.INVALID_TXN_STATE for tp in partitions}


def end_txn(txn: TxnMetadata | None, *, producer_id: int, producer_epoch: int, commit: bool, now_ms: int,
            bump: bool, fresh_producer_id: int | None) -> Outcome:
    """EndTxn: Ongoing → PrepareCommit/PrepareAbort (persisted before the answer), markers after.

    ``bump`` (transaction version 2, EndTxn v5+): the epoch moves on at the end and the markers carry the new one;
    a retry of an end already done (the request's epoch one behind) answers it again.
    """
    if txn is not None and txn.producer_id == producer_id and bump and producer_epoch == txn.producer_epoch - 1 \
            and txn.state in (*COMPLETE, TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT) and txn.commit == commit:
        return Outcome(write=None)  # a retry: the answer is the id's current producer id and epoch
    error = _check_producer(txn, producer_id, producer_epoch)
    if error != ErrorCode.NONE or txn is None:
        return _fail(error)
    prepare = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
    if txn.state == TxnState.ONGOING:
        new_id, epoch = _bumped(txn, fresh_producer_id) if bump else (txn.producer_id, txn.producer_epoch)
        write = replace(txn, producer_id=new_id, producer_epoch=epoch, state=prepare, update_ms=now_ms,
                        last_epoch=-1)
        return Outcome(write=write, markers=Markers(new_id, epoch, commit, txn.partitions))
    if txn.state in COMPLETE:
        return Outcome(write=None) if txn.commit == commit else _fail(ErrorCode.INVALID_TXN_STATE)
    if txn.state in PREPARING:
        same = txn.state == prepare
        return _fail(ErrorCode.CONCURRENT_TRANSACTIONS if same else ErrorCode.INVALID_TXN_STATE)
    if txn.state == TxnState.EMPTY and bump and not commit:
        return Outcome(write=None)  # TV2: aborting a transaction that never added a partition is a no-op
    return _fail(ErrorCode.INVALID_TXN_STATE)


def completed(txn: TxnMetadata, now_ms: int) -> TxnMetadata:
    """Every marker is written: Prepare* → Complete*, no partitions."""
    state = TxnState.COMPLETE_COMMIT if txn.state == TxnState.PREPARE_COMMIT else TxnState.COMPLETE_ABORT
    return replace(txn, state=state, partitions=frozenset(), update_ms=now_ms)


def expired(txn: TxnMetadata, now_ms: int, expiration_ms: int) -> bool:
    """Kafka's ``transactional.id.expiration.ms``: an id with no transaction open or ending (Empty, CompleteCommit,
    CompleteAbort) and no state change for that long is forgotten (a tombstone in ``__transaction_state``)."""
    return txn.state in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT) and \
        now_ms - txn.update_ms >= expiration_ms


def timed_out(txn: TxnMetadata, now_ms: int, fresh_producer_id: int | None) -> Outcome | None:
    """An Ongoing transaction past its timeout is aborted with a bumped epoch (its producer is fenced)."""
    if txn.state != TxnState.ONGOING or txn.start_ms < 0 or now_ms <= txn.start_ms + txn.timeout_ms:
        return None
    return _aborting(txn, now_ms, fresh_producer_id)
