"""SIGKILL a writer at random moments; everything it reported as fsynced must survive."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from dataplane.storage.log import Log
from tests.dataplane.storage.crash_child import COMPACT_CONFIG, CONFIG, KEYS, key_for, value_for

CHILD = Path(__file__).with_name("crash_child.py")
ROOT = Path(__file__).resolve().parents[3]


def run_and_kill(path: Path, seed: int, rnd: random.Random, *extra: str) -> int:
    """Start the child, let it report a random number of flushes, SIGKILL it. Returns durable LEO."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, str(CHILD), str(path), str(seed), *extra],
                            stdout=subprocess.PIPE, env=env, text=True)
    assert proc.stdout is not None
    durable = 0
    try:
        first = proc.stdout.readline()
        assert first.startswith("open"), first
        durable = int(first.split()[1])
        for _ in range(rnd.randint(0, 40)):
            line = proc.stdout.readline()
            if not line:
                break
            durable = int(line.split()[1])
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    return durable


def verify(path: Path, durable: int) -> int:
    log = Log.open(path, CONFIG)
    try:
        assert log.log_end_offset >= durable, "lost fsynced data"
        expected = log.log_start_offset
        for r in log.read_records(log.log_start_offset):
            assert r.offset == expected, "offsets not contiguous"
            assert r.value == value_for(r.offset), f"corrupt record at {r.offset}"
            expected += 1
        assert expected == log.log_end_offset
        return log.log_end_offset
    finally:
        log.close_unclean()


def crash_loop(path: Path, kills: int, seed: int) -> None:
    rnd = random.Random(seed)
    for i in range(kills):
        durable = run_and_kill(path, seed * 1000 + i, rnd)
        verify(path, durable)
        if i % 4 == 3:
            # also kill in the middle of a recovery's aftermath
            leftovers = [p for p in path.iterdir() if p.name.endswith(".tmp")]
            assert leftovers == [] or all(p.stat().st_size >= 0 for p in leftovers)
    assert len(list(path.glob("*.log"))) >= 1


def test_sigkill_writer_10_times(tmp_path: Path) -> None:
    crash_loop(tmp_path / "t-0", kills=10, seed=1)


def verify_compacted(path: Path, durable: int) -> None:
    """Compaction may drop superseded records, never the newest durable value of a key."""
    log = Log.open(path, COMPACT_CONFIG)
    try:
        assert log.log_end_offset >= durable, "lost fsynced data"
        assert not list(path.glob("*.cleaned")) and not list(path.glob("*.swap"))
        assert not list(path.glob("*.deleted"))
        last = -1
        seen: set[int] = set()
        for r in log.read_records(log.log_start_offset):
            assert r.offset > last, "offsets not increasing"
            assert r.key == key_for(r.offset) and r.value == value_for(r.offset), f"corrupt at {r.offset}"
            last = r.offset
            seen.add(r.offset)
        end = log.log_end_offset
        for k in range(KEYS):
            newest = max((o for o in range(k, end, KEYS)), default=None)
            if newest is not None:
                assert newest in seen, f"newest value of key {k} (offset {newest}) lost"
    finally:
        log.close_unclean()


def compaction_crash_loop(path: Path, kills: int, seed: int) -> None:
    rnd = random.Random(seed)
    for i in range(kills):
        durable = run_and_kill(path, seed * 1000 + i, rnd, "compact")
        verify_compacted(path, durable)
    log = Log.open(path, COMPACT_CONFIG)
    try:
        kept = sum(1 for _ in log.read_records(log.log_start_offset))
        assert kept < log.log_end_offset - log.log_start_offset, "compaction never ran"
    finally:
        log.close_unclean()


def test_sigkill_during_compaction_10_times(tmp_path: Path) -> None:
    compaction_crash_loop(tmp_path / "c-0", kills=10, seed=3)


@pytest.mark.slow
def test_sigkill_during_compaction_200_times(tmp_path: Path) -> None:
    compaction_crash_loop(tmp_path / "c-0", kills=200, seed=4)


@pytest.mark.slow
def test_sigkill_writer_200_times(tmp_path: Path) -> None:
    crash_loop(tmp_path / "t-0", kills=200, seed=2)
