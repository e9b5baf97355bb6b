"""The transaction coordinator: transactional ids and their transactions, kept in ``__transaction_state``.

Each transactional id belongs to one partition of ``__transaction_state`` (Kafka's hash of the id) and is
coordinated by that partition's leader, as groups are by ``__consumer_offsets``'. When this broker leads a
partition it replays the partition into :class:`TxnMetadata` values; every change is appended (acks=all) before it
is answered, so a new leader rebuilds the same state. A transaction found half-way through its end after a
failover (PrepareCommit/PrepareAbort) is finished: its markers are written again (a marker written twice is
harmless: the second finds no open transaction) and the Complete state persisted.

The decisions are :mod:`txn_state`'s; this module is the asyncio adapter: it serialises each partition's
read-modify-write, writes the markers through the broker (:class:`MarkerWriter`) with retries until every
partition has its marker, and aborts transactions past their timeout. It runs on the broker's event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Coroutine, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from dataplane.coordinator.records import CoordinatorRecordError
from dataplane.coordinator.txn_records import (
    TRANSACTION_STATE_TOPIC,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
    partition_for,
)
from dataplane.coordinator.txn_state import (
    PREPARING,
    Markers,
    Outcome,
    TopicPartition,
    TxnMetadata,
    TxnState,
    add_partitions,
    completed,
    end_txn,
    expired,
    init_producer_id,
    needs_fresh_id,
    timed_out,
    verify_partitions,
)
from dataplane.protocol.errors import ErrorCode, KafkaError
from dataplane.protocol.records import Record, build_batch
from dataplane.storage import Log

log = logging.getLogger(__name__)

_MARKER_RETRY_S = (0.05, 0.1, 0.2, 0.5, 1.0)
END_WAIT_S = 1.0  # how long EndTxn waits for its markers before answering anyway
LOAD_WAIT_S = 5.0  # how long a request waits for its partition's state to load before LOAD_IN_PROGRESS


def now_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass(frozen=True, slots=True)
class TxnSettings:
    max_timeout_ms: int = 900_000  # transaction.max.timeout.ms
    abort_interval_ms: int = 10_000  # transaction.abort.timed.out.transaction.cleanup.interval.ms
    id_expiration_ms: int = 7 * 24 * 3600 * 1000  # transactional.id.expiration.ms


class TxnHost(Protocol):
    """What the coordinator needs of the broker: ``__transaction_state``, producer ids and markers."""

    def txn_partition_count(self) -> int | None:
        """Partitions of ``__transaction_state``; None while it does not exist."""

    def leads_txn_partition(self, partition: int) -> bool: ...

    def txn_log(self, partition: int) -> Log:
        """The partition's log (this broker leads it)."""

    def txn_coordinator_epoch(self, partition: int) -> int:
        """The partition's leader epoch: the coordinator epoch its markers carry."""

    async def append_txn(self, partition: int, batch: bytes) -> None:
        """Append as leader and wait for the whole ISR (acks=all)."""

    async def next_producer_id(self) -> int: ...

    async def write_markers(self, markers: Markers, coordinator_epoch: int) -> dict[TopicPartition, ErrorCode]:
        """Write the markers to the partitions' leaders; each partition's outcome (NONE when written)."""


class TxnCoordinatorError(KafkaError):
    """A request this broker cannot serve for the id (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS ...)."""


@dataclass(frozen=True, slots=True)
class InitResult:
    error: ErrorCode
    producer_id: int = -1
    producer_epoch: int = -1


@dataclass
class _Partition:
    txns: dict[str, TxnMetadata] = field(default_factory=dict)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    epoch: int = -1
    completing: dict[str, asyncio.Task[None]] = field(default_factory=dict)  # ids whose markers are being written


class TransactionCoordinator:
    """The transactional ids of the ``__transaction_state`` partitions this broker leads.

    Owned by the broker (its :class:`TxnHost`); runs on the broker's event loop.
    """

    def __init__(self, settings: TxnSettings, host: TxnHost, *, clock: Callable[[], int] = now_ms) -> None:
        self.settings = settings
        self.host = host
        self.clock = clock
        self.partitions: dict[int, _Partition] = {}
        self._loading: dict[int, asyncio.Task[_Partition]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._timer: asyncio.Task[None] | None = None

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        self._timer = asyncio.get_running_loop().create_task(self._timeout_loop(), name="txn-timeouts")

    async def stop(self) -> None:
        for task in (self._timer, *self._loading.values(), *self._tasks):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        self.partitions.clear()

    def leadership_changed(self, partition: int, leads: bool) -> None:
        if not leads:
            self.partitions.pop(partition, None)
            return
        self._spawn(self._load_and_resume(partition), f"load-txn-{partition}")

    # ------------------------------------------------------------------ routing

    def partition_for(self, transactional_id: str) -> int | None:
        count = self.host.txn_partition_count()
        return None if count is None else partition_for(transactional_id, count)

    async def _partition(self, transactional_id: str) -> tuple[int, _Partition]:
        index = self.partition_for(transactional_id)
        if index is None:
            raise TxnCoordinatorError(f"{TRANSACTION_STATE_TOPIC} does not exist yet",
                                      code=ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if not self.host.leads_txn_partition(index):
            self.partitions.pop(index, None)
            raise TxnCoordinatorError(f"this broker does not coordinate {transactional_id!r}",
                                      code=ErrorCode.NOT_COORDINATOR)
        found = self.partitions.get(index)
        if found is None:
            task = self._loading.get(index)
            if task is None:
                task = self._loading[index] = asyncio.get_running_loop().create_task(self._load(index))
            with contextlib.suppress(TimeoutError, Exception):  # a short load is waited for, a long one answered
                await asyncio.wait_for(asyncio.shield(task), LOAD_WAIT_S)
            if not task.done():
                raise TxnCoordinatorError("the coordinator is loading its state",
                                          code=ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
            self._loading.pop(index, None)
            if task.cancelled() or task.exception() is not None:  # leadership moved mid-load: the next call retries
                raise TxnCoordinatorError("the coordinator's state could not be loaded yet",
                                          code=ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
            found = self.partitions.get(index) or self._install(index, task.result())
        return index, found

    async def _load(self, index: int) -> _Partition:
        epoch = self.host.txn_coordinator_epoch(index)
        txns = await asyncio.to_thread(_read_partition, self.host.txn_log(index))
        loaded = _Partition(txns=txns, epoch=epoch)
        if self.host.leads_txn_partition(index) and self.host.txn_coordinator_epoch(index) == epoch:
            self._install(index, loaded)
        return loaded

    def _install(self, index: int, loaded: _Partition) -> _Partition:
        """Serve a loaded partition; ends interrupted by a failover (Prepare*) are finished."""
        self.partitions[index] = loaded
        for txn in loaded.txns.values():
            if txn.state in PREPARING:
                self._complete_later(index, loaded, txn)
        return loaded

    async def _load_and_resume(self, index: int) -> None:
        task = self._loading.get(index)
        if task is None:
            task = self._loading[index] = asyncio.get_running_loop().create_task(self._load(index))
        try:
            await asyncio.shield(task)
        except KafkaError as exc:  # leadership moved on mid-load (or is not applied yet): a request loads it later
            log.debug("loading %s-%d deferred: %s", TRANSACTION_STATE_TOPIC, index, exc)
        finally:
            if task.done():
                self._loading.pop(index, None)

    # ------------------------------------------------------------------ requests

    async def init_producer_id(self, transactional_id: str, *, timeout_ms: int, producer_id: int = -1,
                               producer_epoch: int = -1) -> InitResult:
        index, part = await self._partition(transactional_id)
        async with part.lock:
            current = part.txns.get(transactional_id)
            fresh = await self.host.next_producer_id() if needs_fresh_id(current) else None
            outcome = init_producer_id(current, transactional_id=transactional_id, timeout_ms=timeout_ms,
                                       max_timeout_ms=self.settings.max_timeout_ms, producer_id=producer_id,
                                       producer_epoch=producer_epoch, now_ms=self.clock(), fresh_producer_id=fresh)
            await self._apply(index, part, outcome)
        if outcome.error != ErrorCode.NONE or outcome.write is None:
            return InitResult(outcome.error)
        return InitResult(ErrorCode.NONE, outcome.write.producer_id, outcome.write.producer_epoch)

    async def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                             partitions: Iterable[TopicPartition]) -> ErrorCode:
        index, part = await self._partition(transactional_id)
        async with part.lock:
            outcome = add_partitions(part.txns.get(transactional_id), producer_id=producer_id,
                                     producer_epoch=producer_epoch, partitions=partitions, now_ms=self.clock())
            await self._apply(index, part, outcome)
        return outcome.error

    async def verify_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                                partitions: Iterable[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
        _, part = await self._partition(transactional_id)
        return verify_partitions(part.txns.get(transactional_id), producer_id=producer_id,
                                 producer_epoch=producer_epoch, partitions=partitions)

    async def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int, *, commit: bool,
                      bump: bool) -> InitResult:
        """EndTxn; with ``bump`` (v5+) the producer id and epoch to use next come back with the answer."""
        index, part = await self._partition(transactional_id)
        async with part.lock:
            current = part.txns.get(transactional_id)
            fresh = await self.host.next_producer_id() if bump and current is not None \
                and needs_fresh_id(current) else None
            outcome = end_txn(current, producer_id=producer_id, producer_epoch=producer_epoch, commit=commit,
                              now_ms=self.clock(), bump=bump, fresh_producer_id=fresh)
            await self._apply(index, part, outcome)
        # The end is decided (Prepare* persisted). Its markers usually take a millisecond: answering once they are
        # written saves the producer's next transaction a CONCURRENT_TRANSACTIONS round; a slow partition leader
        # only delays the answer up to END_WAIT_S, the markers carry on regardless.
        markers = part.completing.get(transactional_id)
        if markers is not None and outcome.markers is not None:
            with contextlib.suppress(TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(asyncio.shield(markers), END_WAIT_S)
        after = part.txns.get(transactional_id)
        if outcome.error != ErrorCode.NONE or after is None:
            return InitResult(outcome.error)
        return InitResult(ErrorCode.NONE, after.producer_id, after.producer_epoch)

    async def describe(self, transactional_id: str) -> TxnMetadata | None:
        """The id's metadata; raises NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS as requests do."""
        _, part = await self._partition(transactional_id)
        return part.txns.get(transactional_id)

    def list_transactions(self, *, states: Iterable[str] = (), producer_ids: Iterable[int] = (),
                          min_duration_ms: int = -1) -> list[TxnMetadata]:
        """The ids this broker coordinates, filtered as ListTransactions asks (KIP-664, KIP-994)."""
        wanted_states = set(states)
        wanted_ids = set(producer_ids)
        now = self.clock()
        found = []
        for part in self.partitions.values():
            for txn in part.txns.values():
                if wanted_states and txn.state.kafka_name not in wanted_states:
                    continue
                if wanted_ids and txn.producer_id not in wanted_ids:
                    continue
                if min_duration_ms >= 0 and (txn.start_ms < 0 or now - txn.start_ms < min_duration_ms):
                    continue
                found.append(txn)
        return sorted(found, key=lambda t: t.transactional_id)

    # ------------------------------------------------------------------ persistence and markers

    async def _apply(self, index: int, part: _Partition, outcome: Outcome) -> None:
        """Persist the outcome's write (under the partition's lock), then start its markers."""
        txn = outcome.write
        if txn is None or part.txns.get(txn.transactional_id) == txn:
            return
        await self._persist(index, txn)
        part.txns[txn.transactional_id] = txn
        if outcome.markers is not None:
            self._complete_later(index, part, txn)

    async def _persist(self, index: int, txn: TxnMetadata) -> None:
        record = Record(0, self.clock(), encode_key(txn.transactional_id), encode_value(txn))
        try:
            await self.host.append_txn(index, build_batch([record]))
        except KafkaError as exc:
            # The state is unchanged (the caller keeps the old metadata): the client retries.
            code = ErrorCode.NOT_COORDINATOR if exc.code in (
                ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
                ErrorCode.REQUEST_TIMED_OUT) else exc.code
            raise TxnCoordinatorError(f"could not write the transaction state: {exc}", code=code) from exc

    def _complete_later(self, index: int, part: _Partition, txn: TxnMetadata) -> None:
        if txn.transactional_id in part.completing:
            return
        part.completing[txn.transactional_id] = self._spawn(self._complete(index, part, txn.transactional_id),
                                                            f"txn-markers-{txn.transactional_id}")

    async def _complete(self, index: int, part: _Partition, transactional_id: str) -> None:
        """Write the markers until every partition has one, then persist Complete*; gives up only when this
        broker stops coordinating the partition (the new coordinator resumes it)."""
        try:
            attempt = 0
            while self.partitions.get(index) is part:
                txn = part.txns.get(transactional_id)
                if txn is None or txn.state not in PREPARING:
                    return
                markers = Markers(txn.producer_id, txn.producer_epoch, txn.commit, txn.partitions)
                outcomes = await self.host.write_markers(markers, part.epoch)
                failed = {tp: code for tp, code in outcomes.items() if code != ErrorCode.NONE}
                if not failed:
                    async with part.lock:
                        if self.partitions.get(index) is not part or part.txns.get(transactional_id) != txn:
                            return
                        done = completed(txn, self.clock())
                        try:
                            await self._persist(index, done)
                        except TxnCoordinatorError as exc:
                            log.warning("transaction %s: could not persist its end (%s); retrying",
                                        transactional_id, exc)
                        else:
                            part.txns[transactional_id] = done
                            return
                else:
                    log.info("transaction %s: markers not yet written to %s; retrying", transactional_id,
                             ", ".join(f"{t}-{p}: {c.name}" for (t, p), c in sorted(failed.items())))
                await asyncio.sleep(_MARKER_RETRY_S[min(attempt, len(_MARKER_RETRY_S) - 1)])  # a retry backoff
                attempt += 1
        finally:
            part.completing.pop(transactional_id, None)

    # ------------------------------------------------------------------ timeouts

    async def _timeout_loop(self) -> None:
        while True:
            await asyncio.sleep(self.settings.abort_interval_ms / 1000)  # Kafka's cleanup interval, a period
            try:
                await self.abort_timed_out()
                await self.expire_ids()
            except Exception:
                log.exception("aborting timed-out transactions or expiring ids failed")

    async def abort_timed_out(self) -> int:
        """Abort every Ongoing transaction past its timeout (epoch bumped: its producer is fenced)."""
        aborted = 0
        for index, part in list(self.partitions.items()):
            for transactional_id in [t.transactional_id for t in part.txns.values() if t.state == TxnState.ONGOING]:
                async with part.lock:
                    current = part.txns.get(transactional_id)
                    if current is None or self.partitions.get(index) is not part:
                        continue
                    fresh = await self.host.next_producer_id() if needs_fresh_id(current) else None
                    outcome = timed_out(current, self.clock(), fresh)
                    if outcome is None:
                        continue
                    try:
                        await self._apply(index, part, outcome)
                    except TxnCoordinatorError as exc:
                        log.warning("could not abort timed-out transaction %s: %s", transactional_id, exc)
                        continue
                    log.info("transaction %s timed out after %d ms: aborted", transactional_id, current.timeout_ms)
                    aborted += 1
        return aborted

    async def expire_ids(self) -> int:
        """Forget every id idle past ``transactional.id.expiration.ms`` with no transaction open (a tombstone, so
        a reload forgets it too); its next InitProducerId starts afresh with a new producer id."""
        forgotten = 0
        for index, part in list(self.partitions.items()):
            now = self.clock()
            for transactional_id in [t.transactional_id for t in part.txns.values()
                                     if expired(t, now, self.settings.id_expiration_ms)]:
                async with part.lock:
                    current = part.txns.get(transactional_id)
                    if current is None or self.partitions.get(index) is not part or \
                            transactional_id in part.completing or \
                            not expired(current, self.clock(), self.settings.id_expiration_ms):
                        continue
                    tombstone = Record(0, self.clock(), encode_key(transactional_id), None)
                    try:
                        await self.host.append_txn(index, build_batch([tombstone]))
                    except KafkaError as exc:
                        log.warning("could not expire transactional id %s: %s", transactional_id, exc)
                        continue
                    del part.txns[transactional_id]
                    forgotten += 1
        if forgotten:
            log.info("expired %d transactional id(s) idle for %d ms", forgotten, self.settings.id_expiration_ms)
        return forgotten

    def _spawn(self, work: Coroutine[Any, Any, None], name: str) -> asyncio.Task[None]:
        task: asyncio.Task[None] = asyncio.get_running_loop().create_task(work, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("transaction coordinator task %s failed", task.get_name(), exc_info=task.exception())


def _read_partition(txn_log: Log) -> dict[str, TxnMetadata]:
    """The latest metadata of every id in a ``__transaction_state`` partition (tombstones remove)."""
    txns: dict[str, TxnMetadata] = {}
    for record in txn_log.read_records(txn_log.log_start_offset):
        if record.key is None:
            continue
        try:
            transactional_id = decode_key(record.key)
            if record.value is None:
                txns.pop(transactional_id, None)
            else:
                txns[transactional_id] = decode_value(transactional_id, record.value)
        except CoordinatorRecordError as exc:
            log.warning("skipping a record of %s: %s", TRANSACTION_STATE_TOPIC, exc)
    return txns

