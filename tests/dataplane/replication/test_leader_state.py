"""The leader's view of its followers: high watermark and ISR decisions, with a fake clock."""

from __future__ import annotations

from dataplane.replication.leader import LeaderState


def leader(isr: tuple[int, ...] = (1, 2, 3), hw: int = 0) -> LeaderState:
    return LeaderState(1, (1, 2, 3), isr, leader_epoch=4, partition_epoch=9, epoch_start_offset=10,
                       high_watermark=hw, now=0)


def test_high_watermark_is_the_least_isr_log_end_and_waits_for_unknown_followers() -> None:
    state = leader()
    assert not state.advance_high_watermark(20)  # followers' log ends unknown yet
    state.on_follower_fetch(2, 15, 20, now=1)
    assert not state.advance_high_watermark(20)
    state.on_follower_fetch(3, 12, 20, now=1)
    assert state.advance_high_watermark(20) and state.high_watermark == 12
    state.on_follower_fetch(3, 20, 20, now=2)
    assert state.advance_high_watermark(20) and state.high_watermark == 15


def test_high_watermark_never_moves_back() -> None:
    state = leader(isr=(1,), hw=30)
    assert not state.advance_high_watermark(20)
    assert state.high_watermark == 30


def test_a_follower_not_caught_up_within_the_lag_leaves_the_isr() -> None:
    state = leader()
    state.on_follower_fetch(2, 20, 20, now=100)   # caught up
    state.on_follower_fetch(3, 5, 20, now=100)    # behind: caught up last when the leader started (0)
    assert state.shrunk_isr(now=900, max_lag_ms=1000) is None
    assert state.shrunk_isr(now=1050, max_lag_ms=1000) == (1, 2)


def test_a_follower_that_reached_the_previous_fetch_end_counts_as_caught_up_then() -> None:
    state = leader()
    state.on_follower_fetch(2, 10, 20, now=1000)   # leader end was 20 at this fetch
    state.on_follower_fetch(2, 20, 30, now=1800)   # reached 20: caught up as of the previous fetch (1000)
    assert state.followers[2].last_caught_up_ms == 1000
    assert state.lagging(now=1900, max_lag_ms=1000) == (3,)
    assert state.lagging(now=2100, max_lag_ms=1000) == (2, 3)


def test_a_follower_rejoins_once_past_the_high_watermark_and_the_epoch_start() -> None:
    state = leader(isr=(1, 2), hw=12)
    state.on_follower_fetch(3, 11, 20, now=1)
    assert state.expanded_isr() is None   # below the high watermark and this epoch's start
    state.on_follower_fetch(3, 12, 20, now=2)
    assert state.expanded_isr() == (1, 2, 3)


def test_membership_update_adds_and_forgets_followers() -> None:
    state = leader()
    state.update_membership((1, 2, 4), (1, 2), 10, now=5)
    assert set(state.followers) == {2, 4} and state.partition_epoch == 10
