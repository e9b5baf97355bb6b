"""Protobuf payloads: the JSON mapping (as Confluent's REST Proxy prints it) ↔ binary, per feature, checked
byte for byte against protobuf's own serializer for classes built from descriptors written by hand."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, json_format, message_factory, text_format, timestamp_pb2
from hypothesis import given, settings
from hypothesis import strategies as st

from dataplane.schemas import PayloadError, Reference, parse_protobuf, protobuf_decode, protobuf_encode
from dataplane.schemas.protobuf_descriptors import file_descriptors
from dataplane.schemas.wire import frame, protobuf_frame, protobuf_unframe, unframe


def p3(body: str, package: str = "acme") -> str:
    return f'syntax = "proto3";\npackage {package};\n{body}\n'


def p2(body: str) -> str:
    return f'syntax = "proto2";\npackage acme;\n{body}\n'


SCALARS = p3("message M { double d = 1; float f = 2; int32 i32 = 3; int64 i64 = 4; uint32 u32 = 5; uint64 u64 = 6;"
             " sint32 s32 = 7; sint64 s64 = 8; fixed32 x32 = 9; fixed64 x64 = 10; sfixed32 y32 = 11;"
             " sfixed64 y64 = 12; bool b = 13; string s = 14; bytes raw = 15; }")
SCALARS_ZERO = {"d": 0.0, "f": 0.0, "i32": 0, "i64": "0", "u32": 0, "u64": "0", "s32": 0, "s64": "0", "x32": 0,
                "x64": "0", "y32": 0, "y64": "0", "b": False, "s": "", "raw": ""}
NESTED = p3("message Order { Line line = 1; repeated Line lines = 2; Line.Note note = 3;"
            " message Line { string sku = 1; int32 qty = 2; message Note { string text = 1; } } }")
ENUMS = p3("enum Color { RED = 0; GREEN = 1; } message M { Color c = 1; Size size = 2; repeated Color cs = 3;"
           " enum Size { SMALL = 0; LARGE = 1; } }")
ONEOF = p3("message M { oneof choice { string name = 1; int32 id = 2; Sub sub = 3; } message Sub { bool on = 1; } }")
MAPS = p3("message M { map<string, int32> counts = 1; map<int64, Sub> subs = 2; map<bool, string> flags = 3;"
          " message Sub { string s = 1; } }")
REPEATED = p3("message M { repeated int32 nums = 1; repeated string words = 2; repeated bytes blobs = 3; }")
OPTIONAL3 = p3("message M { optional int32 maybe = 1; int32 plain = 2; }")
PROTO2 = p2("message M { required string id = 1; optional int32 n = 2 [default = 7]; repeated int32 packed = 3"
            " [packed = true]; repeated int32 loose = 4; optional Kind kind = 5 [default = B];"
            " optional group Extra = 6 { optional string note = 1; } enum Kind { A = 0; B = 1; } }")
NO_PACKAGE = 'syntax = "proto3";\nmessage Plain { string user_name = 1; int32 score = 2 [json_name = "pts"]; }\n'
WELL_KNOWN = p3('import "google/protobuf/timestamp.proto"; import "google/protobuf/duration.proto";'
                ' import "google/protobuf/struct.proto"; import "google/protobuf/wrappers.proto";'
                ' import "google/protobuf/empty.proto"; import "google/protobuf/field_mask.proto";'
                ' import "google/protobuf/any.proto"; import "google/type/date.proto";'
                ' import "confluent/type/decimal.proto";'
                " message M { google.protobuf.Timestamp at = 1; google.protobuf.Duration took = 2;"
                " google.protobuf.Struct attrs = 3; google.protobuf.Int32Value count = 4;"
                " google.protobuf.StringValue label = 5; google.protobuf.Empty nothing = 6;"
                " google.protobuf.FieldMask mask = 7; google.protobuf.Any extra = 8; google.type.Date day = 9;"
                " confluent.type.Decimal price = 10; google.protobuf.Value any_value = 11; }")

# (case, schema, message, value given, value read back: Confluent's REST Proxy JSON with the defaults printed)
ROUND_TRIPS: list[tuple[str, str, str | None, dict[str, Any], dict[str, Any]]] = [
    ("scalars_all_set", SCALARS, None,
     {"d": 1.5, "f": 0.25, "i32": -3, "i64": "-9007199254740993", "u32": 4294967295, "u64": "18446744073709551615",
      "s32": -2, "s64": "-5", "x32": 7, "x64": "8", "y32": -9, "y64": "-10", "b": True, "s": "héllo",
      "raw": base64.b64encode(b"\x00\xff").decode()},
     {"d": 1.5, "f": 0.25, "i32": -3, "i64": "-9007199254740993", "u32": 4294967295, "u64": "18446744073709551615",
      "s32": -2, "s64": "-5", "x32": 7, "x64": "8", "y32": -9, "y64": "-10", "b": True, "s": "héllo",
      "raw": "AP8="}),
    ("scalars_defaults_are_printed", SCALARS, None, {}, SCALARS_ZERO),
    ("int64_given_as_a_number", SCALARS, "M", {"i64": 42}, {**SCALARS_ZERO, "i64": "42"}),
    ("nested_messages", NESTED, "Order",
     {"line": {"sku": "a", "qty": 2}, "lines": [{"sku": "b"}, {}], "note": {"text": "gift"}},
     {"line": {"sku": "a", "qty": 2}, "lines": [{"sku": "b", "qty": 0}, {"sku": "", "qty": 0}],
      "note": {"text": "gift"}}),
    ("nested_message_by_relative_name", NESTED, "Order.Line", {"sku": "x"}, {"sku": "x", "qty": 0}),
    ("nested_message_by_full_name", NESTED, ".acme.Order.Line.Note", {"text": "t"}, {"text": "t"}),
    ("enums_by_name_and_number", ENUMS, None, {"c": "GREEN", "size": 1, "cs": ["GREEN", "RED"]},
     {"c": "GREEN", "size": "LARGE", "cs": ["GREEN", "RED"]}),
    ("oneof_scalar", ONEOF, None, {"id": 5}, {"id": 5}),
    ("oneof_message", ONEOF, None, {"sub": {}}, {"sub": {"on": False}}),
    ("oneof_unset", ONEOF, None, {}, {}),
    ("maps", MAPS, None, {"counts": {"a": 1, "b": 2}, "subs": {"-7": {"s": "x"}}, "flags": {"true": "yes"}},
     {"counts": {"a": 1, "b": 2}, "subs": {"-7": {"s": "x"}}, "flags": {"true": "yes"}}),
    ("repeated", REPEATED, None, {"nums": [1, -1, 300], "words": ["a", ""], "blobs": ["AQI="]},
     {"nums": [1, -1, 300], "words": ["a", ""], "blobs": ["AQI="]}),
    ("proto3_optional_absent", OPTIONAL3, None, {}, {"plain": 0}),
    ("proto3_optional_zero_is_present", OPTIONAL3, None, {"maybe": 0}, {"maybe": 0, "plain": 0}),
    ("proto2_required_and_defaults", PROTO2, None, {"id": "k"}, {"id": "k", "packed": [], "loose": []}),
    ("proto2_all_set", PROTO2, None,
     {"id": "k", "n": 0, "packed": [1, 2], "loose": [3], "kind": "A", "extra": {"note": "n"}},
     {"id": "k", "n": 0, "packed": [1, 2], "loose": [3], "kind": "A", "extra": {"note": "n"}}),
    ("proto_names_accepted_json_names_printed", NO_PACKAGE, "Plain", {"user_name": "ada", "pts": 3},
     {"userName": "ada", "pts": 3}),
    ("well_known_types", WELL_KNOWN, None,
     {"at": "2024-02-29T12:30:00.500Z", "took": "1.5s", "attrs": {"k": [1, "two", None, {"x": True}]},
      "count": 0, "label": "l", "nothing": {}, "mask": "a.b,cD",
      "extra": {"@type": "type.googleapis.com/google.protobuf.Duration", "value": "2s"},
      "day": {"year": 2024, "month": 2, "day": 29}, "price": {"value": "AQ==", "precision": 3, "scale": 1},
      "anyValue": "text"},
     {"at": "2024-02-29T12:30:00.500Z", "took": "1.500s", "attrs": {"k": [1.0, "two", None, {"x": True}]},
      "count": 0, "label": "l", "nothing": {}, "mask": "a.b,cD",
      "extra": {"@type": "type.googleapis.com/google.protobuf.Duration", "value": "2s"},
      "day": {"year": 2024, "month": 2, "day": 29}, "price": {"value": "AQ==", "precision": 3, "scale": 1},
      "anyValue": "text"}),
]


@pytest.mark.parametrize(("text", "message", "value", "expected"), [c[1:] for c in ROUND_TRIPS],
                         ids=[c[0] for c in ROUND_TRIPS])
def test_round_trip(text: str, message: str | None, value: dict[str, Any], expected: dict[str, Any]) -> None:
    schema = parse_protobuf(text)
    indexes, payload = protobuf_encode(schema, value, message)
    assert protobuf_decode(schema, indexes, payload) == expected


INDEXES = [
    ("first_message_by_default", NESTED, None, [0]),
    ("nested", NESTED, "Order.Line", [0, 0]),
    ("twice_nested", NESTED, "acme.Order.Line.Note", [0, 0, 0]),
    ("second_top_level", p3("message A { } message B { }"), "B", [1]),
]


@pytest.mark.parametrize(("text", "message", "indexes"), [c[1:] for c in INDEXES], ids=[c[0] for c in INDEXES])
def test_message_indexes(text: str, message: str | None, indexes: list[int]) -> None:
    assert protobuf_encode(parse_protobuf(text), {}, message)[0] == indexes


def test_imports_of_other_files_transitively() -> None:
    common = p3('import "units.proto"; message Money { int64 cents = 1; units.Currency currency = 2; }', "common")
    units = p3("enum Currency { EUR = 0; USD = 1; }", "units")
    shop = p3('import "common.proto"; message Item { string name = 1; common.Money price = 2; }', "shop")
    resolved = {"common.proto": common, "units.proto": units}
    schema = parse_protobuf(shop, [Reference("common.proto", "common", 1)], resolved)
    value = {"name": "pen", "price": {"cents": "250", "currency": "USD"}}
    indexes, payload = protobuf_encode(schema, value)
    assert protobuf_decode(schema, indexes, payload) == value
    assert [f.name for f in file_descriptors(schema)] == ["units.proto", "common.proto", "schema.proto"]


def test_a_well_known_file_given_as_a_reference_is_used() -> None:
    """Java clients with ``skip.known.types=false`` register google/protobuf/timestamp.proto as a subject."""
    timestamp = p3("message Timestamp { int64 seconds = 1; int32 nanos = 2; }", "google.protobuf")
    text = p3('import "google/protobuf/timestamp.proto"; message M { google.protobuf.Timestamp at = 1; }')
    path = "google/protobuf/timestamp.proto"
    schema = parse_protobuf(text, [Reference(path, path, 1)], {path: timestamp})
    indexes, payload = protobuf_encode(schema, {"at": "2020-01-01T00:00:00Z"})
    assert payload == b"\n\x06\x08\x80\xc2\xaf\xf0\x05"
    assert protobuf_decode(schema, indexes, payload) == {"at": "2020-01-01T00:00:00Z"}


def test_an_import_named_like_the_schemas_own_file() -> None:
    schema = parse_protobuf(p3('import "schema.proto"; message M { other.O o = 1; }'),
                            [Reference("schema.proto", "s", 1)], {"schema.proto": p3("message O { }", "other")})
    assert [f.name for f in file_descriptors(schema)] == ["schema.proto", "_schema.proto"]
    assert protobuf_decode(schema, *protobuf_encode(schema, {"o": {}})) == {"o": {}}


def test_a_schema_the_descriptor_pool_refuses_is_a_payload_error() -> None:
    schema = parse_protobuf(p3("message M { int32 foo_bar = 1; int32 fooBar = 2; }"))
    with pytest.raises(PayloadError, match=r"schema cannot encode Protobuf payloads: .*duplicate json_name"):
        protobuf_encode(schema, {})


def test_framed_round_trip() -> None:
    schema = parse_protobuf(NESTED)
    data = protobuf_frame(42, schema, {"sku": "s", "qty": 1}, "Order.Line")
    assert unframe(data, protobuf=True)[:2] == (42, (0, 0))
    assert protobuf_unframe(data, {42: schema}.__getitem__) == (42, {"sku": "s", "qty": 1})


def test_the_pool_is_built_once_per_schema() -> None:
    schema = parse_protobuf(NESTED)
    protobuf_encode(schema, {})
    pool = schema.cache["pool"]
    protobuf_decode(schema, [0], b"")
    assert schema.cache["pool"] is pool


BAD_VALUES = [
    ("unknown_message", NESTED, "Nope", {}, "no message 'Nope' in the Protobuf schema"),
    ("not_an_object", NESTED, None, [1], "expected a JSON object, got list"),
    ("unknown_field", NESTED, "Order.Line", {"sku": "a", "color": "red"}, "no field named \"color\""),
    ("string_for_int", NESTED, "Order.Line", {"qty": "many"}, "Failed to parse qty field"),
    ("int32_overflow", NESTED, "Order.Line", {"qty": 2**31}, "Value out of range"),
    ("unknown_enum_name", ENUMS, None, {"c": "BLUE"}, "Invalid enum value BLUE"),
    ("object_for_repeated", REPEATED, None, {"nums": {"a": 1}}, "repeated field nums must be in \\[\\] which is"),
    ("bad_timestamp", WELL_KNOWN, None, {"at": "yesterday"}, "Failed to parse at field: Failed to parse timestamp"),
    ("proto2_required_missing", PROTO2, None, {"n": 1}, "required fields missing: id"),
    ("two_members_of_a_oneof", ONEOF, None, {"name": "a", "id": 1}, "oneof"),
]


@pytest.mark.parametrize(("text", "message", "value", "error"), [c[1:] for c in BAD_VALUES],
                         ids=[c[0] for c in BAD_VALUES])
def test_values_that_do_not_fit(text: str, message: str | None, value: Any, error: str) -> None:
    with pytest.raises(PayloadError, match=error):
        protobuf_encode(parse_protobuf(text), value, message)


BAD_BYTES = [
    ("truncated_varint", NESTED, [0, 0], b"\x10\x80", "does not decode as the Protobuf message 'acme.Order.Line'"),
    ("length_beyond_the_end", NESTED, [0, 0], b"\x0a\x05ab", "does not decode"),
    ("invalid_wire_type", NESTED, [0, 0], b"\x0f", "does not decode"),
    ("field_number_zero", NESTED, [0, 0], b"\x00\x01", "does not decode"),
    ("invalid_utf8_in_a_string", NESTED, [0, 0], b"\x0a\x01\xff", "does not decode"),
    ("proto2_required_missing", PROTO2, [0], b"\x10\x01", "required fields missing: id"),
    ("index_beyond_the_messages", NESTED, [3], b"", "message indexes \\[3\\] designate no message"),
    ("nested_index_beyond", NESTED, [0, 0, 1], b"", "designate no message"),
]


@pytest.mark.parametrize(("text", "indexes", "payload", "error"), [c[1:] for c in BAD_BYTES],
                         ids=[c[0] for c in BAD_BYTES])
def test_bytes_that_do_not_decode(text: str, indexes: list[int], payload: bytes, error: str) -> None:
    with pytest.raises(PayloadError, match=error):
        protobuf_decode(parse_protobuf(text), indexes, payload)


# The same messages written by hand as descriptors (as protoc would emit them), independent of our converter.
HAND_WRITTEN = """
name: "hand.proto" package: "acme" dependency: "google/protobuf/timestamp.proto"
message_type {
  name: "Order"
  field { name: "id" number: 1 label: LABEL_OPTIONAL type: TYPE_INT64 }
  field { name: "tags" number: 2 label: LABEL_REPEATED type: TYPE_STRING }
  field { name: "qty" number: 3 label: LABEL_REPEATED type: TYPE_SINT32 }
  field { name: "line" number: 4 label: LABEL_OPTIONAL type: TYPE_MESSAGE type_name: ".acme.Order.Line" }
  field { name: "state" number: 5 label: LABEL_OPTIONAL type: TYPE_ENUM type_name: ".acme.State" }
  field { name: "counts" number: 6 label: LABEL_REPEATED type: TYPE_MESSAGE type_name: ".acme.Order.CountsEntry" }
  field { name: "code" number: 7 label: LABEL_OPTIONAL type: TYPE_STRING oneof_index: 0 }
  field { name: "ref" number: 8 label: LABEL_OPTIONAL type: TYPE_FIXED64 oneof_index: 0 }
  field { name: "at" number: 9 label: LABEL_OPTIONAL type: TYPE_MESSAGE type_name: ".google.protobuf.Timestamp" }
  field { name: "ratio" number: 10 label: LABEL_OPTIONAL type: TYPE_DOUBLE oneof_index: 1 proto3_optional: true }
  nested_type { name: "Line" field { name: "sku" number: 1 label: LABEL_OPTIONAL type: TYPE_BYTES } }
  nested_type {
    name: "CountsEntry" options { map_entry: true }
    field { name: "key" number: 1 label: LABEL_OPTIONAL type: TYPE_STRING }
    field { name: "value" number: 2 label: LABEL_OPTIONAL type: TYPE_UINT32 }
  }
  oneof_decl { name: "ref_kind" }
  oneof_decl { name: "_ratio" }
}
enum_type { name: "State" value { name: "NEW" number: 0 } value { name: "DONE" number: 1 } }
syntax: "proto3"
"""
HAND_TEXT = p3('import "google/protobuf/timestamp.proto";'
               " message Order { int64 id = 1; repeated string tags = 2; repeated sint32 qty = 3; Line line = 4;"
               " State state = 5; map<string, uint32> counts = 6; oneof ref_kind { string code = 7; fixed64 ref = 8; }"
               " google.protobuf.Timestamp at = 9; optional double ratio = 10; message Line { bytes sku = 1; } }"
               " enum State { NEW = 0; DONE = 1; }")
HAND_WRITTEN_2 = """
name: "hand2.proto" package: "acme"
message_type {
  name: "M"
  field { name: "id" number: 1 label: LABEL_REQUIRED type: TYPE_STRING }
  field { name: "packed" number: 3 label: LABEL_REPEATED type: TYPE_INT32 options { packed: true } }
  field { name: "loose" number: 4 label: LABEL_REPEATED type: TYPE_INT32 }
  field { name: "extra" number: 6 label: LABEL_OPTIONAL type: TYPE_GROUP type_name: ".acme.M.Extra" }
  nested_type { name: "Extra" field { name: "note" number: 1 label: LABEL_OPTIONAL type: TYPE_STRING } }
}
"""
HAND_TEXT_2 = p2("message M { required string id = 1; repeated int32 packed = 3 [packed = true];"
                 " repeated int32 loose = 4; optional group Extra = 6 { optional string note = 1; } }")
BYTES_CASES = [
    ("proto3", HAND_WRITTEN, HAND_TEXT, "acme.Order",
     {"id": "-12", "tags": ["a", "b"], "qty": [-1, 64, 0], "line": {"sku": "AAE="}, "state": "DONE",
      "counts": {"z": 1, "a": 2}, "ref": "77", "at": "2001-02-03T04:05:06Z", "ratio": 0.0}),
    ("proto3_defaults_and_other_oneof_member", HAND_WRITTEN, HAND_TEXT, "acme.Order", {"code": ""}),
    ("proto2_packed_unpacked_and_group", HAND_WRITTEN_2, HAND_TEXT_2, "acme.M",
     {"id": "x", "packed": [1, 2, 3], "loose": [4, 5], "extra": {"note": "n"}}),
]


@pytest.mark.parametrize(("hand", "text", "name", "value"), [c[1:] for c in BYTES_CASES],
                         ids=[c[0] for c in BYTES_CASES])
def test_bytes_match_protobufs_own_serializer(hand: str, text: str, name: str, value: dict[str, Any]) -> None:
    pool = descriptor_pool.DescriptorPool()
    pool.AddSerializedFile(timestamp_pb2.DESCRIPTOR.serialized_pb)
    pool.AddSerializedFile(text_format.Parse(hand, descriptor_pb2.FileDescriptorProto()).SerializeToString())
    reference = message_factory.GetMessageClass(pool.FindMessageTypeByName(name))
    expected = json_format.ParseDict(value, reference()).SerializeToString(deterministic=True)
    schema = parse_protobuf(text)
    indexes, payload = protobuf_encode(schema, value, name)
    assert payload == expected
    assert protobuf_decode(schema, indexes, expected) == json_format.MessageToDict(
        reference.FromString(expected), always_print_fields_with_no_presence=True)


def test_a_base64_descriptor_reads_as_the_same_schema() -> None:
    """What Confluent's Python serializer registers: the base64 FileDescriptorProto of the message's file."""
    hand = text_format.Parse(HAND_WRITTEN, descriptor_pb2.FileDescriptorProto())
    from_descriptor = parse_protobuf(base64.b64encode(hand.SerializeToString()).decode())
    assert from_descriptor.normalized() == parse_protobuf(HAND_TEXT).normalized()
    proto2 = text_format.Parse(HAND_WRITTEN_2, descriptor_pb2.FileDescriptorProto())
    assert parse_protobuf(base64.b64encode(proto2.SerializeToString()).decode()) == parse_protobuf(HAND_TEXT_2)


def test_our_descriptors_render_back_to_the_schema() -> None:
    for text in (SCALARS, NESTED, ENUMS, ONEOF, MAPS, OPTIONAL3, PROTO2, NO_PACKAGE, WELL_KNOWN):
        schema = parse_protobuf(text)
        serialized = base64.b64encode(file_descriptors(schema)[-1].SerializeToString()).decode()
        assert parse_protobuf(serialized).normalized() == schema.normalized(), text


def test_framing_our_payload_for_another_reader() -> None:
    schema = parse_protobuf(HAND_TEXT)
    indexes, payload = protobuf_encode(schema, {"id": "1"}, "Order")
    assert frame(3, payload, indexes) == b"\x00\x00\x00\x00\x03\x00" + payload


HAND_SCHEMA = parse_protobuf(HAND_TEXT)
_INT64 = st.integers(-(2**63), 2**63 - 1)
ORDERS = st.fixed_dictionaries({}, optional={
    "id": _INT64.map(str),
    "tags": st.lists(st.text(max_size=5), max_size=3),
    "qty": st.lists(st.integers(-(2**31), 2**31 - 1), max_size=4),
    "line": st.fixed_dictionaries({}, optional={"sku": st.binary(max_size=4).map(
        lambda b: base64.b64encode(b).decode())}),
    "state": st.sampled_from(["NEW", "DONE"]),
    "counts": st.dictionaries(st.text(max_size=3), st.integers(0, 2**32 - 1), max_size=3),
    "ref": st.integers(0, 2**64 - 1).map(str),
    "ratio": st.floats(allow_nan=False, allow_infinity=False),
})


@settings(max_examples=150, deadline=None)
@given(ORDERS)
def test_any_order_matches_protobufs_own_serializer(value: dict[str, Any]) -> None:
    pool = descriptor_pool.DescriptorPool()
    pool.AddSerializedFile(timestamp_pb2.DESCRIPTOR.serialized_pb)
    pool.AddSerializedFile(text_format.Parse(HAND_WRITTEN, descriptor_pb2.FileDescriptorProto()).SerializeToString())
    reference = message_factory.GetMessageClass(pool.FindMessageTypeByName("acme.Order"))
    expected = json_format.ParseDict(value, reference()).SerializeToString(deterministic=True)
    indexes, payload = protobuf_encode(HAND_SCHEMA, value)
    assert payload == expected
    assert protobuf_decode(HAND_SCHEMA, indexes, payload) == json_format.MessageToDict(
        reference.FromString(expected), always_print_fields_with_no_presence=True)

