"""Avro payloads as plain Python values: resolution to a reader schema, logical types, clear errors."""

from __future__ import annotations

import datetime
import decimal
import json

import pytest

from dataplane.schemas import parse_avro
from dataplane.schemas.native import avro_decode_native, avro_encode_native
from dataplane.schemas.wire import PayloadError, avro_encode

V1 = {"type": "record", "name": "User", "fields": [{"name": "name", "type": "string"},
                                                   {"name": "age", "type": "int"}]}
V2 = {**V1, "fields": [*V1["fields"], {"name": "email", "type": ["null", "string"], "default": None},
                       {"name": "score", "type": "long", "default": 7}]}


def test_an_old_record_reads_as_the_new_version_with_defaults() -> None:
    v1, v2 = parse_avro(json.dumps(V1)), parse_avro(json.dumps(V2))
    payload = avro_encode_native(v1, {"name": "ada", "age": 36})
    assert payload == avro_encode(v1, {"name": "ada", "age": 36})  # the same bytes as the JSON-encoding codec
    assert avro_decode_native(v1, payload) == {"name": "ada", "age": 36}
    assert avro_decode_native(v1, payload, v2) == {"name": "ada", "age": 36, "email": None, "score": 7}


def test_logical_types_are_python_values() -> None:
    schema = parse_avro(json.dumps({"type": "record", "name": "L", "fields": [
        {"name": "d", "type": {"type": "int", "logicalType": "date"}},
        {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-micros"}},
        {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}}]}))
    value = {"d": datetime.date(2024, 2, 29), "ts": datetime.datetime(2024, 1, 1, 12, tzinfo=datetime.UTC),
             "amount": decimal.Decimal("12.34")}
    assert avro_decode_native(schema, avro_encode_native(schema, value)) == value


def test_unions_of_several_records_name_the_branch() -> None:
    schema = parse_avro(json.dumps({"type": "record", "name": "W", "fields": [{"name": "u", "type": [
        "null", {"type": "record", "name": "A", "fields": [{"name": "x", "type": "int"}]},
        {"type": "record", "name": "B", "fields": [{"name": "x", "type": "int"}]}]}]}))
    payload = avro_encode_native(schema, {"u": ("B", {"x": 1})})
    assert avro_decode_native(schema, payload) == {"u": ("B", {"x": 1})}


def test_bad_values_and_bytes_are_payload_errors() -> None:
    v1, v2 = parse_avro(json.dumps(V1)), parse_avro(json.dumps(V2))
    with pytest.raises(PayloadError, match=r"age.*expected int"):
        avro_encode_native(v1, {"name": "ada", "age": "old"})
    with pytest.raises(PayloadError, match="does not decode"):
        avro_decode_native(v1, b"\x06ad")
    with pytest.raises(PayloadError, match="bytes after the Avro value"):
        avro_decode_native(v1, avro_encode_native(v1, {"name": "a", "age": 1}) + b"\x00")
    incompatible = parse_avro(json.dumps({**V1, "fields": [{"name": "name", "type": "int"}]}))
    with pytest.raises(PayloadError, match="does not decode"):
        avro_decode_native(v2, avro_encode_native(v1, {"name": "a", "age": 1}), incompatible)
