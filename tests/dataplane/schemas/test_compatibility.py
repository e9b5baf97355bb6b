"""Compatibility levels over a history: latest-only vs transitive, directions, and mixed schema types."""

from __future__ import annotations

import json
from typing import Any

import pytest

from dataplane.schemas import CompatibilityLevel, SchemaError, SchemaType, check, parse_schema

L = CompatibilityLevel


def avro(*fields: dict[str, Any]) -> Any:
    return parse_schema(SchemaType.AVRO, json.dumps({"type": "record", "name": "R", "fields": list(fields)}))


A = {"name": "a", "type": "int"}
B = {"name": "b", "type": "string"}
B_DEFAULT = {"name": "b", "type": "string", "default": ""}

# v1 {a}, v2 {a, b=""}: the new {a, b} (no default) reads v2 but not v1.
BACKWARD_HISTORY = [avro(A), avro(A, B_DEFAULT)]
# v1 {a, b}, v2 {a} (registered under NONE): v2 reads the new {a}, v1 does not (b has no default).
FORWARD_HISTORY = [avro(A, B), avro(A)]

CASES = [
    ("backward_checks_latest_only", L.BACKWARD, BACKWARD_HISTORY, avro(A, B), []),
    ("backward_transitive_checks_every_version", L.BACKWARD_TRANSITIVE, BACKWARD_HISTORY, avro(A, B),
     ["BACKWARD (new schema reading version 1)"]),
    ("forward_checks_latest_only", L.FORWARD, FORWARD_HISTORY, avro(A), []),
    ("forward_transitive_checks_every_version", L.FORWARD_TRANSITIVE, FORWARD_HISTORY, avro(A),
     ["FORWARD (version 1 reading the new schema)"]),
    ("full_fails_forward_half", L.FULL, [avro(A, B)], avro(A),
     ["FORWARD (version 1 reading the new schema)"]),
    ("full_fails_backward_half", L.FULL, [avro(A)], avro(A, B), ["BACKWARD (new schema reading version 1)"]),
    ("full_passes_with_defaults", L.FULL, [avro(A)], avro(A, B_DEFAULT), []),
    ("full_transitive_reports_each_version", L.FULL_TRANSITIVE, [avro(A), avro(A)], avro(A, B),
     ["version 2", "version 1"]),
    ("none_accepts_anything", L.NONE, [avro(A)], avro({"name": "a", "type": "string"}), []),
    ("empty_history_accepts_anything", L.FULL_TRANSITIVE, [], avro(A), []),
]


@pytest.mark.parametrize(("level", "history", "new", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_levels(level: CompatibilityLevel, history: list[Any], new: Any, expected: list[str]) -> None:
    problems = check(new, history, level)
    if not expected:
        assert problems == []
    for prefix, problem in zip(expected, problems, strict=True):
        assert prefix in problem


def test_different_schema_types_are_incompatible() -> None:
    json_schema = parse_schema(SchemaType.JSON, '{"type": "object"}')
    [problem] = check(json_schema, [avro(A)], L.BACKWARD)
    assert problem == "Incompatible schema type: new JSON, version 1 AVRO"


def test_json_and_protobuf_through_check() -> None:
    old = parse_schema(SchemaType.JSON, '{"type": "object", "properties": {"a": {"type": "string"}}}')
    new = parse_schema(SchemaType.JSON, '{"type": "object", "properties": {"a": {"type": "integer"}}}')
    assert check(new, [old], L.BACKWARD) != []
    proto_old = parse_schema(SchemaType.PROTOBUF, 'syntax = "proto3"; message M { int32 a = 1; }')
    proto_new = parse_schema(SchemaType.PROTOBUF, 'syntax = "proto3"; message M { int64 a = 1; string b = 2; }')
    assert check(proto_new, [proto_old], L.FULL_TRANSITIVE) == []


@pytest.mark.parametrize(("given", "expected"), [(None, SchemaType.AVRO), ("", SchemaType.AVRO),
                                                 ("JSON", SchemaType.JSON), ("protobuf", SchemaType.PROTOBUF)],
                         ids=["omitted_is_avro", "empty_is_avro", "json", "lowercase_protobuf"])
def test_schema_type_from_request(given: str | None, expected: SchemaType) -> None:
    assert SchemaType.from_request(given) is expected


def test_unknown_schema_type() -> None:
    with pytest.raises(SchemaError, match="Unknown schema type: 'XML'"):
        SchemaType.from_request("XML")


def test_level_properties() -> None:
    assert [lv for lv in L if lv.backward] == [L.BACKWARD, L.BACKWARD_TRANSITIVE, L.FULL, L.FULL_TRANSITIVE]
    assert [lv for lv in L if lv.transitive] == [L.BACKWARD_TRANSITIVE, L.FORWARD_TRANSITIVE, L.FULL_TRANSITIVE]
