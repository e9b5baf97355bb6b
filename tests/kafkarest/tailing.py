"""Client helpers for the WebSocket tail tests: a real ``websockets`` client and a real Kafka producer.

Waits are conditions with deadlines (``DEADLINE`` seconds to fail, never a threshold a pass depends on).
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Producer
from websockets.asyncio.client import ClientConnection, connect

from tests.kafkarest.conftest import RestStack

DEADLINE = 60.0


def topic_name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def tail_url(stack: RestStack, topic: str, cluster_id: str | None = None) -> str:
    return f"ws://127.0.0.1:{stack.port}/ws/clusters/{cluster_id or stack.cluster_id}/topics/{topic}/tail"


async def open_tail(stack: RestStack, topic: str, *, key: str | None = "owner", cluster_id: str | None = None,
                    headers: dict[str, str] | None = None, origin: str | None = None,
                    max_size: int | None = None, **kwargs: Any) -> ClientConnection:
    sent: dict[str, str] = {}
    if key is not None:
        sent["Authorization"] = stack.basic(stack.key if key == "owner" else key)
    sent.update(headers or {})
    return await connect(tail_url(stack, topic, cluster_id), additional_headers=sent, origin=origin,  # type: ignore[arg-type]
                         proxy=None, max_size=max_size, open_timeout=DEADLINE, **kwargs)


async def next_frame(ws: ClientConnection) -> dict[str, Any]:
    frame: dict[str, Any] = json.loads(await asyncio.wait_for(ws.recv(), DEADLINE))
    return frame


async def subscribe(ws: ClientConnection, **fields: Any) -> dict[str, Any]:
    await ws.send(json.dumps({"type": "subscribe", **fields}))
    frame = await next_frame(ws)
    assert frame["type"] == "subscribed", frame
    return frame


@dataclass
class Tail:
    """What a viewer received: records in arrival order, every frame, the last cursor."""

    records: list[dict[str, Any]] = field(default_factory=list)
    frames: list[dict[str, Any]] = field(default_factory=list)
    cursor: dict[str, int] = field(default_factory=dict)

    def offsets(self) -> list[tuple[int, int]]:
        return [(r["partition"], r["offset"]) for r in self.records]


async def read_until(ws: ClientConnection, done: Callable[[Tail], bool], tail: Tail | None = None) -> Tail:
    """Read frames until ``done(tail)`` (checked after each frame) or a ``done``/``error`` frame."""
    tail = tail or Tail()
    while not done(tail):
        frame = await next_frame(ws)
        tail.frames.append(frame)
        tail.records.extend(frame.get("records", []))
        if "cursor" in frame:
            tail.cursor = frame["cursor"]
        if frame["type"] in ("done", "error"):
            break
    return tail


async def bounded(stack: RestStack, topic: str, **fields: Any) -> tuple[dict[str, Any], Tail]:
    """A whole bounded read (``until: end``): the subscribed frame and everything to ``done``."""
    async with await open_tail(stack, topic) as ws:
        subscribed = await subscribe(ws, until="end", **fields)
        tail = await read_until(ws, lambda t: False)
        assert tail.frames[-1]["type"] == "done", tail.frames[-1]
        return subscribed, tail


def produce(stack: RestStack, topic: str, records: list[dict[str, Any]]) -> list[tuple[int, int]]:
    """Produce and wait for every delivery; returns (partition, offset) of each, in order."""
    producer = Producer({**stack.kafka, "linger.ms": 1})
    where: list[tuple[int, int] | None] = [None] * len(records)

    def delivered(index: int) -> Callable[[Any, Any], None]:
        def report(error: Any, message: Any) -> None:
            assert error is None, error
            where[index] = (message.partition(), message.offset())
        return report

    for index, record in enumerate(records):
        producer.produce(topic, on_delivery=delivered(index), **record)
    assert producer.flush(DEADLINE) == 0
    assert all(w is not None for w in where)
    return [w for w in where if w is not None]


async def aproduce(stack: RestStack, topic: str, records: list[dict[str, Any]]) -> list[tuple[int, int]]:
    return await asyncio.to_thread(produce, stack, topic, records)


async def stats(ws: ClientConnection) -> dict[str, Any]:
    """This server process's counters for the tail's topic (a connection that has not subscribed)."""
    await ws.send(json.dumps({"type": "stats"}))
    frame = await next_frame(ws)
    assert frame["type"] == "stats", frame
    return frame


async def wait_for(condition: Callable[[], Awaitable[bool]], what: str) -> None:
    deadline = time.monotonic() + DEADLINE * 2
    while not await condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.05)  # a poll interval, not a synchronisation


async def fresh_stats(ws: ClientConnection) -> dict[str, Any]:
    """Counters from a librdkafka statistics report taken wholly after this call began."""
    first = await stats(ws)
    latest = first

    async def reported() -> bool:
        nonlocal latest
        latest = await stats(ws)
        return bool(latest["stats_reports"] >= first["stats_reports"] + 2)

    await wait_for(reported, "a fresh statistics report")
    return latest
