"""The WebSocket tail's resume cursor and its slow-viewer disconnect, against a real service and Kafka."""

from __future__ import annotations

import asyncio
import json
import threading

import pytest
from websockets.exceptions import ConnectionClosed

from tests.kafkarest.conftest import RestStack
from tests.kafkarest.tailing import (
    Tail,
    aproduce,
    next_frame,
    open_tail,
    produce,
    read_until,
    stats,
    subscribe,
    topic_name,
    wait_for,
)

pytestmark = pytest.mark.xdist_group("kafkarest")


def test_resume_after_a_dropped_connection_has_no_gap_and_no_duplicate(rest_stack: RestStack) -> None:
    topic = topic_name("tail-resume")
    rest_stack.create_topic(topic, partitions=2)

    async def scenario() -> None:
        first = await open_tail(rest_stack, topic)
        start = (await subscribe(first))["cursor"]
        wave1 = await aproduce(rest_stack, topic, [{"key": f"a{i}", "value": f"a{i}"} for i in range(30)])
        seen = await read_until(first, lambda t: len(t.records) >= 10)
        cursor = dict(seen.cursor)
        first.transport.abort()  # dropped, no close handshake; whatever was in flight is lost with it
        # Records keep arriving while the viewer is away.
        wave2 = await aproduce(rest_stack, topic, [{"key": f"b{i}", "value": f"b{i}"} for i in range(30)])
        async with await open_tail(rest_stack, topic) as second:
            resumed = await subscribe(second, **{"from": {"offsets": cursor}})
            assert resumed["cursor"] == cursor
            expected = set(wave1) | set(wave2)
            kept = {k for k in seen.offsets() if k[1] < cursor[str(k[0])]}  # what the client had acknowledged
            rest = await read_until(second, lambda t: len(kept) + len(t.records) >= len(expected))
            wave3 = await aproduce(rest_stack, topic, [{"value": f"c{i}"} for i in range(10)])
            rest = await read_until(second, lambda t: len(kept) + len(t.records) >= len(expected) + 10, rest)
        everything = sorted(kept) + sorted(rest.offsets())
        assert len(everything) == len(set(everything)), "a record was shown twice"
        assert set(everything) == expected | set(wave3), "a record was never shown"
        assert all(k[1] >= start[str(k[0])] for k in everything)

    asyncio.run(scenario())


def test_a_slow_viewer_is_told_and_disconnected_and_its_buffer_stays_bounded(rest_stack: RestStack) -> None:
    topic = topic_name("tail-slow")
    rest_stack.create_topic(topic, partitions=1)
    stop = threading.Event()

    def flood() -> None:
        payload = b"x" * 64 * 1024
        while not stop.is_set():
            produce(rest_stack, topic, [{"value": payload}] * 16)

    async def scenario() -> None:
        async with await open_tail(rest_stack, topic) as watcher:
            before = (await stats(watcher))["slow_disconnects"]
            # max_queue=1: the client library stops reading the socket once one message waits unread.
            slow = await open_tail(rest_stack, topic, max_queue=1)
            await subscribe(slow)
            flooder = threading.Thread(target=flood, daemon=True)
            flooder.start()
            try:
                async def disconnected() -> bool:
                    return bool((await stats(watcher))["slow_disconnects"] > before)
                await wait_for(disconnected, "the slow viewer to be disconnected")
            finally:
                stop.set()
                await asyncio.to_thread(flooder.join)
            counters = await stats(watcher)
            # Bounded by construction: a live batch that does not fit is refused, never appended.
            assert 0 < counters["buffer_high_water"] <= counters["buffer_limit"], counters
            # Now the client reads what was sent before the server gave up: records, then the error, then the close.
            tail = Tail()
            with pytest.raises(ConnectionClosed) as closed:
                while True:
                    frame = json.loads(await slow.recv())
                    tail.frames.append(frame)
            assert tail.frames[-1]["type"] == "error" and tail.frames[-1]["code"] == "too_slow", tail.frames[-1]
            assert "cursor" in tail.frames[-1]
            assert closed.value.rcvd is not None and closed.value.rcvd.code == 4429

    asyncio.run(scenario())


def test_stats_before_subscribing(rest_stack: RestStack) -> None:
    topic = topic_name("tail-stats")
    rest_stack.create_topic(topic, partitions=1)

    async def scenario() -> None:
        async with await open_tail(rest_stack, topic) as ws:
            counters = await stats(ws)
            assert counters["viewers"] == 0 and counters["live_fetchers"] == 0
            assert (await next_frame_after_ping(ws)) == {"type": "pong"}

    async def next_frame_after_ping(ws):  # type: ignore[no-untyped-def]
        await ws.send(json.dumps({"type": "ping"}))
        return await next_frame(ws)

    asyncio.run(scenario())
