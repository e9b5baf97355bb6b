"""Idempotent-producer state of one partition: the last batches of every producer id.

Kafka's rules (``ProducerStateManager``): per producer id the broker keeps the
current epoch and the metadata of its last five batches. A batch that repeats
one of them is a duplicate (answered with the original offsets, nothing
written); a batch whose first sequence does not follow the last one is
OUT_OF_ORDER_SEQUENCE_NUMBER; an older epoch is INVALID_PRODUCER_EPOCH; a new
epoch must start at sequence 0. A producer the partition has never seen (or
whose state retention removed) may start at any sequence, as in Kafka since
KIP-360.

The state is a pure function of the batch headers in the log, so it is rebuilt
by scanning them; a snapshot written at clean shutdown (``producer-state.json``
in the partition directory, with the log end offset it describes) makes that
scan start at the snapshot's offset instead of the log start. Not thread-safe:
the broker serialises appends per partition.
"""

from __future__ import annotations

import json
import os
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from dataplane.protocol.errors import ErrorCode, KafkaError
from dataplane.protocol.records import NO_PRODUCER_ID, BatchHeader, iter_batch_headers

if TYPE_CHECKING:
    from dataplane.storage.log import Log

MAX_CACHED_BATCHES = 5  # Kafka's NUM_BATCHES_TO_RETAIN, and max.in.flight for idempotent producers
SNAPSHOT_NAME = "producer-state.json"
_INT32_MAX = 2**31 - 1


class BatchMetadata(NamedTuple):
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int


@dataclass(slots=True)
class ProducerEntry:
    epoch: int
    batches: deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=MAX_CACHED_BATCHES))


def next_sequence(sequence: int, increment: int = 1) -> int:
    """Sequences wrap from 2**31-1 to 0, as in Kafka."""
    if sequence > _INT32_MAX - increment:
        return increment - (_INT32_MAX - sequence) - 1
    return sequence + increment


def last_sequence(header: BatchHeader) -> int:
    return next_sequence(header.base_sequence, header.last_offset_delta)


class ProducerStateManager:
    def __init__(self) -> None:
        self.producers: dict[int, ProducerEntry] = {}

    def check(self, header: BatchHeader) -> BatchMetadata | None:
        """Validate a batch about to be appended; the duplicate's metadata if it was appended before.

        Raises KafkaError with INVALID_PRODUCER_EPOCH or OUT_OF_ORDER_SEQUENCE_NUMBER.
        """
        if header.producer_id == NO_PRODUCER_ID:
            return None
        entry = self.producers.get(header.producer_id)
        if entry is None:
            return None
        if header.producer_epoch < entry.epoch:
            raise KafkaError(f"producer {header.producer_id} epoch {header.producer_epoch} is older than the "
                             f"current epoch {entry.epoch}", code=ErrorCode.INVALID_PRODUCER_EPOCH)
        if header.producer_epoch > entry.epoch:
            if header.base_sequence != 0:
                raise KafkaError(f"producer {header.producer_id} started epoch {header.producer_epoch} at "
                                 f"sequence {header.base_sequence}, not 0",
                                 code=ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER)
            return None
        last = last_sequence(header)
        for cached in entry.batches:
            if cached.first_seq == header.base_sequence and cached.last_seq == last:
                return cached
        if entry.batches and header.base_sequence != next_sequence(entry.batches[-1].last_seq):
            raise KafkaError(f"producer {header.producer_id} sent sequence {header.base_sequence}, expected "
                             f"{next_sequence(entry.batches[-1].last_seq)}",
                             code=ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER)
        return None

    def update(self, header: BatchHeader, first_offset: int) -> None:
        """Record an appended batch (``first_offset`` is the offset the log gave it)."""
        if header.producer_id == NO_PRODUCER_ID:
            return
        entry = self.producers.get(header.producer_id)
        if entry is None or entry.epoch != header.producer_epoch:
            entry = self.producers[header.producer_id] = ProducerEntry(header.producer_epoch)
        entry.batches.append(BatchMetadata(header.base_sequence, last_sequence(header), first_offset,
                                           first_offset + header.last_offset_delta))

    def replay(self, headers: Iterable[BatchHeader]) -> None:
        """Rebuild from batches already in the log (their base offsets are final)."""
        for header in headers:
            self.update(header, header.base_offset)

    # ------------------------------------------------------------------ snapshots

    def write_snapshot(self, directory: Path, end_offset: int) -> None:
        """Atomically record the state as of ``end_offset`` (the log end offset)."""
        body = {"end_offset": end_offset, "producers": {
            str(pid): [entry.epoch, [list(b) for b in entry.batches]] for pid, entry in self.producers.items()}}
        tmp = directory / (SNAPSHOT_NAME + ".tmp")
        with open(tmp, "w") as out:
            json.dump(body, out, separators=(",", ":"))
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, directory / SNAPSHOT_NAME)

    @classmethod
    def read_snapshot(cls, directory: Path) -> tuple[ProducerStateManager, int] | None:
        """The snapshot and the offset it covers, or None when absent or unreadable (then rescan)."""
        try:
            body = json.loads((directory / SNAPSHOT_NAME).read_text())
            state = cls()
            for pid, (epoch, batches) in body["producers"].items():
                entry = state.producers[int(pid)] = ProducerEntry(int(epoch))
                entry.batches.extend(BatchMetadata(*map(int, b)) for b in batches)
            return state, int(body["end_offset"])
        except (OSError, ValueError, KeyError, TypeError):
            return None


def rebuild_producer_state(log: Log, *, chunk_bytes: int = 8 << 20) -> ProducerStateManager:
    """Producer state for ``log``: its snapshot if one fits, then every batch header after it."""
    snapshot = ProducerStateManager.read_snapshot(log.dir)
    if snapshot is not None and log.log_start_offset <= snapshot[1] <= log.log_end_offset:
        state, offset = snapshot
    else:
        state, offset = ProducerStateManager(), log.log_start_offset
    while offset < log.log_end_offset:
        region = log.read(offset, chunk_bytes)
        if region.length == 0:
            break
        for _, header in iter_batch_headers(region.read_bytes(), allow_partial_tail=True):
            state.update(header, header.base_offset)
            offset = header.next_offset
    return state
