"""Pure parts of REST produce and the tail's rendering: parsing, the JSON fallbacks, splitting a stream."""

from __future__ import annotations

import asyncio
import json

import pytest

from controlplane.kafkarest import fastjson
from controlplane.kafkarest.errors import INVALID_PAYLOAD, KAFKA_RETRIABLE, RestError
from controlplane.kafkarest.produce import engine
from controlplane.kafkarest.produce.engine import Produced
from controlplane.kafkarest.records import ConcatenatedJson, parse_produce_request
from controlplane.kafkarest.tail.protocol import records_frame
from controlplane.kafkarest.tail.records import Record
from dataplane.client.producer import Segment

pytestmark = pytest.mark.xdist_group("kafkarest")


def test_json_values_orjson_refuses_are_still_written() -> None:
    # orjson stops at 64-bit integers; the standard library takes over, on reading and on writing.
    body = fastjson.loads(b'{"value": {"type": "JSON", "data": {"n": 123456789012345678901234567890}}}')
    assert parse_produce_request(body).value == b'{"n":123456789012345678901234567890}'
    assert parse_produce_request({"value": {"type": "JSON", "data": {"é": [1, 2.5]}}}).value == \
        '{"é":[1,2.5]}'.encode()


def test_bad_json_raises_the_standard_librarys_error() -> None:
    with pytest.raises(json.JSONDecodeError, match="Expecting"):
        fastjson.loads(b'{"a": ')


@pytest.mark.parametrize("data", ["YWJ", "YWI=YWI=", "Y WJj", "YWJj\n", "é", "===="])
def test_base64_is_strict(data: str) -> None:
    with pytest.raises(RestError) as refused:
        parse_produce_request({"value": {"type": "BINARY", "data": data}})
    assert refused.value.error_code == INVALID_PAYLOAD
    with pytest.raises(RestError):
        parse_produce_request({"value": {"type": "STRING", "data": "x"}, "headers": [{"name": "h", "value": data}]})


def test_text_json_can_spell_but_utf8_cannot_is_a_bad_record() -> None:
    # "\ud800" is JSON to the standard library, which reads it when orjson refuses, but no UTF-8 string: refused
    # as it is parsed, and by the record parser for a body that was not.
    with pytest.raises(fastjson.Refused, match="lone surrogate"):
        fastjson.loads(b'{"value": {"type": "STRING", "data": "\\ud800"}}')
    for kind in ("STRING", "JSON"):
        with pytest.raises(RestError) as refused:
            parse_produce_request({"value": {"type": kind, "data": "\ud800"}})
        assert refused.value.error_code == INVALID_PAYLOAD and "not valid Unicode" in refused.value.message
    with pytest.raises(RestError) as refused:
        parse_produce_request({"value": None, "headers": [{"name": "\ud800", "value": None}]})
    assert refused.value.error_code == INVALID_PAYLOAD


def test_base64_values_and_headers() -> None:
    record = parse_produce_request({"value": {"type": "BINARY", "data": "YWI="},
                                    "headers": [{"name": "h", "value": "YQ=="}, {"name": "n", "value": None}]})
    assert record.value == b"ab" and record.headers == [("h", b"a"), ("n", None)]


def _split(chunks: list[bytes]) -> list[object]:
    decoder = ConcatenatedJson(1 << 20)
    values: list[object] = []
    for chunk in chunks:
        values.extend(decoder.feed(chunk))
    values.extend(decoder.finish())
    return values


def test_a_stream_splits_the_same_whatever_its_chunks() -> None:
    tricky = '}{ [" \\ ]'  # brackets, a quote and a backslash inside strings
    records = [{"value": {"type": "STRING", "data": f"v{i} {tricky}"}, "partition_id": i % 3} for i in range(50)]
    stream = b"".join(json.dumps(r).encode() + (b"\n" if i % 2 else b"") for i, r in enumerate(records))
    assert _split([stream]) == records
    assert _split([stream[i:i + 7] for i in range(0, len(stream), 7)]) == records
    assert _split([stream[i:i + 1] for i in range(len(stream))]) == records


def test_a_malformed_record_is_reported_in_its_place() -> None:
    values = _split([b'{"value": 1}{"value": nope}', b'{"value": 2}'])
    assert values[0] == {"value": 1} and values[2] == {"value": 2}
    assert isinstance(values[1], RestError) and values[1].error_code == INVALID_PAYLOAD


def test_tail_records_render_to_the_frame_clients_read() -> None:
    text = Record(1, 7, 1700000000000, "create", b"\xff", "héllo".encode(), [("h", b"x"), ("n", None)])
    frame = json.loads(records_frame([text.json, Record(1, 8, 0, "create", None, None, []).json], {1: 9}))
    assert frame == {"type": "records", "cursor": {"1": 9}, "records": [
        {"partition": 1, "offset": 7, "timestamp": 1700000000000, "timestamp_type": "create",
         "key": "/w==", "key_encoding": "base64", "value": "héllo", "value_encoding": "utf-8",
         "headers": [{"key": "h", "value": "x", "encoding": "utf-8"},
                     {"key": "n", "value": None, "encoding": None}]},
        {"partition": 1, "offset": 8, "timestamp": 0, "timestamp_type": "create", "key": None,
         "key_encoding": None, "value": None, "value_encoding": None, "headers": []}]}


def test_records_never_acknowledged_are_reported_retriable_when_the_wait_ends() -> None:
    async def main() -> dict[str, object]:
        produced = Produced("t")
        produced.records.append(parse_produce_request({"value": None}))
        produced.results.append(engine.PENDING)
        never: asyncio.Future[list[Segment]] = asyncio.get_running_loop().create_future()
        produced._sends.append((0, [0], [1], never))
        await produced.wait(timeout=0.01)
        return produced.report(0, "c")

    assert asyncio.run(main())["error_code"] == KAFKA_RETRIABLE


@pytest.mark.parametrize(("raw", "code"), [
    (b'{"records": []}', 422),
    (b"{}", 422),
    (b'{"records": null}', 422),
    (b"{", 400),
    (b"[]", 400),
    (b'{"records": 1}', 400),
    (b'{"records": [1]}', 400),
    (b'{"records": [{"value": "%%"}]}', 42206),
])
def test_v2_produce_bodies_are_refused_with_confluents_codes(raw: bytes, code: int) -> None:
    from controlplane.kafkarest.v2.produce import parse_records
    with pytest.raises(RestError) as refused:
        parse_records("binary", raw)
    assert refused.value.error_code == code


def test_v2_commit_positions_take_metadata_only_when_given() -> None:
    from controlplane.kafkarest.v2.consumers import _commit_position
    plain = _commit_position({"topic": "t", "partition": 0, "offset": 4})
    assert (plain.topic, plain.partition, plain.offset, plain.metadata) == ("t", 0, 5, None)
    noted = _commit_position({"topic": "t", "partition": 1, "offset": 0, "metadata": "m"})
    assert (noted.offset, noted.metadata) == (1, "m")
