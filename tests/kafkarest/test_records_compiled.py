"""The compiled produce stream splitter (``_split``) and record parser (``_parse``): the values and errors of
the standard library and of the Python parser, whatever the chunks and whatever the record's shape."""

from __future__ import annotations

import base64
import binascii
import enum
import json
from collections import OrderedDict
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from controlplane.kafkarest import fastjson
from controlplane.kafkarest._parse import parse_plain
from controlplane.kafkarest._split import MAX_DEPTH, ObjectSplitter, nesting_exceeds
from controlplane.kafkarest.errors import INVALID_PAYLOAD, RestError
from controlplane.kafkarest.records import (
    ConcatenatedJson,
    ProduceRecord,
    parse_any_produce_request,
    parse_produce_request,
)

pytestmark = pytest.mark.xdist_group("kafkarest")


def _outcomes(chunks: list[bytes], limit: int = 1 << 20) -> list[Any]:
    """What a stream yields, errors as (code, message), ending with the error that stopped it if one did."""
    decoder = ConcatenatedJson(limit)
    out: list[Any] = []
    try:
        for chunk in chunks:
            out.extend(decoder.feed(chunk))
        out.extend(decoder.finish())
    except RestError as exc:
        out.append(("raised", exc.error_code, exc.message))
    return [(v.error_code, v.message) if isinstance(v, RestError) else v for v in out]


# ---------------------------------------------------------------- the splitter

# Strings with what the scan must see through: quotes, backslashes, brackets, digits, non-ASCII.
_text = st.text(alphabet=st.sampled_from(list('ab"\\{}[]: ,\n1\x00\x7fé\u2028\U0001f600')), max_size=10)
_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**30), 10**30) | st.floats(allow_nan=False, allow_infinity=False)
    | _text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_text, inner, max_size=3), max_leaves=10)
_objects = st.dictionaries(_text, _values, max_size=4)
_spaces = st.sampled_from([b"", b" ", b"\n", b"\r\n", b"\t "])


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(_spaces, _objects, st.booleans(), st.booleans()), max_size=6), st.data())
def test_any_stream_splits_into_its_objects_whatever_the_chunks(records: list[Any], data: st.DataObject) -> None:
    stream = b"".join(space + json.dumps(obj, ensure_ascii=ascii_, separators=(",", ":") if compact else None)
                      .encode() for space, obj, ascii_, compact in records)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=12)))
    chunks = [stream[a:b] for a, b in zip([0, *cuts], [*cuts, len(stream)], strict=True)]
    # The standard library is the reference: it reads integers of any length exactly.
    assert _outcomes(chunks) == [json.loads(json.dumps(obj)) for _, obj, _, _ in records]


def test_integers_beyond_64_bits_are_exact_and_digits_in_strings_do_not_matter() -> None:
    assert _outcomes([b'{"n": 123456789012345678901234567890}{"s": "12345678901234567890123"}']) == [
        {"n": 123456789012345678901234567890}, {"s": "12345678901234567890123"}]
    # orjson refuses NaN; the standard library took it, and it was written as null: now refused there too.
    assert _outcomes([b'{"a": NaN}']) == [(INVALID_PAYLOAD, "Payload error. a record is refused: NaN is not a JSON "
                                                            "number.")]


def test_a_malformed_record_fails_alone_with_the_standard_librarys_message() -> None:
    assert _outcomes([b'{"value": nope} {"a":1]', b'{"a": 2}']) == [
        (INVALID_PAYLOAD, "Payload error. a record is not valid JSON: Expecting value."),
        (INVALID_PAYLOAD, "Payload error. a record is not valid JSON: Expecting ',' delimiter."),
        {"a": 2}]


@pytest.mark.parametrize("bad", [b"\xff", b"\xc3(", b"\xed\xa0\x80"])  # the last: a surrogate, encoded
def test_bad_utf8_in_a_record_fails_that_record_only(bad: bytes) -> None:
    record = b'{"value": {"type": "STRING", "data": "a' + bad + b'"}}'
    error = (INVALID_PAYLOAD, "Payload error. a record is not valid JSON: it is not UTF-8.")
    assert _outcomes([b'{"a": 1}' + record + b'{"a": 2}']) == [{"a": 1}, error, {"a": 2}]
    assert _outcomes([b'{"a": 1}' + record[:-5], record[-5:] + b'{"a": 2}']) == [{"a": 1}, error, {"a": 2}]


def test_between_records_only_objects_and_whitespace() -> None:
    not_object = ("raised", INVALID_PAYLOAD, "Payload error. each record must be a JSON object.")
    not_utf8 = ("raised", INVALID_PAYLOAD, "Payload error. the body is not UTF-8.")
    assert _outcomes([b'{"a": 1} [1]']) == [{"a": 1}, not_object]
    assert _outcomes([b'{"a": 1}\xc2\xa0']) == [{"a": 1}, not_object]  # a no-break space is not JSON whitespace
    assert _outcomes([b'{"a": 1}\xc2', b'\xa0']) == [{"a": 1}, not_object]  # the character waits for its end
    assert _outcomes([b'{"a": 1}\xff{"a": 2}']) == [{"a": 1}, not_utf8]
    assert _outcomes([b'{"a": 1}\xc2', b'{']) == [{"a": 1}, not_utf8]


def test_the_end_of_the_body_and_the_size_limit() -> None:
    truncated = ("raised", INVALID_PAYLOAD, "Payload error. the body ends inside a JSON object.")
    assert _outcomes([b'{"a": 1} {"a": "}']) == [{"a": 1}, truncated]
    assert _outcomes([b'{"a": 1}\xc2']) == [{"a": 1}, truncated]
    assert _outcomes([b'{"a": 1}  \n']) == [{"a": 1}]
    too_large = ("raised", INVALID_PAYLOAD, "Payload error. A record exceeds the size limit.")
    assert _outcomes([b'{"a": 1}{"a": "' + b"x" * 40], limit=32) == [{"a": 1}, too_large]
    assert _outcomes([b'{"a": "' + b"x" * 40 + b'"}'], limit=32) == [{"a": "x" * 40}]  # whole: not buffered


def test_the_splitter_resumes_an_object_where_it_stopped() -> None:
    splitter = ObjectSplitter()
    assert splitter.split(b' {"a": "x\\') == ([], 1, 0)  # stopped in a string, after a backslash
    kept = b'{"a": "x\\'
    assert splitter.split(kept + b'"}') == ([], 0, 0)  # that quote was escaped: still in the string
    kept += b'"}'
    data = kept + b'"} {"b": 12345678901234567890}x'
    assert splitter.split(data) == (  # a long integer is left to the caller
        [{"a": 'x"}'}, b'{"b": 12345678901234567890}'], len(data) - 1, 1)
    with pytest.raises(ValueError, match="does not begin"):
        other = ObjectSplitter()
        other.split(b'{"a": ')
        other.split(b"")


# ---------------------------------------------------------------- bounds: what orjson refuses, refused everywhere


def _nested(depth: int, inner: bytes = b"1") -> bytes:
    return b'{"value": {"type": "JSON", "data": ' + b"[" * (depth - 2) + inner + b"]" * (depth - 2) + b"}}"


def _reference_depth(data: bytes) -> int:
    """The deepest nesting outside strings, in plain Python: what ``nesting_exceeds`` must agree with."""
    depth = deepest = 0
    in_string = escaped = False
    for byte in data:
        if in_string:
            in_string, escaped = (escaped or byte != 0x22), (not escaped and byte == 0x5C)
            continue
        if byte == 0x22:
            in_string = True
        elif byte in b"[{":
            depth += 1
            deepest = max(deepest, depth)
        elif byte in b"]}":
            depth -= 1
    return deepest


@settings(max_examples=300, derandomize=True, deadline=None)
@given(st.binary(max_size=40) | st.text(alphabet='[]{}"\\a', max_size=40).map(str.encode), st.integers(0, 6))
def test_nesting_is_measured_outside_strings_as_a_plain_scan_measures_it(data: bytes, limit: int) -> None:
    assert nesting_exceeds(data, limit) == (_reference_depth(data) > limit)


@pytest.mark.parametrize("chunk", [1 << 20, 7])  # whole, and cut everywhere
def test_an_object_nested_too_deep_fails_alone_and_the_stream_goes_on(chunk: int) -> None:
    deep = _nested(MAX_DEPTH + 1)
    stream = _nested(MAX_DEPTH) + deep + _nested(100_000) + b'{"a": 2}'
    out = _outcomes([stream[i:i + chunk] for i in range(0, len(stream), chunk)], limit=1 << 22)
    refused = (INVALID_PAYLOAD, f"Payload error. a record is refused: it nests deeper than {MAX_DEPTH} levels.")
    assert out[1:] == [refused, refused, {"a": 2}]
    assert parse_produce_request(out[0]).value == b"[" * (MAX_DEPTH - 2) + b"1" + b"]" * (MAX_DEPTH - 2)
    # The deepest record accepted also takes the standard library's path (a long integer) and its writer's.
    record = fastjson.loads(_nested(MAX_DEPTH, b"1" * 30))
    assert parse_produce_request(record).value.count(b"[") == MAX_DEPTH - 2
    for whole in (deep, b"[" * 5000 + b"]" * 5000, b" " + deep):
        with pytest.raises(fastjson.Refused, match="nests deeper"):
            fastjson.loads(whole)


_REFUSED = [
    (b"NaN", "NaN is not a JSON number"), (b"Infinity", "Infinity is not a JSON number"),
    (b"-Infinity", "-Infinity is not a JSON number"), (b"1e400", "the number 1e400 is out of range"),
    (b"-1.5E+999", "the number -1.5E+999 is out of range"), (b'"\\ud800"', "lone surrogate"),
    (b'{"\\udfff": 1}', "lone surrogate"), (b'["a\\ud83d"]', "lone surrogate"),
    (b"9" * 5000, "a number is longer than 1000 characters"),
    (b"-" + b"1" * 1001, "a number is longer than 1000 characters"),
    (b"0." + b"1" * 1000, "a number is longer than 1000 characters"),
]


@pytest.mark.parametrize(("data", "reason"), _REFUSED)
@pytest.mark.parametrize("long_integer", [False, True])  # orjson's refusal, or the long integer's path
def test_what_orjson_refuses_the_standard_librarys_path_refuses(data: bytes, reason: str, long_integer: bool) -> None:
    other = b', "n": 12345678901234567890123' if long_integer else b""
    body = b'{"value": {"type": "JSON", "data": ' + data + b"}" + other + b"}"
    [outcome] = _outcomes([body])
    assert outcome[0] == INVALID_PAYLOAD and "a record is refused: " in outcome[1] and reason in outcome[1], outcome
    batch = b'{"entries": [{"id": "a", "value": {"type": "JSON", "data": ' + data + b"}}]" + other + b"}"
    for document in (body, batch, b"[" + body + b"]"):
        with pytest.raises(fastjson.Refused, match=reason.replace("+", "\\+")):
            fastjson.loads(document)


def test_the_edges_that_are_still_taken() -> None:
    body = (b'{"value": {"type": "JSON", "data": [1e308, -1e-400, ' + b"9" * 1000 + b', "\\ud83d\\ude00", '
            b'"\\u00e9"]}}')
    [value] = _outcomes([body])
    data = [1e308, -0.0, int("9" * 1000), "\U0001f600", "\u00e9"]
    assert value == fastjson.loads(body) == {"value": {"type": "JSON", "data": data}}
    assert json.loads(parse_produce_request(value).value) == data


# ---------------------------------------------------------------- the record parser


class _Partition(enum.IntEnum):
    ONE = 1


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


_near_base64 = "AQWYbj09+/=\n -_é"
_base64ish = st.one_of(st.binary(max_size=12).map(_b64), st.text(alphabet=_near_base64, max_size=9),
                       st.text(alphabet=_near_base64, min_size=4, max_size=4),
                       st.text(alphabet=_near_base64, min_size=8, max_size=8),
                       st.sampled_from(["", "YWJ", "YWI=YWI=", "====", "YR==", "YWJ=", "=", "YQ=", "Y WJj", "é"]))
_data = st.one_of(st.none(), _base64ish, st.text(max_size=6), st.just("a\ud800"), _values, st.binary(max_size=3))
_types = st.sampled_from(["BINARY", "STRING", "JSON", "binary", "Json", "AVRO", "PROTOBUF", "JSONSCHEMA", "", 5, None])
_specs = st.one_of(
    st.none(),
    st.fixed_dictionaries({"type": _types, "data": _data}),
    st.fixed_dictionaries({}, optional={"type": _types, "data": _data, "schema_id": st.sampled_from([None, 1]),
                                        "subject": st.just("s"), "other": st.just(1)}),
    st.integers(), st.text(max_size=3), st.lists(st.integers(), max_size=2))
_partitions = st.one_of(st.none(), st.integers(-3, 3), st.integers(2**63 - 2, 2**70), st.booleans(),
                        st.floats(0, 2), st.just("0"), st.just(_Partition.ONE))
_bodies = st.fixed_dictionaries({}, optional={
    "partition_id": _partitions, "key": _specs, "value": _specs,
    "headers": st.sampled_from([None, [], [{"name": "h", "value": "YQ=="}], [{"name": "h", "value": "bad"}], "x"]),
    "timestamp": st.sampled_from([None, "2024-01-02T03:04:05Z", 5]), "id": st.text(max_size=2),
    "schema_id": st.just(1)})

_usual_specs = st.one_of(
    st.none(),
    st.builds(lambda data: {"type": "BINARY", "data": data}, st.none() | st.binary(max_size=12).map(_b64)),
    st.builds(lambda data: {"type": "BINARY", "data": data}, _base64ish),
    st.builds(lambda data: {"type": "STRING", "data": data}, st.none() | st.text(max_size=6)),
    st.builds(lambda data: {"type": "JSON", "data": data}, _values))
_usual = st.fixed_dictionaries({}, optional={  # mostly what the fast path takes
    "partition_id": st.none() | st.integers(0, 2**64), "key": _usual_specs, "value": _usual_specs,
    "headers": st.none(), "timestamp": st.none(), "id": st.text(max_size=2)})


@settings(max_examples=1500, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(_usual, _bodies, _bodies.map(OrderedDict), st.none(), st.lists(st.integers(), max_size=2)))
def test_the_fast_path_returns_what_the_python_parser_returns_or_declines(body: Any) -> None:
    fast = parse_plain(body)
    try:
        expected = parse_any_produce_request(body)
    except Exception:  # RestError, and whatever else the Python parser raises: its to raise, not the fast path's
        assert fast is None
        return
    assert fast is None or (type(fast) is ProduceRecord and fast == expected)


@pytest.mark.parametrize("body", [
    {"partition_id": 0, "value": {"type": "BINARY", "data": _b64(b"x" * 100)}},  # the bench's record
    {"key": {"type": "STRING", "data": "k\u00e9"}, "value": {"type": "JSON", "data": {"a": [1, 2.5, None]}}},
    {"id": "7", "partition_id": 3, "value": {"type": "BINARY", "data": ""}},  # a records:batch entry
    {"key": {"type": "BINARY", "data": None}, "value": {"type": "JSON", "data": None}, "headers": None,
     "timestamp": None},
    {"partition_id": 2**70, "value": {"type": "JSON", "data": 123456789012345678901234567890}},
    {},
])
def test_the_usual_records_take_the_fast_path(body: dict[str, Any]) -> None:
    fast = parse_plain(body)
    assert fast is not None and type(fast) is ProduceRecord
    assert fast == parse_any_produce_request(body) == parse_produce_request(body)
    assert fast.headers == [] and fast.headers is not parse_plain(body).headers  # each record its own list


@pytest.mark.parametrize("size", range(12))
def test_base64_of_every_padding_is_decoded_as_binascii_does(size: int) -> None:
    data = bytes(range(200, 200 + size))
    record = parse_plain({"value": {"type": "BINARY", "data": _b64(data)}})
    assert record is not None and record.value == binascii.a2b_base64(_b64(data), strict_mode=True) == data
    # Non-zero bits after the last byte: binascii's strict mode ignores them, and so does this.
    assert parse_plain({"value": {"type": "BINARY", "data": "YR=="}}) == parse_any_produce_request(
        {"value": {"type": "BINARY", "data": "YR=="}})


@pytest.mark.parametrize("text", ["Y WJ", "YW-j", "YWI_", "YWJ\n", "éYW", "=QWJ", "Y=WJ", "YWI=YWI=", "YQ==YQ==",
                                  "YR=a", "Y===", "====", "YWJ", "YWJjY"])
def test_base64_that_is_not_canonical_is_left_to_binascii(text: str) -> None:
    body = {"value": {"type": "BINARY", "data": text}}
    assert parse_plain(body) is None
    with pytest.raises(RestError, match="not valid base64"):
        parse_any_produce_request(body)
