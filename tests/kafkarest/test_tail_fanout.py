"""Fifty live viewers of one topic cost the cluster what one does: one shared fetcher, the same Fetches.

Where the Fetch requests are counted: managed brokers run with their metrics endpoint off
(``metrics.listen = ""`` in the agent's broker config), so the count comes from the other end of the
wire -- librdkafka's own per-broker request counters (``brokers.*.req.Fetch`` in its statistics) for
every consumer the tail runs for the topic in the web process, live and backlog alike, reported by the
``stats`` message. A sluice up stack runs one web process, so that is every Fetch the tail sends.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from websockets.asyncio.client import ClientConnection

from tests.kafkarest.conftest import RestStack
from tests.kafkarest.tailing import (
    Tail,
    aproduce,
    fresh_stats,
    open_tail,
    read_until,
    stats,
    subscribe,
    topic_name,
    wait_for,
)

pytestmark = pytest.mark.xdist_group("kafkarest")

VIEWERS = 50
RECORDS = 30


async def _one_by_one(stack: RestStack, topic: str, viewers: list[ClientConnection], tails: list[Tail]) -> None:
    """Produce RECORDS records, each only once every viewer has received the one before."""
    for i in range(RECORDS):
        await aproduce(stack, topic, [{"value": f"r{i}"}])
        await asyncio.gather(*(read_until(ws, _has(len(tail.records) + 1), tail)
                               for ws, tail in zip(viewers, tails, strict=True)))


def _has(count: int) -> Callable[[Tail], bool]:
    return lambda tail: len(tail.records) >= count


def _fetches(before: dict[str, Any], after: dict[str, Any], kind: str) -> int:
    return int(after["fetch_requests"][kind] - before["fetch_requests"][kind])


def test_fifty_viewers_share_one_fetcher(rest_stack: RestStack) -> None:
    topic = topic_name("tail-fanout")
    rest_stack.create_topic(topic, partitions=1)

    async def scenario() -> None:
        async with await open_tail(rest_stack, topic) as watcher:
            first = await open_tail(rest_stack, topic)
            await subscribe(first)
            viewers, tails = [first], [Tail()]
            before = await fresh_stats(watcher)
            await _one_by_one(rest_stack, topic, viewers, tails)
            after_one = await fresh_stats(watcher)
            one = _fetches(before, after_one, "live")

            for _ in range(VIEWERS - 1):
                viewer = await open_tail(rest_stack, topic)
                await subscribe(viewer)
                viewers.append(viewer)
                tails.append(Tail())
            counters = await stats(watcher)
            assert (counters["viewers"], counters["live_fetchers"]) == (VIEWERS, 1), counters
            before = await fresh_stats(watcher)
            await _one_by_one(rest_stack, topic, viewers, tails)
            after_fifty = await fresh_stats(watcher)
            fifty = _fetches(before, after_fifty, "live")

            assert all([r["value"] for r in tail.records] == [f"r{i}" for i in range(RECORDS)] for tail in tails[1:])
            assert _fetches(before, after_fifty, "backlog") == 0
            # Goal: at most 1.1x the Fetches of one viewer. The +2 allows the idle long polls (one per 5 s) that a
            # longer phase may add; without sharing this would be ~50x.
            assert fifty <= 1.1 * one + 2, f"1 viewer: {one} Fetch requests; {VIEWERS} viewers: {fifty}"
            for viewer in viewers:
                await viewer.close()

            async def fetcher_stopped() -> bool:
                counters = await stats(watcher)
                return bool(counters["viewers"] == 0 and counters["live_fetchers"] == 0)
            await wait_for(fetcher_stopped, "the shared fetcher to stop with its last viewer")
            print(f"Fetch requests for {RECORDS} records: 1 viewer {one}, {VIEWERS} viewers {fifty}")

    asyncio.run(scenario())
