"""The replication throttle's clock: one budget per broker, shared by every fetcher."""

from __future__ import annotations

import pytest

from dataplane.replication.manager import ReplicationPacer

MB = 1_000_000


def test_fetchers_share_one_budget() -> None:
    pacer = ReplicationPacer()
    # Two fetchers start together and each brings 10 MB back after 0.1 s, at a 50 MB/s throttle:
    # 20 MB is 0.4 s of budget, so the second waits for the first's share as well as its own.
    assert pacer.delay(10 * MB, started=100.0, now=100.1, rate=50 * MB) == pytest.approx(0.1)
    assert pacer.delay(10 * MB, started=100.0, now=100.1, rate=50 * MB) == pytest.approx(0.3)


def test_a_fetch_slower_than_the_throttle_waits_for_nothing() -> None:
    pacer = ReplicationPacer()
    assert pacer.delay(1 * MB, started=10.0, now=11.0, rate=50 * MB) == 0.0


def test_idle_time_is_not_saved_up() -> None:
    pacer = ReplicationPacer()
    assert pacer.delay(50 * MB, started=0.0, now=0.5, rate=50 * MB) == pytest.approx(0.5)
    # A minute idle, then a burst: paced from its own start, not from the clock left behind.
    assert pacer.delay(50 * MB, started=60.0, now=60.5, rate=50 * MB) == pytest.approx(0.5)


def test_sustained_fetching_runs_at_the_rate() -> None:
    pacer = ReplicationPacer()
    now = 0.0
    for _ in range(100):  # 4 MB fetches that take 10 ms each, waiting as told
        now += 0.01
        now += pacer.delay(4 * MB, started=now - 0.01, now=now, rate=50 * MB)
    assert 400 * MB / now == pytest.approx(50 * MB, rel=0.01)
