"""What a partition leader knows of its followers, sans-IO: progress, high watermark, ISR changes due.

Kafka's rules (``Partition``/``Replica`` in Kafka's broker):

* a follower's fetch offset is its log end offset; a follower is *caught up*
  at a fetch when it asked for the leader's log end offset at that time, or
  for at least what the leader's log end was at its previous fetch;
* the high watermark is the least log end offset over the ISR (leader
  included), and never moves back while this broker leads;
* a follower not caught up for ``replica.lag.time.max.ms`` leaves the ISR; one
  out of the ISR joins when its log end reaches the high watermark and the start
  of the current leader epoch (so it holds every write of this epoch's leader).

Every method takes ``now`` (milliseconds) rather than reading a clock.
"""

from __future__ import annotations

from dataclasses import dataclass

UNKNOWN = -1


@dataclass(slots=True)
class FollowerProgress:
    log_end_offset: int = UNKNOWN
    last_caught_up_ms: float = 0.0
    last_fetch_leader_end: int = UNKNOWN
    last_fetch_ms: float = 0.0


class LeaderState:
    """Follower progress and the high watermark of one partition this broker leads at one leader epoch.

    Owned by that ``Partition`` while it leads at this epoch; used on the broker's event loop.
    """

    def __init__(self, node_id: int, replicas: tuple[int, ...], isr: tuple[int, ...], *, leader_epoch: int,
                 partition_epoch: int, epoch_start_offset: int, high_watermark: int, now: float) -> None:
        self.node_id = node_id
        self.leader_epoch = leader_epoch
        self.epoch_start_offset = epoch_start_offset
        self.high_watermark = high_watermark
        self.replicas = replicas
        self.isr = isr
        self.partition_epoch = partition_epoch
        # A new leader gives every follower a full lag window before it may be dropped.
        self.followers = {r: FollowerProgress(last_caught_up_ms=now) for r in replicas if r != node_id}

    def update_membership(self, replicas: tuple[int, ...], isr: tuple[int, ...], partition_epoch: int,
                          now: float) -> None:
        """Same leader epoch, new replica list or ISR (an ISR change, a reassignment step)."""
        self.replicas, self.isr, self.partition_epoch = replicas, isr, partition_epoch
        for r in replicas:
            if r != self.node_id and r not in self.followers:
                self.followers[r] = FollowerProgress(last_caught_up_ms=now)
        for r in [r for r in self.followers if r not in replicas]:
            del self.followers[r]

    def on_follower_fetch(self, replica: int, fetch_offset: int, leader_end: int, now: float) -> None:
        progress = self.followers.get(replica)
        if progress is None:
            return
        if fetch_offset >= leader_end:
            progress.last_caught_up_ms = max(progress.last_caught_up_ms, now)
        elif fetch_offset >= progress.last_fetch_leader_end:
            progress.last_caught_up_ms = max(progress.last_caught_up_ms, progress.last_fetch_ms)
        progress.log_end_offset = fetch_offset
        progress.last_fetch_leader_end = leader_end
        progress.last_fetch_ms = now

    def advance_high_watermark(self, leader_end: int) -> bool:
        """Recompute the high watermark from the ISR's log ends; True when it moved."""
        ends = [leader_end]
        for r in self.isr:
            if r != self.node_id:
                progress = self.followers.get(r)
                ends.append(progress.log_end_offset if progress is not None else UNKNOWN)
        candidate = min(ends)
        if candidate > self.high_watermark:
            self.high_watermark = candidate
            return True
        return False

    def lagging(self, now: float, max_lag_ms: float) -> tuple[int, ...]:
        """ISR followers not caught up within ``max_lag_ms``."""
        return tuple(r for r in self.isr if r != self.node_id and r in self.followers
                     and now - self.followers[r].last_caught_up_ms > max_lag_ms)

    def shrunk_isr(self, now: float, max_lag_ms: float) -> tuple[int, ...] | None:
        lagging = self.lagging(now, max_lag_ms)
        if not lagging:
            return None
        return tuple(r for r in self.isr if r not in lagging)

    def expanded_isr(self) -> tuple[int, ...] | None:
        """The ISR with every follower that has caught up to both the high watermark and this epoch's start."""
        joining = [r for r, p in self.followers.items()
                   if r not in self.isr and p.log_end_offset >= max(self.high_watermark, self.epoch_start_offset)]
        if not joining:
            return None
        return tuple(r for r in self.replicas if r in self.isr or r in joining)
