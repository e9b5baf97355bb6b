"""What a broker keeps per hosted partition beside its log: role, leader epoch, high watermark, waiters.

``lock`` serialises idempotent appends (check sequence, append, record) so two
connections cannot interleave them; ``producers`` is rebuilt from the log on
first use, and dropped whenever the log changes under it (truncation, a
follower becoming leader). acks=all produces wait here for the high watermark
to pass their last offset.
"""

from __future__ import annotations

import asyncio
import enum

from dataplane.protocol.errors import ErrorCode, KafkaError
from dataplane.replication.leader import LeaderState
from dataplane.storage import Log
from dataplane.storage.producer_state import ProducerStateManager, rebuild_producer_state


class Role(enum.Enum):
    LEADER = "leader"
    FOLLOWER = "follower"
    NONE = "none"  # not a replica (any more), or leaderless


class PartitionRuntime:
    __slots__ = ("_waiters", "high_watermark", "leader", "leader_epoch", "leader_state", "lock", "log", "producers",
                 "role")

    def __init__(self, log: Log, high_watermark: int = 0) -> None:
        self.log = log
        self.lock = asyncio.Lock()
        self.producers: ProducerStateManager | None = None
        self.role = Role.NONE
        self.leader = -1
        self.leader_epoch = -1
        self.leader_state: LeaderState | None = None
        self.high_watermark = min(high_watermark, log.log_end_offset)
        self._waiters: list[tuple[int, asyncio.Future[None]]] = []

    async def producer_state(self) -> ProducerStateManager:
        if self.producers is None:
            self.producers = await asyncio.to_thread(rebuild_producer_state, self.log)
        return self.producers

    def set_high_watermark(self, offset: int) -> bool:
        """Move the high watermark (followers may move it back after a truncation); True when it changed."""
        offset = min(offset, self.log.log_end_offset)
        if offset == self.high_watermark:
            return False
        self.high_watermark = offset
        still: list[tuple[int, asyncio.Future[None]]] = []
        for wanted, future in self._waiters:
            if offset >= wanted:
                if not future.done():
                    future.set_result(None)
            else:
                still.append((wanted, future))
        self._waiters = still
        return True

    async def wait_for_high_watermark(self, offset: int, timeout: float) -> None:
        """Until the high watermark reaches ``offset``; KafkaError if it does not in time or leadership moves."""
        if self.high_watermark >= offset:
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append((offset, future))
        try:
            await asyncio.wait_for(future, timeout)
        except TimeoutError:
            raise KafkaError(f"the write was not replicated to the whole ISR within {timeout:.3f} s",
                             code=ErrorCode.REQUEST_TIMED_OUT) from None
        finally:
            self._waiters = [(w, f) for w, f in self._waiters if f is not future]

    def fail_waiters(self, error: KafkaError) -> None:
        for _, future in self._waiters:
            if not future.done():
                future.set_exception(error)
        self._waiters = []
