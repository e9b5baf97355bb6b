"""Compaction (Kafka's ``LogCleaner``): what one pass does to a log, and the thread that runs passes.

A pass keeps the newest record per key in the sealed segments, preserving offsets. It
works on a log through a narrow interface (:class:`Cleanable`): a :class:`CleaningPlan`
taken under the log's lock, then the cleaned copies handed back to
:meth:`Cleanable.swap_cleaned`, which swaps them in only if the log's layout did not
change meanwhile. Everything in between (decode, rewrite, fsync of the ``.cleaned``
files) runs without any log lock, so appends and reads are never blocked for long.

Thread-safety: :func:`compact` may run on any thread (the cleaner's, or a test's);
:class:`LogCleaner` owns one background thread.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from dataplane.protocol.records import (
    BatchHeader,
    RecordBatch,
    TimestampType,
    build_batch,
    decode_batch,
    iter_batch_headers,
)
from dataplane.storage.config import LogConfig
from dataplane.storage.segment import CLEANED_SUFFIX, BatchPlacement, LogSegment
from dataplane.storage.txn_index import AbortedTxn

if TYPE_CHECKING:
    from dataplane.storage.log import Log

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class CleanResult:
    segments_rewritten: int
    bytes_before: int
    bytes_after: int


@dataclass(frozen=True, slots=True)
class CleaningPlan:
    """What one pass works on, taken under the log's lock."""

    directory: Path
    config: LogConfig
    segments: tuple[tuple[LogSegment, int], ...]  # the sealed segments and their sizes then
    first_dirty: int  # first offset not yet cleaned
    dirty_end: int  # base of the active segment: the pass cleans below it
    layout_version: int  # the swap happens only if the log's is still this
    now_ms: int
    aborted: tuple[AbortedTxn, ...] = ()  # aborted transactions below dirty_end: their records go, unmapped


class Cleanable(Protocol):
    """The log as the cleaner sees it."""

    def cleaning_plan(self) -> CleaningPlan | None:
        """The sealed segments to clean, or None if the log is closed, not compacted or has none."""

    def swap_cleaned(self, plan: CleaningPlan, cleaned: Sequence[tuple[LogSegment, LogSegment]],
                     clean_end: int) -> bool:
        """Replace each ``(old, new)`` pair's old segment and mark offsets below ``clean_end`` clean.

        False (and the ``.cleaned`` files deleted) if the layout changed since ``plan``.
        """


def dirty_ratio(sealed: Iterable[LogSegment], cleaner_offset: int) -> float:
    """Bytes of sealed segments holding offsets not yet cleaned, over all sealed bytes."""
    total = dirty = 0
    for s in sealed:
        total += s.size
        if s.next_offset > cleaner_offset:
            dirty += s.size
    return dirty / total if total else 0.0


def compact(log: Cleanable, *, max_map_keys: int = 4_000_000) -> CleanResult | None:
    """One compaction pass over ``log``; None if there was nothing to do or the log changed meanwhile.

    The key map covers whole dirty segments until it holds ``max_map_keys`` keys (Kafka's
    dedupe-buffer bound); the rest waits for the next pass.
    """
    plan = log.cleaning_plan()
    if plan is None or plan.first_dirty >= plan.dirty_end:
        return None
    first_dirty, dirty_end = plan.first_dirty, plan.dirty_end
    snapshot = list(plan.segments)
    offset_map: dict[bytes, int] = {}
    for i, (seg, size) in enumerate(snapshot):
        if seg.next_offset <= first_dirty:
            continue
        if len(offset_map) >= max_map_keys and seg.base_offset > first_dirty:
            dirty_end = seg.base_offset  # map full: clean up to here this time
            snapshot = snapshot[:i]
            break
        for batch in _segment_batches(seg, size):
            if batch.header.is_control or _aborted(batch.header, plan.aborted):
                continue  # an aborted record must never shadow a committed one
            for r in batch.records:
                if r.key is not None and r.offset >= first_dirty:
                    offset_map[r.key] = r.offset
    delete_horizon = plan.now_ms - plan.config.delete_retention_ms
    outputs: list[tuple[LogSegment, LogSegment]] = []
    before = after = 0
    markers = MarkerRetention(delete_horizon)
    try:
        for seg, size in snapshot:
            cleaned = _clean_segment(plan, seg, size, offset_map, seg.max_timestamp < delete_horizon, markers)
            if cleaned is not None:
                outputs.append((seg, cleaned))
                before += size
                after += cleaned.size
    except BaseException:
        for _, c in outputs:
            c.delete_files()
        raise
    if not log.swap_cleaned(plan, outputs, dirty_end):
        return None
    return CleanResult(len(outputs), before, after)


class MarkerRetention:
    """Which transaction markers a pass may remove (Kafka's ``CleanedTransactionMetadata``).

    A marker is kept while any batch of its transaction is still in the log, so the
    producer state rebuilt from the log can never see a transaction's data without its
    end; once none is (an abort's records always go; a commit's once newer records
    replaced them all), the marker goes when it is older than ``delete.retention.ms``,
    which gives a consumer that read the transaction's records time to read its end.
    The pass visits batches in offset order; one instance per pass.
    """

    def __init__(self, delete_horizon_ms: int) -> None:
        self.delete_horizon_ms = delete_horizon_ms
        self._retained: set[int] = set()  # producers whose current transaction still has a batch in the log

    def kept_data(self, h: BatchHeader) -> None:
        if h.is_transactional and not h.is_control:
            self._retained.add(h.producer_id)

    def keep_marker(self, h: BatchHeader) -> bool:
        """Whether the control batch stays; either way the producer's transaction has ended here."""
        retained = h.producer_id in self._retained
        self._retained.discard(h.producer_id)
        return retained or h.max_timestamp >= self.delete_horizon_ms


def _clean_segment(plan: CleaningPlan, seg: LogSegment, size: int, offset_map: dict[bytes, int],
                   drop_tombstones: bool, markers: MarkerRetention) -> LogSegment | None:
    """The segment's first ``size`` bytes cleaned into a flushed ``.cleaned`` segment; None if nothing goes."""
    out = bytearray()
    placements: list[BatchPlacement] = []
    changed = False
    data = seg.pread(0, size)
    for pos, h in iter_batch_headers(data):
        raw = data[pos : pos + h.size]
        if _aborted(h, plan.aborted):
            changed = True  # Kafka's cleaner discards aborted transactions' records (their markers stay a while)
            continue
        if h.is_control:
            if not markers.keep_marker(h):
                changed = True
                continue
            kept_raw: bytes | None = raw
        else:
            kept_raw = _filter_batch(decode_batch(raw), raw, offset_map, drop_tombstones)
        if kept_raw is not raw:
            changed = True
        if kept_raw is None:
            continue
        markers.kept_data(h)
        kh = BatchHeader.parse(kept_raw)
        placements.append(BatchPlacement(len(out), kh.size, kh.last_offset, kh.max_timestamp))
        out += kept_raw
    if not changed:
        return None
    cleaned = LogSegment(plan.directory, seg.base_offset, plan.config, now_ms=plan.now_ms, suffix=CLEANED_SUFFIX)
    if cleaned.size or len(cleaned.offset_index) or len(cleaned.time_index):
        os.ftruncate(cleaned.file.fd, 0)
        cleaned.size = 0
        cleaned.offset_index.reset()
        cleaned.time_index.reset()
    cleaned.append(out, placements)
    cleaned.seal()
    cleaned.flush()
    return cleaned


def _aborted(h: BatchHeader, aborted: Sequence[AbortedTxn]) -> bool:
    """Whether a transactional data batch belongs to an aborted transaction."""
    if not h.is_transactional or h.is_control or not aborted:
        return False
    return any(a.producer_id == h.producer_id and a.first_offset <= h.base_offset < a.last_offset for a in aborted)


def _segment_batches(seg: LogSegment, size: int) -> Iterator[RecordBatch]:
    data = seg.pread(0, size)
    for pos, _ in iter_batch_headers(data):
        yield decode_batch(data, pos)


def _filter_batch(batch: RecordBatch, raw: bytes, offset_map: dict[bytes, int],
                  drop_tombstones: bool) -> bytes | None:
    """The batch bytes to keep: ``raw`` if unchanged, a rebuilt batch, or None if empty."""
    kept = []
    for r in batch.records:
        if r.key is not None:
            latest = offset_map.get(r.key)
            if latest is not None and latest > r.offset:
                continue
            if r.value is None and drop_tombstones:
                continue
        kept.append(r)
    if len(kept) == len(batch.records):
        return raw
    if not kept:
        return None
    h = batch.header
    log_append = h.timestamp_type == TimestampType.LOG_APPEND_TIME
    return build_batch(
        kept,
        base_offset=h.base_offset,
        compression=h.compression,
        timestamp_type=h.timestamp_type,
        producer_id=h.producer_id,
        producer_epoch=h.producer_epoch,
        base_sequence=h.base_sequence,
        partition_leader_epoch=h.partition_leader_epoch,
        is_transactional=h.is_transactional,
        last_offset_delta=h.last_offset_delta,
        base_timestamp=h.base_timestamp,
        max_timestamp=h.max_timestamp if log_append else None,
    )


class LogCleaner:
    """Compacts the dirtiest eligible log, over and over, until stopped.

    On disk: nothing of its own (each Log keeps ``cleaner-offset-checkpoint`` and writes
    ``.cleaned``/``.swap`` files). Thread-safety: one background thread; ``clean_once``,
    ``wakeup`` and ``stop`` may be called from any thread.
    """

    def __init__(self, logs: Callable[[], Iterable[Log]], *, backoff_ms: int = 15_000) -> None:
        self._logs = logs
        self._backoff = backoff_ms / 1000
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    def clean_once(self) -> int:
        """Compact every log whose dirty ratio reached ``min.cleanable.dirty.ratio``; count them."""
        candidates = [
            (log.dirty_ratio(), log) for log in self._logs()
            if log.config.compact
        ]
        cleaned = 0
        for ratio, log in sorted(candidates, key=lambda c: -c[0]):
            if self._stop.is_set():
                break
            if ratio <= 0 or ratio < log.config.min_cleanable_dirty_ratio:
                continue
            try:
                if log.compact() is not None:
                    cleaned += 1
            except Exception:  # one bad log must not stop cleaning the others
                logger.exception("compaction of %s failed", log.dir)
        return cleaned

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="log-cleaner", daemon=True)
        self._thread.start()

    def wakeup(self) -> None:
        self._wake.set()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def _run(self) -> None:
        while not self._stop.is_set():
            if self.clean_once() == 0:
                self._wake.wait(self._backoff)
                self._wake.clear()
