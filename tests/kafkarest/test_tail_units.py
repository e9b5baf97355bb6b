"""Pure parts of the WebSocket tail: origin rule, subscribe parsing, filters, the bounded buffer."""

from __future__ import annotations

import asyncio

import pytest

from controlplane.kafkarest.tail.filters import RecordFilter
from controlplane.kafkarest.tail.flow import ViewerBuffer, item
from controlplane.kafkarest.tail.origin import origin_allowed
from controlplane.kafkarest.tail.protocol import ProtocolError, parse_subscribe
from controlplane.kafkarest.tail.records import Record

pytestmark = pytest.mark.xdist_group("kafkarest")


@pytest.mark.parametrize(("origin", "host", "allowed", "ok"), [
    (None, "a:8000", [], True),
    ("http://a:8000", "a:8000", [], True),
    ("http://A:8000/", "a:8000", [], True),
    ("http://b:8000", "a:8000", [], False),
    ("http://b:8000", "a:8000", ["http://b:8000"], True),
    ("null", "a:8000", [], False),
    ("http://b", "a:8000", ["*"], True),
])
def test_origin(origin: str | None, host: str, allowed: list[str], ok: bool) -> None:
    assert origin_allowed(origin, host, allowed) is ok


def test_subscribe_offsets_set_the_partitions() -> None:
    sub = parse_subscribe({"type": "subscribe", "from": {"offsets": {"2": 5, "0": 1}}})
    assert sub.partitions == (0, 2) and sub.start.offsets == {0: 1, 2: 5}
    with pytest.raises(ProtocolError):
        parse_subscribe({"type": "subscribe", "from": {"offsets": {"0": 1}}, "partitions": [1]})
    with pytest.raises(ProtocolError):
        parse_subscribe({"type": "subscribe", "from": {"last": True}})


def _record(offset: int, value: bytes = b"v" * 100) -> Record:
    return Record(0, offset, 0, "create", None, value, [])


def test_filter_truthiness_and_type_errors() -> None:
    record = _record(0, b'{"a": [], "b": 2}')
    assert not RecordFilter("value_json.a").matches(record)
    assert RecordFilter("value_json.b").matches(record)
    assert not RecordFilter("contains(value_json.b, 'x')").matches(record)
    with pytest.raises(ProtocolError):
        RecordFilter("value_json.a ==")


def test_the_buffer_refuses_live_items_past_its_limit() -> None:
    async def scenario() -> None:
        records = tuple(_record(i) for i in range(4))
        buffer = ViewerBuffer(limit=2 * item(records[:1], {}).size)
        assert buffer.offer(item(records[:1], {}))
        assert buffer.offer(item(records[1:2], {}))
        assert not buffer.offer(item(records[2:3], {}))
        assert buffer.high_water <= buffer.limit
        taken = await buffer.take(10**9)
        assert len(taken) == 2 and buffer.bytes == 0
        assert buffer.offer(item(records, {}))  # an empty buffer takes one oversized item

    asyncio.run(scenario())
