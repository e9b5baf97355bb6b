"""The log against a plain in-memory model: append, roll, read, truncate, retention,
DeleteRecords, compaction, flush, clean and unclean reopen."""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from dataplane.protocol.errors import OffsetOutOfRangeError
from dataplane.protocol.records import Compression, Record, build_batch
from dataplane.storage.config import LogConfig
from dataplane.storage.log import Log
from tests.dataplane.conftest import Clock

KEYS = [b"a", b"b", b"c", b"d", b"e"]


@dataclass
class MBatch:
    base: int
    last: int
    ts: int
    records: dict[int, tuple[bytes, bytes | None]] = field(default_factory=dict)


class LogMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="sluice-stateful-"))
        self.clock = Clock()
        self.config = LogConfig(
            segment_bytes=700, index_interval_bytes=150, cleanup_policy="compact,delete",
            retention_ms=-1, retention_bytes=-1, delete_retention_ms=10**13,
        )
        self.log = Log.open(self.tmp / "t-0", self.config, time_ms=self.clock)
        self.batches: list[MBatch] = []
        self.start = 0
        self.leo = 0

    def teardown(self) -> None:
        self.log.close_unclean()
        shutil.rmtree(self.tmp, ignore_errors=True)

    # ------------------------------------------------------------ model helpers

    def records(self) -> list[tuple[int, bytes, bytes | None]]:
        out = []
        for b in self.batches:
            for off, (k, v) in sorted(b.records.items()):
                if off >= self.start:
                    out.append((off, k, v))
        return out

    def drop_empty(self) -> None:
        self.batches = [b for b in self.batches if b.records]

    # ------------------------------------------------------------ rules

    @rule(
        pairs=st.lists(st.tuples(st.sampled_from(KEYS), st.one_of(st.none(), st.binary(max_size=40))),
                       min_size=1, max_size=6),
        codec=st.sampled_from([Compression.NONE, Compression.LZ4, Compression.SNAPPY]),
        epoch=st.integers(0, 3),
    )
    def append(self, pairs: list[tuple[bytes, bytes | None]], codec: Compression, epoch: int) -> None:
        recs = [Record(i, self.clock.now, k, v) for i, (k, v) in enumerate(pairs)]
        info = self.log.append_as_leader(build_batch(recs, compression=codec), leader_epoch=epoch)
        assert info.first_offset == self.leo
        b = MBatch(self.leo, self.leo + len(pairs) - 1, self.clock.now)
        for i, (k, v) in enumerate(pairs):
            b.records[self.leo + i] = (k, v)
        self.batches.append(b)
        self.leo += len(pairs)
        self.clock.advance(1)

    @rule()
    def roll(self) -> None:
        self.log.roll()

    @rule(data=st.data())
    def read(self, data: st.DataObject) -> None:
        offset = data.draw(st.integers(self.start, self.leo))
        region = self.log.read(offset, data.draw(st.integers(1, 2000)))
        expected = [r for r in self.records() if r[0] >= offset]
        if not expected:
            assert region.length == 0
            return
        got = [(r.offset, r.key, r.value) for r in self.log.read_records(offset)]
        assert got == expected

    @rule(data=st.data())
    def offset_for_timestamp(self, data: st.DataObject) -> None:
        target = data.draw(st.integers(self.clock.now - 60, self.clock.now + 1))
        want = next(
            (off for b in self.batches if b.ts >= target for off in sorted(b.records) if off >= self.start),
            None,
        )
        got = self.log.offset_for_timestamp(target)
        assert (got.offset if got is not None else None) == want

    @rule(data=st.data())
    def read_out_of_range(self, data: st.DataObject) -> None:
        bad = data.draw(st.sampled_from([self.leo + 1, self.start - 1]))
        if bad < 0:
            return
        try:
            self.log.read(bad, 100)
        except OffsetOutOfRangeError:
            return
        raise AssertionError("read out of range did not raise")

    @precondition(lambda self: self.batches)
    @rule(data=st.data())
    def truncate_to(self, data: st.DataObject) -> None:
        offset = data.draw(st.integers(self.start, self.leo))
        self.log.truncate_to(offset)
        if offset < self.leo:
            self.batches = [b for b in self.batches if b.last < offset]
            self.leo = offset

    @rule(data=st.data())
    def truncate_fully(self, data: st.DataObject) -> None:
        if data.draw(st.integers(0, 9)) != 0:
            return
        offset = data.draw(st.integers(self.leo, self.leo + 50))
        self.log.truncate_fully_and_start_at(offset)
        self.batches = []
        self.start = self.leo = offset

    @rule(data=st.data())
    def delete_records(self, data: st.DataObject) -> None:
        offset = data.draw(st.integers(self.start, self.leo))
        self.log.delete_records_before(offset)
        self.start = max(self.start, offset)

    @rule(limit=st.integers(100, 3000))
    def retention_by_size(self, limit: int) -> None:
        from dataclasses import replace

        self.log.update_config(replace(self.config, retention_bytes=limit))
        before = self.log.segment_base_offsets
        self.log.delete_old_segments()
        self.log.update_config(self.config)
        after = self.log.segment_base_offsets
        assert after == before[len(before) - len(after):] and after[-1] == before[-1]
        new_start = self.log.log_start_offset
        assert new_start >= self.start and new_start in (self.start, *after)
        self.start = new_start

    @rule()
    def compact(self) -> None:
        active_base = self.log.segment_base_offsets[-1]
        self.log.compact()
        latest: dict[bytes, int] = {}
        for off, k, _ in self.records():
            if off < active_base:
                latest[k] = off
        for b in self.batches:
            for off in list(b.records):
                k = b.records[off][0]
                if off < active_base and off >= self.start and latest[k] != off:
                    del b.records[off]
        self.drop_empty()

    @rule()
    def flush(self) -> None:
        self.log.flush()
        assert self.log.recovery_point == self.leo

    @rule(clean=st.booleans())
    def reopen(self, clean: bool) -> None:
        if clean:
            self.log.close()
        else:
            self.log.close_unclean()
        self.log = Log.open(self.tmp / "t-0", self.config, time_ms=self.clock)
        assert self.log.had_clean_shutdown == clean
        active_base = self.log.segment_base_offsets[-1]
        surviving = [b.last + 1 for b in self.batches if b.records]
        self.leo = max([active_base, *surviving])
        self.batches = [b for b in self.batches if b.last < self.leo]

    # ------------------------------------------------------------ invariants

    @invariant()
    def offsets_agree(self) -> None:
        assert self.log.log_start_offset == self.start
        assert self.log.log_end_offset == self.leo

    @invariant()
    def contents_agree(self) -> None:
        got = [(r.offset, r.key, r.value) for r in self.log.read_records(self.start)]
        assert got == self.records()


TestLogStateful = LogMachine.TestCase
TestLogStateful.settings = settings(
    # SLUICE_HYPOTHESIS_EXAMPLES=1000 for a soak run; the default keeps the suite fast.
    max_examples=int(os.environ.get("SLUICE_HYPOTHESIS_EXAMPLES", "60")),
    stateful_step_count=40, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
