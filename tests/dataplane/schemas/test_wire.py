"""Confluent framing (magic, id, Protobuf message indexes) and the Avro and JSON payload codecs."""

from __future__ import annotations

import io
import json
from typing import Any

import fastavro
import pytest

from dataplane.schemas import parse_avro, parse_json_schema
from dataplane.schemas.avro import native_converter, native_of_json
from dataplane.schemas.wire import (
    PayloadError,
    WireFormatError,
    avro_decode,
    avro_encode,
    avro_encoder,
    frame,
    json_decode,
    json_encode,
    json_validate,
    unframe,
)

FRAMES = [
    ("avro_payload", 1, None, b"\x02x", b"\x00\x00\x00\x00\x01\x02x"),
    ("largest_id", 2**32 - 1, None, b"", b"\x00\xff\xff\xff\xff"),
    ("protobuf_first_message_shortcut", 7, [0], b"p", b"\x00\x00\x00\x00\x07\x00p"),
    ("protobuf_empty_indexes_are_the_first_message", 7, [], b"p", b"\x00\x00\x00\x00\x07\x00p"),
    ("protobuf_second_message", 7, [1], b"p", b"\x00\x00\x00\x00\x07\x02\x02p"),
    ("protobuf_nested", 7, [1, 2], b"p", b"\x00\x00\x00\x00\x07\x04\x02\x04p"),
    ("protobuf_index_needing_two_bytes", 7, [64], b"", b"\x00\x00\x00\x00\x07\x02\x80\x01"),
]


@pytest.mark.parametrize(("schema_id", "indexes", "payload", "wire"), [c[1:] for c in FRAMES],
                         ids=[c[0] for c in FRAMES])
def test_frame_round_trip(schema_id: int, indexes: list[int] | None, payload: bytes, wire: bytes) -> None:
    assert frame(schema_id, payload, indexes) == wire
    expected_indexes = () if indexes is None else tuple(indexes or [0])
    assert unframe(wire, protobuf=indexes is not None) == (schema_id, expected_indexes, payload)


BAD_FRAMES = [
    ("empty", b"", False, "too short"),
    ("short_header", b"\x00\x00\x00\x01", False, "too short"),
    ("bad_magic", b"\x01\x00\x00\x00\x01x", False, "unknown magic byte 1"),
    ("protobuf_missing_indexes", b"\x00\x00\x00\x00\x01", True, "truncated"),
    ("protobuf_truncated_varint", b"\x00\x00\x00\x00\x01\x80", True, "truncated"),
    ("protobuf_negative_count", b"\x00\x00\x00\x00\x01\x01", True, "invalid message index count -1"),
    ("protobuf_indexes_shorter_than_count", b"\x00\x00\x00\x00\x01\x06\x02", True, "truncated"),
]


@pytest.mark.parametrize(("wire", "protobuf", "message"), [c[1:] for c in BAD_FRAMES],
                         ids=[c[0] for c in BAD_FRAMES])
def test_unframe_rejects(wire: bytes, protobuf: bool, message: str) -> None:
    with pytest.raises(WireFormatError, match=message):
        unframe(wire, protobuf=protobuf)


def test_frame_rejects_an_id_beyond_four_bytes() -> None:
    with pytest.raises(WireFormatError):
        frame(2**32, b"")


USER = json.dumps({
    "type": "record", "name": "User", "namespace": "acme", "fields": [
        {"name": "id", "type": "long"},
        {"name": "email", "type": ["null", "string"], "default": None},
        {"name": "role", "type": {"type": "enum", "name": "Role", "symbols": ["ADMIN", "USER"]}},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "scores", "type": {"type": "map", "values": "double"}},
        {"name": "raw", "type": "bytes"},
        {"name": "hash", "type": {"type": "fixed", "name": "Hash", "size": 2}},
        {"name": "home", "type": ["null", {"type": "record", "name": "Address",
                                           "fields": [{"name": "street", "type": "string"}]}]},
    ]})
USER_VALUE = {"id": 1, "email": {"string": "a@b"}, "role": "ADMIN", "tags": ["x"], "scores": {"m": 1.5},
              "raw": "\u00ff\u0000", "hash": "ab", "home": {"acme.Address": {"street": "Main"}}}

ROUND_TRIPS = [
    ("record_with_unions_enum_collections_bytes_fixed", USER, USER_VALUE, None),
    ("null_union_branch", USER, {**USER_VALUE, "email": None, "home": None}, None),
    ("int", '"int"', -3, b"\x05"),
    ("string", '"string"', "hé", b"\x06h\xc3\xa9"),
    ("top_level_union", '["null", "long"]', {"long": 2}, b"\x02\x04"),
    ("boolean", '"boolean"', True, b"\x01"),
]


@pytest.mark.parametrize(("schema", "value", "binary"), [c[1:] for c in ROUND_TRIPS], ids=[c[0] for c in ROUND_TRIPS])
def test_avro_round_trip(schema: str, value: Any, binary: bytes | None) -> None:
    parsed = parse_avro(schema)
    encoded = avro_encode(parsed, value)
    if binary is not None:
        assert encoded == binary
    assert avro_decode(parsed, encoded) == value


def test_avro_missing_field_takes_its_default() -> None:
    parsed = parse_avro(USER)
    value = {k: v for k, v in USER_VALUE.items() if k != "email"}
    assert avro_decode(parsed, avro_encode(parsed, value))["email"] is None


BAD_VALUES = [
    ("wrong_type", {**USER_VALUE, "id": "1"}, "$.id: expected long, got str"),
    ("missing_field_without_default", {k: v for k, v in USER_VALUE.items() if k != "id"}, "missing field 'id'"),
    ("unknown_field", {**USER_VALUE, "nope": 1}, "has no field 'nope'"),
    ("union_without_branch_name", {**USER_VALUE, "email": "a@b"}, "a union value is written"),
    ("unknown_union_branch", {**USER_VALUE, "email": {"int": 1}}, "'int' is not a branch"),
    ("unknown_enum_symbol", {**USER_VALUE, "role": "ROOT"}, "'ROOT' is not a symbol"),
    ("fixed_of_wrong_size", {**USER_VALUE, "hash": "abc"}, "expected 2 ISO-8859-1 characters"),
    ("bytes_beyond_latin1", {**USER_VALUE, "raw": "\u20ac"}, "ISO-8859-1"),
    ("nested_error_path", {**USER_VALUE, "tags": ["x", 3]}, "$.tags[1]: expected string"),
]


@pytest.mark.parametrize(("value", "message"), [c[1:] for c in BAD_VALUES], ids=[c[0] for c in BAD_VALUES])
def test_avro_encode_rejects(value: Any, message: str) -> None:
    with pytest.raises(PayloadError) as caught:
        avro_encode(parse_avro(USER), value)
    assert message in str(caught.value)


def test_avro_int_out_of_range() -> None:
    with pytest.raises(PayloadError, match="out of range for int"):
        avro_encode(parse_avro('"int"'), 2**31)


@pytest.mark.parametrize(("payload", "message"), [(b"\x02", "does not decode"), (b"\x02\x04\x00", "bytes after")],
                         ids=["truncated", "trailing_bytes"])
def test_avro_decode_rejects(payload: bytes, message: str) -> None:
    with pytest.raises(PayloadError, match=message):
        avro_decode(parse_avro('["null", "long"]'), payload)


PERSON = parse_json_schema(json.dumps({"type": "object", "properties": {"age": {"type": "integer", "minimum": 0}},
                                       "required": ["age"]}))


def test_json_payload_round_trip_and_errors() -> None:
    assert json_decode(PERSON, json_encode(PERSON, {"age": 3})) == {"age": 3}
    with pytest.raises(PayloadError, match="at '#/age': -1 is less than the minimum of 0"):
        json_validate(PERSON, {"age": -1})
    with pytest.raises(PayloadError, match="'age' is a required property"):
        json_encode(PERSON, {})
    with pytest.raises(PayloadError, match="not JSON"):
        json_decode(PERSON, b"{")


LOGICAL = json.dumps({"type": "record", "name": "Tick", "fields": [
    {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "day", "type": {"type": "int", "logicalType": "date"}},
    {"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}},
    {"name": "id", "type": {"type": "string", "logicalType": "uuid"}},
    {"name": "ratio", "type": "float"}]})
LOGICAL_VALUE = {"at": 1_700_000_000_000, "day": 19_000, "price": "\u0001\u00f4", "id":
                 "1b4e28ba-2fa1-11d2-883f-0016d3cca427", "ratio": 2}


@pytest.mark.parametrize(("schema", "value"), [(USER, USER_VALUE), (LOGICAL, LOGICAL_VALUE),
                                               ('["null", "string", "bytes"]', {"bytes": "\u00e9"})])
def test_avro_encode_writes_what_fastavros_json_decoder_writes(schema: str, value: Any) -> None:
    """The encoder's own JSON-encoding walk against fastavro's JSON decoder as the oracle, byte for byte."""
    parsed = parse_avro(schema)
    record = next(iter(fastavro.json_reader(io.StringIO(json.dumps({"v": value})), parsed.codec)))
    expected = io.BytesIO()
    fastavro.schemaless_writer(expected, parsed.codec, record)
    assert avro_encode(parsed, value) == expected.getvalue()


RECURSIVE = json.dumps({"type": "record", "name": "Node", "fields": [
    {"name": "label", "type": "string"}, {"name": "next", "type": ["null", "Node"], "default": None}]})
ENCODER_CASES = [
    *((f"round_trip_{c[0]}", c[1], c[2]) for c in ROUND_TRIPS),
    *((f"bad_{c[0]}", USER, c[1]) for c in BAD_VALUES),
    ("missing_field_with_default", USER, {k: v for k, v in USER_VALUE.items() if k != "email"}),
    ("double_written_as_integer", USER, {**USER_VALUE, "scores": {"m": 2}}),
    ("short_branch_name", USER, {**USER_VALUE, "home": {"Address": {"street": "Main"}}}),
    ("bool_for_long", USER, {**USER_VALUE, "id": True}),
    ("long_out_of_range", USER, {**USER_VALUE, "id": 2**63}),
    ("not_an_object", USER, [1]),
    ("logical_types", LOGICAL, LOGICAL_VALUE),
    ("recursive", RECURSIVE, {"label": "a", "next": {"Node": {"label": "b", "next": None}}}),
    ("recursive_bad_inner", RECURSIVE, {"label": "a", "next": {"Node": {"label": 2}}}),
    ("top_level_union_null", '["null", "long"]', None),
    ("top_level_union_bad", '["null", "long"]', 3),
]


@pytest.mark.parametrize(("schema", "value"), [c[1:] for c in ENCODER_CASES], ids=[c[0] for c in ENCODER_CASES])
def test_avro_encoder_writes_and_refuses_exactly_as_avro_encode(schema: str, value: Any) -> None:
    """The prepared encoder (compiled checks, no wrapper record) against the one-value path: the same bytes, or
    the same PayloadError message, for values on its fast path and off it."""
    parsed = parse_avro(schema)
    encode = avro_encoder(parsed)
    try:
        expected: Any = avro_encode(parsed, value)
    except PayloadError as exc:
        with pytest.raises(PayloadError) as caught:
            encode(value)
        assert str(caught.value) == str(exc)
    else:
        assert encode(value) == expected
        assert native_converter(parsed)(value) == native_of_json(parsed, value)
