"""The WebSocket tail's start modes, partition subsets and filters, against a real service and Kafka."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest
from websockets.exceptions import ConnectionClosed

from tests.kafkarest.conftest import RestStack
from tests.kafkarest.tailing import (
    aproduce,
    bounded,
    next_frame,
    open_tail,
    produce,
    read_until,
    subscribe,
    topic_name,
)

pytestmark = pytest.mark.xdist_group("kafkarest")

BASE_MS = (int(time.time()) - 3600) * 1000  # an hour ago, whole seconds: timestamps we can look up exactly


@pytest.fixture(scope="module")
def seeded(rest_stack: RestStack) -> str:
    """Two partitions, five records each: key k{p}-{i}, JSON value, timestamp BASE_MS + i s."""
    topic = topic_name("tail-seeded")
    rest_stack.create_topic(topic, partitions=2)
    produce(rest_stack, topic, [{"partition": p, "key": f"k{p}-{i}", "value": json.dumps({"p": p, "i": i}),
                                 "timestamp": BASE_MS + i * 1000} for p in (0, 1) for i in range(5)])
    return topic


def by_partition(records: list[dict[str, Any]]) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for record in records:
        out.setdefault(record["partition"], []).append(record["offset"])
    return out


def test_earliest_reads_everything_and_is_done_at_the_end(rest_stack: RestStack, seeded: str) -> None:
    subscribed, tail = asyncio.run(bounded(rest_stack, seeded, **{"from": "earliest"}))
    assert subscribed["cursor"] == {"0": 0, "1": 0} and subscribed["end"] == {"0": 5, "1": 5}
    assert by_partition(tail.records) == {0: [0, 1, 2, 3, 4], 1: [0, 1, 2, 3, 4]}
    assert tail.frames[-1] == {"type": "done", "cursor": {"0": 5, "1": 5}}
    first = next(r for r in tail.records if (r["partition"], r["offset"]) == (1, 2))
    assert first == {"partition": 1, "offset": 2, "timestamp": BASE_MS + 2000, "timestamp_type": "create",
                     "key": "k1-2", "key_encoding": "utf-8", "value": '{"p": 1, "i": 2}', "value_encoding": "utf-8",
                     "headers": []}


def test_a_backlog_of_large_records_comes_in_frames_under_a_mebibyte(rest_stack: RestStack) -> None:
    """4,000 records of 1 KiB: a backlog consume holds 2,000 of them (~2.6 MB of JSON); frames stay under the
    1 MiB message size most WebSocket clients accept by default (this client refuses anything larger)."""
    topic = topic_name("tail-large")
    rest_stack.create_topic(topic, partitions=1)
    value = "v" * 1024
    produce(rest_stack, topic, [{"key": f"k{i}", "value": value} for i in range(4000)])

    async def run() -> tuple[list[int], list[int]]:
        async with await open_tail(rest_stack, topic, max_size=2**20) as ws:
            await subscribe(ws, until="end", **{"from": "earliest"})
            offsets: list[int] = []
            sizes: list[int] = []
            while True:
                raw = await asyncio.wait_for(ws.recv(), 60)
                sizes.append(len(raw))
                frame = json.loads(raw)
                offsets += [r["offset"] for r in frame.get("records", [])]
                if frame["type"] in ("done", "error"):
                    assert frame["type"] == "done", frame
                    return offsets, sizes

    offsets, sizes = asyncio.run(run())
    assert offsets == list(range(4000))  # every record once, in order
    assert max(sizes) < 2**20


def test_last_n_per_partition(rest_stack: RestStack, seeded: str) -> None:
    subscribed, tail = asyncio.run(bounded(rest_stack, seeded, **{"from": {"last": 2}}))
    assert subscribed["cursor"] == {"0": 3, "1": 3}
    assert by_partition(tail.records) == {0: [3, 4], 1: [3, 4]}


def test_offsets_per_partition(rest_stack: RestStack, seeded: str) -> None:
    subscribed, tail = asyncio.run(bounded(rest_stack, seeded, **{"from": {"offsets": {"0": 1, "1": 4}}}))
    assert subscribed["partitions"] == [0, 1]
    assert by_partition(tail.records) == {0: [1, 2, 3, 4], 1: [4]}


def test_timestamp(rest_stack: RestStack, seeded: str) -> None:
    subscribed, tail = asyncio.run(bounded(rest_stack, seeded, **{"from": {"timestamp": BASE_MS + 3000}}))
    assert subscribed["cursor"] == {"0": 3, "1": 3}
    assert by_partition(tail.records) == {0: [3, 4], 1: [3, 4]}
    _, after_all = asyncio.run(bounded(rest_stack, seeded, **{"from": {"timestamp": BASE_MS + 3_600_000 * 24}}))
    assert after_all.records == [] and after_all.cursor == {"0": 5, "1": 5}


def test_partition_subset(rest_stack: RestStack, seeded: str) -> None:
    subscribed, tail = asyncio.run(bounded(rest_stack, seeded, **{"from": "earliest", "partitions": [1]}))
    assert subscribed["partitions"] == [1] and subscribed["cursor"] == {"1": 0}
    assert by_partition(tail.records) == {1: [0, 1, 2, 3, 4]}
    assert tail.cursor == {"1": 5}


def test_latest_shows_only_new_records(rest_stack: RestStack) -> None:
    topic = topic_name("tail-latest")
    rest_stack.create_topic(topic, partitions=2)
    produce(rest_stack, topic, [{"partition": p, "value": b"old"} for p in (0, 1)])

    async def scenario() -> None:
        async with await open_tail(rest_stack, topic) as ws:
            subscribed = await subscribe(ws)  # "from" defaults to latest
            assert subscribed["cursor"] == {"0": 1, "1": 1}
            where = await aproduce(rest_stack, topic, [{"partition": i % 2, "value": f"new-{i}"} for i in range(4)])
            tail = await read_until(ws, lambda t: len(t.records) >= 4)
            assert sorted(tail.offsets()) == sorted(where)
            assert {r["value"] for r in tail.records} == {f"new-{i}" for i in range(4)}
            assert tail.cursor == {"0": 3, "1": 3}

    asyncio.run(scenario())


@pytest.mark.parametrize("start", ["earliest", {"last": 3}])
def test_history_then_live_without_gap_or_duplicate(rest_stack: RestStack, start: Any) -> None:
    """A viewer starting in the past reads its backlog, then joins the shared live stream exactly."""
    topic = topic_name("tail-join")
    rest_stack.create_topic(topic, partitions=2)
    history = produce(rest_stack, topic, [{"partition": i % 2, "value": f"h{i}"} for i in range(10)])

    async def scenario() -> None:
        async with await open_tail(rest_stack, topic) as live, await open_tail(rest_stack, topic) as past:
            await subscribe(live)  # a live viewer first, so the shared fetcher is running ahead of the backlog
            subscribed = await subscribe(past, **{"from": start})
            expected = {k for k in history if k[1] >= subscribed["cursor"][str(k[0])]}
            tail = await read_until(past, lambda t: len(t.records) >= len(expected))
            assert set(tail.offsets()) == expected
            more = await aproduce(rest_stack, topic, [{"partition": i % 2, "value": f"n{i}"} for i in range(6)])
            tail = await read_until(past, lambda t: len(t.records) >= len(expected) + 6, tail)
            assert len(tail.offsets()) == len(set(tail.offsets())) == len(expected) + 6
            assert set(tail.offsets()) == expected | set(more)
            assert tail.cursor == {"0": 8, "1": 8}

    asyncio.run(scenario())


@pytest.fixture(scope="module")
def mixed(rest_stack: RestStack) -> str:
    topic = topic_name("tail-filter")
    rest_stack.create_topic(topic, partitions=1)
    produce(rest_stack, topic, [
        {"key": "user-1", "value": '{"level": "info", "n": 1}', "headers": [("source", b"api")]},
        {"key": "user-2", "value": '{"level": "error", "n": 2}', "headers": [("source", b"billing")]},
        {"key": "svc", "value": "plain timeout text"},
        {"key": b"\xff\x00", "value": b"\x00\x01\xfe"},
        {"value": '{"level": "error", "n": 5, "tags": ["x"]}'},
    ])
    return topic


@pytest.mark.parametrize(("expression", "offsets"), [
    ("key == 'user-2'", [1]),
    ("starts_with(key, 'user-')", [0, 1]),
    ("contains(value, 'timeout')", [2]),
    ("headers.source == 'billing'", [1]),
    ("value_json.level == 'error'", [1, 4]),
    ("value_json.n > `1`", [1, 4]),
    ("contains(value_json.tags, 'x')", [4]),  # a type error on the other records: they do not pass
    ("key == null", [4]),
])
def test_filters(rest_stack: RestStack, mixed: str, expression: str, offsets: list[int]) -> None:
    _, tail = asyncio.run(bounded(rest_stack, mixed, **{"from": "earliest", "filter": expression}))
    assert [r["offset"] for r in tail.records] == offsets
    assert tail.cursor == {"0": 5}


def test_binary_is_base64_and_null_key_is_null(rest_stack: RestStack, mixed: str) -> None:
    _, tail = asyncio.run(bounded(rest_stack, mixed, **{"from": {"offsets": {"0": 3}}}))
    binary, keyless = tail.records
    assert (binary["key"], binary["key_encoding"], binary["value"], binary["value_encoding"]) == \
        ("/wA=", "base64", "AAH+", "base64")
    assert (keyless["key"], keyless["key_encoding"]) == (None, None)
    _, tail = asyncio.run(bounded(rest_stack, mixed, **{"from": "earliest", "filter": "headers.source == 'api'"}))
    assert tail.records[0]["headers"] == [{"key": "source", "value": "api", "encoding": "utf-8"}]


def test_a_filter_that_drops_everything_still_moves_the_cursor(rest_stack: RestStack, mixed: str) -> None:
    _, tail = asyncio.run(bounded(rest_stack, mixed, **{"from": "earliest", "filter": "key == 'nobody'"}))
    assert tail.records == []
    progress = [f for f in tail.frames if f["type"] == "progress"]
    assert progress and sum(f["skipped"] for f in progress) == 5 and progress[-1]["cursor"] == {"0": 5}


def test_a_bad_filter_is_an_error_frame(rest_stack: RestStack, mixed: str) -> None:
    async def scenario() -> None:
        async with await open_tail(rest_stack, mixed) as ws:
            await ws.send(json.dumps({"type": "subscribe", "filter": "value_json.level =="}))
            frame = await next_frame(ws)
            assert frame["type"] == "error" and frame["code"] == "invalid_filter", frame
            with pytest.raises(ConnectionClosed) as closed:
                await next_frame(ws)
            assert closed.value.rcvd is not None and closed.value.rcvd.code == 4400

    asyncio.run(scenario())
